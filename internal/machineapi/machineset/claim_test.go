package machineset

import (
	"slices"
	"strings"
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// testSet returns a valid MachineSet "workers" selecting set=workers.
func testSet(opts ...func(*machinev1beta1.MachineSet)) *machinev1beta1.MachineSet {
	ms := &machinev1beta1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Name: "workers", Namespace: "ns", UID: "uid-workers", Generation: 3},
		Spec: machinev1beta1.MachineSetSpec{
			Replicas: ptr.To[int32](2),
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"set": "workers"}},
			Template: machinev1beta1.MachineTemplateSpec{
				ObjectMeta: machinev1beta1.ObjectMeta{
					Labels:      map[string]string{"set": "workers", "role": "worker"},
					Annotations: map[string]string{"example.com/note": "from the template"},
				},
				Spec: machinev1beta1.MachineSpec{
					ProviderSpec: machinev1beta1.ProviderSpec{Value: &runtime.RawExtension{Raw: []byte(`{"kind":"KwokMachineProviderConfig"}`)}},
				},
			},
		},
	}
	for _, o := range opts {
		o(ms)
	}
	return ms
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		change  func(*machinev1beta1.MachineSet)
		wantErr string
	}{{
		name:   "accepts a selector that matches the template's labels",
		change: func(*machinev1beta1.MachineSet) {},
	}, {
		name: "accepts a selector of expressions that matches the template's labels",
		change: func(ms *machinev1beta1.MachineSet) {
			ms.Spec.Selector = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "role", Operator: metav1.LabelSelectorOpIn, Values: []string{"worker", "infra"}},
			}}
		},
	}, {
		name:   "accepts a set without replicas: the CRD's default applies",
		change: func(ms *machinev1beta1.MachineSet) { ms.Spec.Replicas = nil },
	}, {
		name:    "refuses an empty selector",
		change:  func(ms *machinev1beta1.MachineSet) { ms.Spec.Selector = metav1.LabelSelector{} },
		wantErr: "spec.selector is empty",
	}, {
		name: "refuses a selector that does not match the template's labels",
		change: func(ms *machinev1beta1.MachineSet) {
			ms.Spec.Selector.MatchLabels = map[string]string{"set": "others"}
		},
		wantErr: "does not match spec.template.metadata.labels",
	}, {
		name:    "refuses a template without labels",
		change:  func(ms *machinev1beta1.MachineSet) { ms.Spec.Template.Labels = nil },
		wantErr: "does not match spec.template.metadata.labels",
	}, {
		name: "refuses a selector that does not parse",
		change: func(ms *machinev1beta1.MachineSet) {
			ms.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "role", Operator: "Near"}}
		},
		wantErr: "spec.selector:",
	}, {
		name:    "refuses negative replicas",
		change:  func(ms *machinev1beta1.MachineSet) { ms.Spec.Replicas = ptr.To[int32](-1) },
		wantErr: "spec.replicas is -1",
	}, {
		name:    "refuses an unknown delete policy",
		change:  func(ms *machinev1beta1.MachineSet) { ms.Spec.DeletePolicy = "Smallest" },
		wantErr: `spec.deletePolicy "Smallest"`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := validate(testSet(tc.change))
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("got %v, want no error", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("got %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestReplicasOf(t *testing.T) {
	if got := replicasOf(testSet(func(ms *machinev1beta1.MachineSet) { ms.Spec.Replicas = nil })); got != 1 {
		t.Errorf("nil replicas: got %d, want the CRD default 1", got)
	}
	if got := replicasOf(testSet(func(ms *machinev1beta1.MachineSet) { ms.Spec.Replicas = ptr.To[int32](0) })); got != 0 {
		t.Errorf("zero replicas: got %d, want 0", got)
	}
}

func controlledBy(uid types.UID) machineOption {
	return func(m *machinev1beta1.Machine) {
		m.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: "machine.openshift.io/v1beta1", Kind: "MachineSet", Name: "workers", UID: uid, Controller: ptr.To(true),
		}}
	}
}

func labelled(kv ...string) machineOption {
	return func(m *machinev1beta1.Machine) {
		m.Labels = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m.Labels[kv[i]] = kv[i+1]
		}
	}
}

