package trigger_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/plugin/trigger"
	"github.com/pitstop-dev/pitstop/internal/scheme"
)

func TestNewRefusesKeysTheNodeOrPitstopCannotTake(t *testing.T) {
	value := func(v string) *string { return &v }
	for _, tc := range []struct {
		name string
		inst pitstopv1alpha1.TriggerInstance
		want string // "" when accepted
	}{
		{"accepts a label with a domain", pitstopv1alpha1.TriggerInstance{AlterLabel: &pitstopv1alpha1.AlterTrigger{Key: "example.com/rebooted", Value: value("yes")}}, ""},
		{"accepts removing a label whatever its value", pitstopv1alpha1.TriggerInstance{AlterLabel: &pitstopv1alpha1.AlterTrigger{Key: "rebooted", Remove: true}}, ""},
		{"accepts an annotation value no label could hold", pitstopv1alpha1.TriggerInstance{AlterAnnotation: &pitstopv1alpha1.AlterTrigger{Key: "note", Value: value("rebooted at 02:00, see ticket #42")}}, ""},
		{"refuses a label value the node cannot hold", pitstopv1alpha1.TriggerInstance{AlterLabel: &pitstopv1alpha1.AlterTrigger{Key: "rebooted", Value: value("at 02:00")}}, `alterLabel.value "at 02:00"`},
		{"refuses a key that is not a qualified name", pitstopv1alpha1.TriggerInstance{AlterAnnotation: &pitstopv1alpha1.AlterTrigger{Key: "two words", Value: value("x")}}, `alterAnnotation.key "two words"`},
		{"refuses the cordon record", pitstopv1alpha1.TriggerInstance{AlterAnnotation: &pitstopv1alpha1.AlterTrigger{Key: "pitstop.dev/cordoned-before", Remove: true}}, "pitstop's own records"},
		{"refuses the state label", pitstopv1alpha1.TriggerInstance{AlterLabel: &pitstopv1alpha1.AlterTrigger{Key: "pitstop.dev/state", Value: value("operational")}}, "pitstop's own records"},
		{"refuses a subdomain of pitstop's", pitstopv1alpha1.TriggerInstance{AlterLabel: &pitstopv1alpha1.AlterTrigger{Key: "x.pitstop.dev/y", Value: value("z")}}, "pitstop's own records"},
		{"refuses pitstop's NodeMaintenance finalizer on the node", pitstopv1alpha1.TriggerInstance{AlterFinalizer: &pitstopv1alpha1.AlterFinalizerTrigger{Key: "pitstop.dev/node-maintenance"}}, "alterFinalizer.key"},
		{"refuses a finalizer that is not a qualified name", pitstopv1alpha1.TriggerInstance{AlterFinalizer: &pitstopv1alpha1.AlterFinalizerTrigger{Key: "a/b/c"}}, `alterFinalizer.key "a/b/c"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.inst.Name = "t"
			_, err := trigger.New(tc.inst)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: got %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestRestoreUncordonsOnlyANodeNoNodeMaintenanceHolds: restore with
// uncordon clears a cordon no NodeMaintenance holds, and keeps one that a
// NodeMaintenance holds, even one the cache does not show yet (created a
// moment ago by another profile or a person): the API server is asked
// before the node is uncordoned.
func TestRestoreUncordonsOnlyANodeNoNodeMaintenanceHolds(t *testing.T) {
	holding := &pitstopv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "by-hand"}, Spec: pitstopv1alpha1.NodeMaintenanceSpec{NodeName: "node-a"}}
	other := &pitstopv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere"}, Spec: pitstopv1alpha1.NodeMaintenanceSpec{NodeName: "node-b"}}
	clientWith := func(objs ...client.Object) client.Client {
		return fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).Build()
	}
	tr, err := trigger.New(pitstopv1alpha1.TriggerInstance{Name: "restore", Restore: &pitstopv1alpha1.RestoreTrigger{Uncordon: true}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name          string
		cache, server client.Client
		cordoned      bool
	}{
		{"no NodeMaintenance anywhere: uncordoned", clientWith(other), clientWith(other), false},
		{"the cache shows one: left cordoned", clientWith(holding), clientWith(holding), true},
		{"only the API server has it yet: left cordoned", clientWith(other), clientWith(other, holding), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}, Spec: corev1.NodeSpec{Unschedulable: true}}
			done, status, err := tr.Run(t.Context(), trigger.Context{Node: node, Profile: "p", Client: tc.cache, Reader: tc.server})
			if err != nil || !done {
				t.Fatalf("Run: done %v, status %q, err %v", done, status, err)
			}
			if node.Spec.Unschedulable != tc.cordoned {
				t.Errorf("node unschedulable %v, want %v", node.Spec.Unschedulable, tc.cordoned)
			}
		})
	}
}

// TestUntrustedProfileCannotWriteKubernetesKeys: whoever may write a
// MaintenanceProfile cannot, through a trigger, make a node a control-plane
// node, set the labels the NodeRestriction admission plugin keeps from the
// kubelet (node-restriction.kubernetes.io/*), or any other key Kubernetes
// reserves (kubernetes.io and k8s.io, subdomains included). The refusal is
// at compile, so it holds without the webhook, and names the field and the
// key.
func TestUntrustedProfileCannotWriteKubernetesKeys(t *testing.T) {
	value := func(v string) *string { return &v }
	label := func(key string) pitstopv1alpha1.TriggerInstance {
		return pitstopv1alpha1.TriggerInstance{AlterLabel: &pitstopv1alpha1.AlterTrigger{Key: key, Value: value("true")}}
	}
	for _, tc := range []struct {
		name string
		inst pitstopv1alpha1.TriggerInstance
		want string
	}{
		{"a node-restriction label", label("node-restriction.kubernetes.io/pci-dss"), `alterLabel.key "node-restriction.kubernetes.io/pci-dss": keys under kubernetes.io`},
		{"a node role", label("node-role.kubernetes.io/control-plane"), `alterLabel.key "node-role.kubernetes.io/control-plane"`},
		{"the load balancers' exclusion label", label("node.kubernetes.io/exclude-from-external-load-balancers"), `alterLabel.key "node.kubernetes.io/exclude-from-external-load-balancers"`},
		{"a key of kubernetes.io itself", label("kubernetes.io/hostname"), `alterLabel.key "kubernetes.io/hostname"`},
		{"a key of k8s.io", pitstopv1alpha1.TriggerInstance{AlterAnnotation: &pitstopv1alpha1.AlterTrigger{Key: "k8s.io/x", Value: value("y")}}, `alterAnnotation.key "k8s.io/x": keys under k8s.io`},
		{"a subdomain of k8s.io", pitstopv1alpha1.TriggerInstance{AlterAnnotation: &pitstopv1alpha1.AlterTrigger{Key: "cluster-autoscaler.k8s.io/scale-down-disabled", Remove: true}}, `alterAnnotation.key "cluster-autoscaler.k8s.io/scale-down-disabled"`},
		{"a Kubernetes finalizer", pitstopv1alpha1.TriggerInstance{AlterFinalizer: &pitstopv1alpha1.AlterFinalizerTrigger{Key: "node.kubernetes.io/hold"}}, `alterFinalizer.key "node.kubernetes.io/hold"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.inst.Name = "t"
			_, err := trigger.New(tc.inst)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: got %v, want an error with %q", err, tc.want)
			}
		})
	}
	// A domain that merely ends in the same letters is not Kubernetes'.
	for _, key := range []string{"notkubernetes.io/x", "example.com/kubernetes.io", "mykubernetes.io/role"} {
		if _, err := trigger.New(pitstopv1alpha1.TriggerInstance{Name: "t", AlterLabel: &pitstopv1alpha1.AlterTrigger{Key: key, Value: value("v")}}); err != nil {
			t.Errorf("New(%s): %v", key, err)
		}
	}
}
