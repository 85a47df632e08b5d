package machineset_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pitstop-dev/pitstop/internal/machineapi"
	"github.com/pitstop-dev/pitstop/internal/machineapi/machineset"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

func TestScalesToTheExactCount(t *testing.T) {
	ns := newNamespace(t, "ms-scale")
	startController(t, ns)
	ms := newSet(ns, "workers", 3)
	create(t, ms)

	machines := awaitSettled(t, ms, 3)
	for _, m := range machines {
		if !strings.HasPrefix(m.Name, "workers-") || m.Namespace != ns {
			t.Errorf("machine %s/%s: want a name generated from workers- in %s", m.Namespace, m.Name, ns)
		}
		if m.Labels[labelSet] != "workers" || m.Labels["role"] != "worker" || m.Annotations["example.com/note"] != "from the template" {
			t.Errorf("machine %s: labels %v, annotations %v; want the template's", m.Name, m.Labels, m.Annotations)
		}
		if _, ok := m.Spec.Labels["node-role.kubernetes.io/worker"]; !ok || !strings.Contains(string(m.Spec.ProviderSpec.Value.Raw), `"size":"small"`) {
			t.Errorf("machine %s: spec %+v; want the template's", m.Name, m.Spec)
		}
		ref := metav1.GetControllerOf(&m)
		if ref == nil || ref.Kind != "MachineSet" || ref.Name != "workers" || ref.UID != ms.UID || !ptr.Deref(ref.BlockOwnerDeletion, false) {
			t.Errorf("machine %s: controller %+v; want MachineSet workers, blocking its deletion", m.Name, ref)
		}
	}
	awaitEvent(t, ms, machineset.EventSuccessfulCreate, "Created machine workers-")

	scale(t, ms, 1)
	left := awaitSettled(t, ms, 1)
	if !slices.Contains(names(machines), left[0].Name) {
		t.Errorf("scaling down left %s, a machine that was not there before", left[0].Name)
	}
	awaitEvent(t, ms, machineset.EventSuccessfulDelete, "Deleted machine workers-")

	// As an autoscaler does, through the scale subresource.
	if err := env.Client.SubResource("scale").Update(t.Context(), ms, client.WithSubResourceBody(&autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 4}})); err != nil {
		t.Fatal(err)
	}
	awaitSettled(t, ms, 4)
	scale(t, ms, 0)
	awaitSettled(t, ms, 0)
}

// staggered scales ms from 0 to 3 one Machine at a time, a second apart so
// that their creationTimestamps differ, and returns them oldest first.
func staggered(t *testing.T, ms *machinev1beta1.MachineSet) []machinev1beta1.Machine {
	t.Helper()
	var ordered []machinev1beta1.Machine
	for n := int32(1); n <= 3; n++ {
		if n > 1 {
			awaitCreatedAfter(t, &ordered[len(ordered)-1])
		}
		scale(t, ms, n)
		for _, m := range awaitSettled(t, ms, int(n)) {
			if !slices.Contains(names(ordered), m.Name) {
				ordered = append(ordered, m)
			}
		}
	}
	return ordered
}

