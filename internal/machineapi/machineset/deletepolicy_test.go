package machineset

import (
	"slices"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/pitstop-dev/pitstop/internal/machineapi"
)

// epoch is when the test machines' clocks start.
var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

type machineOption func(*machinev1beta1.Machine)

// testMachine returns a serving Machine (it has a Node) created at epoch.
func testMachine(name string, opts ...machineOption) *machinev1beta1.Machine {
	m := &machinev1beta1.Machine{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "ns", UID: types.UID("uid-" + name),
			CreationTimestamp: metav1.NewTime(epoch),
		},
		Status: machinev1beta1.MachineStatus{NodeRef: &corev1.ObjectReference{Kind: "Node", Name: "node-" + name}},
	}
	for _, o := range opts {
		o(m)
	}
	return m
}

func createdAfter(d time.Duration) machineOption {
	return func(m *machinev1beta1.Machine) { m.CreationTimestamp = metav1.NewTime(epoch.Add(d)) }
}

func beingDeleted() machineOption {
	return func(m *machinev1beta1.Machine) { m.DeletionTimestamp = ptr.To(metav1.NewTime(epoch.Add(time.Hour))) }
}

func annotated(key string) machineOption {
	return func(m *machinev1beta1.Machine) { m.Annotations = map[string]string{key: ""} }
}

func withErrorReason() machineOption {
	return func(m *machinev1beta1.Machine) {
		m.Status.ErrorReason = ptr.To(machinev1beta1.InvalidConfigurationMachineError)
	}
}

func inPhase(phase string) machineOption {
	return func(m *machinev1beta1.Machine) { m.Status.Phase = ptr.To(phase) }
}

func nodeless() machineOption { return func(m *machinev1beta1.Machine) { m.Status.NodeRef = nil } }

func names(machines []*machinev1beta1.Machine) []string {
	out := make([]string, len(machines))
	for i, m := range machines {
		out[i] = m.Name
	}
	return out
}