func TestClaim(t *testing.T) {
	ms := testSet()
	selector, err := validate(ms)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name                       string
		machine                    *machinev1beta1.Machine
		wantOwned, wantAdopt, want []string
	}{{
		name:      "counts a matching machine it controls",
		machine:   testMachine("m", labelled("set", "workers"), controlledBy("uid-workers")),
		wantOwned: []string{"m"},
	}, {
		name:      "counts a matching machine it controls that is being deleted",
		machine:   testMachine("m", labelled("set", "workers"), controlledBy("uid-workers"), beingDeleted()),
		wantOwned: []string{"m"},
	}, {
		name:      "adopts a matching orphan",
		machine:   testMachine("m", labelled("set", "workers")),
		wantAdopt: []string{"m"},
	}, {
		name:    "does not adopt a matching orphan being deleted",
		machine: testMachine("m", labelled("set", "workers"), beingDeleted()),
	}, {
		name:    "ignores an orphan that does not match",
		machine: testMachine("m", labelled("set", "others")),
	}, {
		name:    "leaves alone a matching machine another set controls",
		machine: testMachine("m", labelled("set", "workers"), controlledBy("uid-other")),
	}, {
		name: "leaves alone a matching machine with another kind of controller",
		machine: testMachine("m", labelled("set", "workers"), func(m *machinev1beta1.Machine) {
			m.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "c", UID: "uid-c", Controller: ptr.To(true)}}
		}),
	}, {
		name: "adopts a matching machine whose only owner is not its controller",
		machine: testMachine("m", labelled("set", "workers"), func(m *machinev1beta1.Machine) {
			m.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "c", UID: "uid-c"}}
		}),
		wantAdopt: []string{"m"},
	}, {
		name:    "releases a machine it controls that no longer matches",
		machine: testMachine("m", labelled("set", "others"), controlledBy("uid-workers")),
		want:    []string{"m"},
	}, {
		name:    "neither counts nor releases a machine it controls that no longer matches and is being deleted",
		machine: testMachine("m", labelled("set", "others"), controlledBy("uid-workers"), beingDeleted()),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			c := claim(ms, selector, []machinev1beta1.Machine{*tc.machine})
			if got := names(c.Owned); !slices.Equal(got, orEmpty(tc.wantOwned)) {
				t.Errorf("owned %v, want %v", got, tc.wantOwned)
			}
			if got := names(c.Adopt); !slices.Equal(got, orEmpty(tc.wantAdopt)) {
				t.Errorf("adopt %v, want %v", got, tc.wantAdopt)
			}
			if got := names(c.Release); !slices.Equal(got, orEmpty(tc.want)) {
				t.Errorf("release %v, want %v", got, tc.want)
			}
		})
	}
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func TestNewMachine(t *testing.T) {
	ms := testSet()
	m := newMachine(ms)
	if m.GenerateName != "workers-" || m.Name != "" || m.Namespace != "ns" {
		t.Errorf("generateName %q, name %q, namespace %q; want workers-, none, ns", m.GenerateName, m.Name, m.Namespace)
	}
	if m.Labels["set"] != "workers" || m.Labels["role"] != "worker" || m.Annotations["example.com/note"] != "from the template" {
		t.Errorf("labels %v, annotations %v: want the template's", m.Labels, m.Annotations)
	}
	if string(m.Spec.ProviderSpec.Value.Raw) != `{"kind":"KwokMachineProviderConfig"}` {
		t.Errorf("providerSpec %s, want the template's", m.Spec.ProviderSpec.Value.Raw)
	}
	ref := metav1.GetControllerOf(m)
	if ref == nil || ref.UID != ms.UID || ref.Kind != "MachineSet" || ref.APIVersion != "machine.openshift.io/v1beta1" || !ptr.Deref(ref.BlockOwnerDeletion, false) {
		t.Errorf("controller reference %+v, want MachineSet workers blocking owner deletion", ref)
	}
	m.Labels["set"] = "changed"
	m.Spec.ProviderSpec.Value.Raw[0] = '['
	if ms.Spec.Template.Labels["set"] != "workers" || ms.Spec.Template.Spec.ProviderSpec.Value.Raw[0] != '{' {
		t.Error("changing the machine changed the set's template")
	}
}