func TestDeletePolicies(t *testing.T) {
	for _, tc := range []struct {
		name, ns, policy string
		// mark annotates machines (by creation order) before the scale down.
		mark map[int]string
		// steps scale down one after the other; want are the survivors of
		// each step, by creation order.
		steps []int32
		want  [][]int
	}{{
		name: "Oldest removes the oldest machines", ns: "ms-oldest", policy: machineset.DeletePolicyOldest,
		steps: []int32{1}, want: [][]int{{2}},
	}, {
		name: "Newest removes the newest machines", ns: "ms-newest", policy: machineset.DeletePolicyNewest,
		steps: []int32{1}, want: [][]int{{0}},
	}, {
		name: "the delete annotations win over Oldest", ns: "ms-marked", policy: machineset.DeletePolicyOldest,
		mark: map[int]string{2: machineapi.AnnotationDeleteMachine, 1: machineapi.AnnotationDeleteMachineLegacy},
		// Both marked, the older goes first; the oldest, unmarked, stays.
		steps: []int32{2, 1}, want: [][]int{{0, 2}, {0}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns := newNamespace(t, tc.ns)
			stop := startController(t, ns)
			ms := newSet(ns, "workers", 0)
			ms.Spec.DeletePolicy = tc.policy
			create(t, ms)
			machines := staggered(t, ms)
			// The controller starts again once the machines are marked and
			// the set scaled, so that it sees the marks when it scales.
			stop()
			for i, key := range tc.mark {
				patch(t, &machines[i], false, func(m *machinev1beta1.Machine) { m.Annotations[key] = "yes" })
			}
			for i, replicas := range tc.steps {
				scale(t, ms, replicas)
				if i == 0 {
					startController(t, ns)
				}
				var want []string
				for _, j := range tc.want[i] {
					want = append(want, machines[j].Name)
				}
				slices.Sort(want) // machinesOf sorts by name
				if got := names(awaitSettled(t, ms, int(replicas))); !slices.Equal(got, want) {
					t.Errorf("scaled to %d: %v are left, want %v (machines oldest first: %v)", replicas, got, want, names(machines))
				}
			}
		})
	}
}

func TestRandomRemovesFailedAndNodelessMachinesFirst(t *testing.T) {
	ns := newNamespace(t, "ms-random")
	stop := startController(t, ns)
	ms := newSet(ns, "workers", 6)
	create(t, ms)
	machines := awaitSettled(t, ms, 6)
	stop()

	// Three serve, one has an errorReason (and a node), one is Failed, one
	// never got a node. The controller starts again once they are set, so
	// it sees them as they are.
	for i := range 4 {
		setNodeRef(t, &machines[i], ns+"-node-"+machines[i].Name)
	}
	patch(t, &machines[3], true, func(m *machinev1beta1.Machine) {
		m.Status.ErrorReason = ptr.To(machinev1beta1.InvalidConfigurationMachineError)
	})
	patch(t, &machines[4], true, func(m *machinev1beta1.Machine) { m.Status.Phase = ptr.To(machinev1beta1.PhaseFailed) })
	scale(t, ms, 3)
	startController(t, ns)

	if got, want := names(awaitSettled(t, ms, 3)), names(machines[:3]); !slices.Equal(got, want) {
		t.Errorf("%v are left, want the serving machines %v", got, want)
	}
}

func TestCountsAMachineBeingDeletedAndDeletesNoOther(t *testing.T) {
	ns := newNamespace(t, "ms-deleting")
	stop := startController(t, ns)
	ms := newSet(ns, "workers", 3)
	create(t, ms)
	machines := awaitSettled(t, ms, 3)
	stop()

	// A finalizer holds the first machine while it is being deleted, as
	// the Machine controller's does while it drains the node.
	const hold = "test.pitstop.dev/hold"
	going := &machines[0]
	patch(t, going, false, func(m *machinev1beta1.Machine) { m.Finalizers = append(m.Finalizers, hold) })
	if err := env.Client.Delete(t.Context(), going); err != nil {
		t.Fatal(err)
	}
	scale(t, ms, 2)
	startController(t, ns)

	// Scaling to two is done by the machine already going: the set counts
	// it and deletes no other.
	awaitStatus(t, ms, counts(3, 3, 0, 0))
	if got, want := names(machinesOf(t, ms)), names(machines[1:]); !slices.Equal(got, want) {
		t.Errorf("after scaling to 2, %v are left, want %v: the set deleted a machine other than the one going", got, want)
	}
	// Scaling back to three creates none while it goes.
	scale(t, ms, 3)
	awaitStatus(t, ms, counts(3, 3, 0, 0))
	if got, want := names(machinesOf(t, ms)), names(machines[1:]); !slices.Equal(got, want) {
		t.Errorf("after scaling to 3, the set has %v, want %v: it replaced a machine still going", got, want)
	}
	if slices.Contains(eventReasons(t, ms), machineset.EventSuccessfulDelete) {
		t.Errorf("events %v: the set deleted a machine", eventReasons(t, ms))
	}

	// Once it is gone, the set replaces it.
	patch(t, going, false, func(m *machinev1beta1.Machine) { m.Finalizers = nil })
	if got := names(awaitSettled(t, ms, 3)); slices.Contains(got, going.Name) || !slices.Contains(got, machines[1].Name) || !slices.Contains(got, machines[2].Name) {
		t.Errorf("the set has %v, want %v and a new machine", got, names(machines[1:]))
	}
}