func TestMachinesToDelete(t *testing.T) {
	for _, tc := range []struct {
		name     string
		policy   string
		n        int
		machines []*machinev1beta1.Machine
		want     []string
	}{{
		name:   "a machine already being deleted goes before a marked one",
		policy: DeletePolicyOldest, n: 1,
		machines: []*machinev1beta1.Machine{
			testMachine("a-marked", annotated(machineapi.AnnotationDeleteMachine)),
			testMachine("b-deleting", beingDeleted(), createdAfter(time.Hour)),
		},
		want: []string{"b-deleting"},
	}, {
		name:   "the delete annotation wins over age under Oldest",
		policy: DeletePolicyOldest, n: 1,
		machines: []*machinev1beta1.Machine{
			testMachine("old"),
			testMachine("new-marked", createdAfter(time.Hour), annotated(machineapi.AnnotationDeleteMachine)),
		},
		want: []string{"new-marked"},
	}, {
		name:   "the delete annotation wins over age under Newest",
		policy: DeletePolicyNewest, n: 1,
		machines: []*machinev1beta1.Machine{
			testMachine("old-marked", annotated(machineapi.AnnotationDeleteMachine)),
			testMachine("new", createdAfter(time.Hour)),
		},
		want: []string{"old-marked"},
	}, {
		name:   "the legacy delete annotation counts as the delete annotation",
		policy: DeletePolicyOldest, n: 1,
		machines: []*machinev1beta1.Machine{
			testMachine("old"),
			testMachine("new-marked", createdAfter(time.Hour), annotated(machineapi.AnnotationDeleteMachineLegacy)),
		},
		want: []string{"new-marked"},
	}, {
		name:   "an annotation with another key does not mark a machine",
		policy: DeletePolicyOldest, n: 1,
		machines: []*machinev1beta1.Machine{
			testMachine("old"),
			testMachine("new", createdAfter(time.Hour), annotated("example.com/delete-machine")),
		},
		want: []string{"old"},
	}, {
		name:   "the delete annotation wins over a failed machine",
		policy: DeletePolicyRandom, n: 1,
		machines: []*machinev1beta1.Machine{
			testMachine("failed", withErrorReason()),
			testMachine("marked", annotated(machineapi.AnnotationDeleteMachine)),
		},
		want: []string{"marked"},
	}, {
		name:   "a machine with an errorReason goes before one without a node",
		policy: DeletePolicyRandom, n: 1,
		machines: []*machinev1beta1.Machine{
			testMachine("nodeless", nodeless()),
			testMachine("failed", withErrorReason()),
		},
		want: []string{"failed"},
	}, {
		name:   "a machine in phase Failed goes before a serving one, even under Newest",
		policy: DeletePolicyNewest, n: 1,
		machines: []*machinev1beta1.Machine{
			testMachine("failed", inPhase(machinev1beta1.PhaseFailed)),
			testMachine("serving", createdAfter(time.Hour), inPhase(machinev1beta1.PhaseRunning)),
		},
		want: []string{"failed"},
	}, {
		name:   "a machine without a nodeRef goes before serving ones under Random",
		policy: DeletePolicyRandom, n: 1,
		machines: []*machinev1beta1.Machine{
			testMachine("s1"), testMachine("s2"), testMachine("nodeless", nodeless()), testMachine("s3"),
		},
		want: []string{"nodeless"},
	}, {
		name:   "a machine without a nodeRef goes before an older serving one under Oldest",
		policy: DeletePolicyOldest, n: 1,
		machines: []*machinev1beta1.Machine{
			testMachine("old"),
			testMachine("new-nodeless", createdAfter(time.Hour), nodeless()),
		},
		want: []string{"new-nodeless"},
	}, {
		name:   "Oldest removes the oldest serving machines, oldest first",
		policy: DeletePolicyOldest, n: 2,
		machines: []*machinev1beta1.Machine{
			testMachine("m2", createdAfter(2*time.Minute)),
			testMachine("m0"),
			testMachine("m3", createdAfter(3*time.Minute)),
			testMachine("m1", createdAfter(time.Minute)),
		},
		want: []string{"m0", "m1"},
	}, {
		name:   "Newest removes the newest serving machines, newest first",
		policy: DeletePolicyNewest, n: 2,
		machines: []*machinev1beta1.Machine{
			testMachine("m2", createdAfter(2*time.Minute)),
			testMachine("m0"),
			testMachine("m3", createdAfter(3*time.Minute)),
			testMachine("m1", createdAfter(time.Minute)),
		},
		want: []string{"m3", "m2"},
	}, {
		name:   "Oldest breaks a tie of creation times by name",
		policy: DeletePolicyOldest, n: 1,
		machines: []*machinev1beta1.Machine{
			testMachine("b"), testMachine("a"), testMachine("c", createdAfter(-time.Second)),
		},
		want: []string{"c"},
	}, {
		name:   "age orders machines within a tier, after the tiers",
		policy: DeletePolicyNewest, n: 4,
		machines: []*machinev1beta1.Machine{
			testMachine("serving-old"),
			testMachine("nodeless-old", nodeless()),
			testMachine("serving-new", createdAfter(time.Hour)),
			testMachine("nodeless-new", createdAfter(time.Hour), nodeless()),
			testMachine("deleting", beingDeleted()),
		},
		want: []string{"deleting", "nodeless-new", "nodeless-old", "serving-new"},
	}, {
		name:   "asking for more machines than there are returns them all",
		policy: DeletePolicyOldest, n: 5,
		machines: []*machinev1beta1.Machine{
			testMachine("m1", createdAfter(time.Minute)), testMachine("m0"),
		},
		want: []string{"m0", "m1"},
	}, {
		name:   "asking for none returns none",
		policy: DeletePolicyRandom, n: 0,
		machines: []*machinev1beta1.Machine{testMachine("m0")},
		want:     []string{},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := names(machinesToDelete(tc.machines, tc.n, tc.policy))
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestMachinesToDeleteRandom(t *testing.T) {
	var machines []*machinev1beta1.Machine
	for _, name := range []string{"m0", "m1", "m2", "m3", "m4", "m5", "m6", "m7"} {
		machines = append(machines, testMachine(name))
	}
	first := names(machinesToDelete(machines, 3, DeletePolicyRandom))

	t.Run("picks the same machines whatever the order of the list", func(t *testing.T) {
		reversed := slices.Clone(machines)
		slices.Reverse(reversed)
		if got := names(machinesToDelete(reversed, 3, DeletePolicyRandom)); !slices.Equal(got, first) {
			t.Errorf("reversed list: got %v, want %v", got, first)
		}
	})
	t.Run("an empty policy is Random", func(t *testing.T) {
		if got := names(machinesToDelete(machines, 3, "")); !slices.Equal(got, first) {
			t.Errorf("got %v, want %v", got, first)
		}
	})
	t.Run("does not follow the order of names", func(t *testing.T) {
		// Eight machines make the hash order equal to the name order once
		// in 40,320; the UIDs are fixed, so this is not a flaky check.
		if slices.Equal(first, []string{"m0", "m1", "m2"}) {
			t.Errorf("Random picked %v, the first names", first)
		}
	})
}