// testMachine returns a Machine with labels, as a person or another tool
// would create it.
func testMachine(ns, name string, labels map[string]string) *machinev1beta1.Machine {
	return &machinev1beta1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec:       newSet(ns, "any", 0).Spec.Template.Spec,
	}
}

func TestAdoptsOrphansAndLeavesOthersAlone(t *testing.T) {
	ns := newNamespace(t, "ms-adopt")
	matching := map[string]string{labelSet: "workers", "role": "worker"}
	orphan := testMachine(ns, "orphan", matching)
	unrelated := testMachine(ns, "unrelated", map[string]string{labelSet: "others"})
	foreign := testMachine(ns, "foreign", matching)
	foreign.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: "machine.openshift.io/v1beta1", Kind: "MachineSet", Name: "others", UID: "6a4e1c1e-0000-4000-8000-000000000001", Controller: ptr.To(true),
	}}
	create(t, orphan, unrelated, foreign)
	// The controller starts after the machines exist, so that its first
	// look at the set already shows them.
	ms := newSet(ns, "workers", 2)
	create(t, ms)
	startController(t, ns)
	machines := awaitSettled(t, ms, 2)
	if !slices.Contains(names(machines), "orphan") {
		t.Fatalf("the set has %v, want the orphan adopted", names(machines))
	}
	get(t, orphan)
	if ref := metav1.GetControllerOf(orphan); ref == nil || ref.UID != ms.UID || !ptr.Deref(ref.BlockOwnerDeletion, false) {
		t.Errorf("orphan's controller %+v, want MachineSet workers, blocking its deletion", ref)
	}
	awaitEvent(t, ms, machineset.EventSuccessfulAdopt, "orphan")
	for _, m := range []*machinev1beta1.Machine{unrelated, foreign} {
		before := m.DeepCopy()
		get(t, m)
		if m.ResourceVersion != before.ResourceVersion {
			t.Errorf("machine %s changed: owners %+v", m.Name, m.OwnerReferences)
		}
	}

	// A machine that stops matching is released and replaced.
	patch(t, orphan, false, func(m *machinev1beta1.Machine) { m.Labels[labelSet] = "elsewhere" })
	testutil.Eventually(t, timeout, interval, func() error {
		get(t, orphan)
		if len(orphan.OwnerReferences) != 0 {
			return fmt.Errorf("the released machine still has owners %+v", orphan.OwnerReferences)
		}
		return nil
	})
	if got := names(awaitSettled(t, ms, 2)); slices.Contains(got, "orphan") {
		t.Errorf("the set has %v, want the released machine replaced", got)
	}
	awaitEvent(t, ms, machineset.EventSuccessfulRelease, "orphan")
}

func TestReportsAnInvalidSpec(t *testing.T) {
	ns := newNamespace(t, "ms-invalid")
	startController(t, ns)
	for _, tc := range []struct {
		name    string
		change  func(*machinev1beta1.MachineSet)
		message string
		fix     func(*machinev1beta1.MachineSet)
	}{{
		name:    "mismatch",
		change:  func(ms *machinev1beta1.MachineSet) { ms.Spec.Template.Labels[labelSet] = "other" },
		message: "does not match spec.template.metadata.labels",
		fix:     func(ms *machinev1beta1.MachineSet) { ms.Spec.Template.Labels[labelSet] = "mismatch" },
	}, {
		name:    "empty",
		change:  func(ms *machinev1beta1.MachineSet) { ms.Spec.Selector = metav1.LabelSelector{} },
		message: "spec.selector is empty",
		fix: func(ms *machinev1beta1.MachineSet) {
			ms.Spec.Selector = metav1.LabelSelector{MatchLabels: map[string]string{labelSet: "empty"}}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ms := newSet(ns, tc.name, 2)
			tc.change(ms)
			create(t, ms)
			awaitStatus(t, ms, func(st machinev1beta1.MachineSetStatus) error {
				if ptr.Deref(st.ErrorReason, "") != machinev1beta1.InvalidConfigurationMachineSetError || !strings.Contains(ptr.Deref(st.ErrorMessage, ""), tc.message) {
					return fmt.Errorf("errorReason %v, errorMessage %q; want InvalidConfiguration, %q", ptr.Deref(st.ErrorReason, ""), ptr.Deref(st.ErrorMessage, ""), tc.message)
				}
				return nil
			})
			e := awaitEvent(t, ms, machineset.EventInvalidConfiguration, tc.message)
			if e.Type != corev1.EventTypeWarning {
				t.Errorf("event type %s, want Warning", e.Type)
			}
			if got := machinesOf(t, ms); len(got) != 0 {
				t.Errorf("the invalid set created %v", names(got))
			}

			patch(t, ms, false, tc.fix)
			awaitSettled(t, ms, 2)
			if ms.Status.ErrorReason != nil || ms.Status.ErrorMessage != nil {
				t.Errorf("errorReason %v, errorMessage %v; want both cleared", ms.Status.ErrorReason, ms.Status.ErrorMessage)
			}
		})
	}
}

func TestStatusFollowsNodeReadiness(t *testing.T) {
	ns := newNamespace(t, "ms-status")
	startController(t, ns)
	ms := newSet(ns, "workers", 2)
	create(t, ms)
	machines := awaitSettled(t, ms, 2)
	awaitStatus(t, ms, counts(2, 2, 0, 0))

	// Linked to Nodes that are not Ready yet.
	var nodes []*corev1.Node
	for i := range machines {
		nodes = append(nodes, machineNode(t, &machines[i], ns+"-node-"+machines[i].Name, false, time.Now()))
		setNodeRef(t, &machines[i], nodes[i].Name)
	}
	awaitStatus(t, ms, counts(2, 2, 0, 0))

	// Only the Nodes change from here: their watch must wake the set.
	setReady(t, nodes[0], true)
	awaitStatus(t, ms, counts(2, 2, 1, 1))
	setReady(t, nodes[1], true)
	awaitStatus(t, ms, counts(2, 2, 2, 2))
	setReady(t, nodes[0], false)
	awaitStatus(t, ms, counts(2, 2, 1, 1))
	if err := env.Client.Delete(t.Context(), nodes[1]); err != nil {
		t.Fatal(err)
	}
	awaitStatus(t, ms, counts(2, 2, 0, 0))

	// A machine that loses a template label outside the selector is still
	// the set's, but not fully labelled.
	patch(t, &machines[0], false, func(m *machinev1beta1.Machine) { delete(m.Labels, "role") })
	awaitStatus(t, ms, counts(2, 1, 0, 0))
}

func TestAvailableAfterMinReadySeconds(t *testing.T) {
	ns := newNamespace(t, "ms-minready")
	startController(t, ns)
	const minReady = 3
	ms := newSet(ns, "workers", 1)
	ms.Spec.MinReadySeconds = minReady
	create(t, ms)
	m := awaitSettled(t, ms, 1)[0]

	// The API keeps times to the second.
	since := time.Now().Truncate(time.Second)
	availableAt := since.Add(minReady * time.Second)
	machineNode(t, &m, ns+"-node", true, since)
	setNodeRef(t, &m, ns+"-node")

	// Nothing changes after this: only the set's own requeue can make the
	// machine available, and not before minReadySeconds.
	testutil.Eventually(t, timeout, interval, func() error {
		get(t, ms)
		checked := time.Now()
		switch {
		case ms.Status.AvailableReplicas > 0 && checked.Before(availableAt):
			t.Fatalf("available at %s, before minReadySeconds passed at %s", checked, availableAt)
		case ms.Status.AvailableReplicas == 0:
			return fmt.Errorf("status %+v: not available yet", ms.Status)
		}
		return nil
	})
	if late := time.Since(availableAt); late > 2*time.Second {
		t.Errorf("available %s after minReadySeconds passed; want the set to look again when it does", late)
	}
	if ms.Status.ReadyReplicas != 1 {
		t.Errorf("readyReplicas %d, want 1", ms.Status.ReadyReplicas)
	}
}
