package machineset

import (
	"errors"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// testNode returns a Node whose Ready condition has status and last
// changed at since.
func testNode(name string, status corev1.ConditionStatus, since time.Time) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
			{Type: corev1.NodeReady, Status: status, LastTransitionTime: metav1.NewTime(since)},
		}},
	}
}

func nodeMap(nodes ...*corev1.Node) map[string]*corev1.Node {
	m := map[string]*corev1.Node{}
	for _, n := range nodes {
		m[n.Name] = n
	}
	return m
}

func minReady(seconds int32) func(*machinev1beta1.MachineSet) {
	return func(ms *machinev1beta1.MachineSet) { ms.Spec.MinReadySeconds = seconds }
}

func TestReplicaStatus(t *testing.T) {
	full := labelled("set", "workers", "role", "worker")
	now := epoch.Add(time.Hour)
	for _, tc := range []struct {
		name                            string
		set                             *machinev1beta1.MachineSet
		machines                        []*machinev1beta1.Machine
		nodes                           map[string]*corev1.Node
		replicas, labelled, ready, avai int32
		wantRecheck                     time.Duration
	}{{
		name:     "counts every owned machine, including one being deleted",
		set:      testSet(),
		machines: []*machinev1beta1.Machine{testMachine("a", full, nodeless()), testMachine("b", full, nodeless(), beingDeleted())},
		replicas: 2, labelled: 2,
	}, {
		name:     "a machine lacking a template label is not fully labelled",
		set:      testSet(),
		machines: []*machinev1beta1.Machine{testMachine("a", full, nodeless()), testMachine("b", labelled("set", "workers"), nodeless())},
		replicas: 2, labelled: 1,
	}, {
		name:     "a machine whose node is Ready is ready and, without minReadySeconds, available",
		set:      testSet(),
		machines: []*machinev1beta1.Machine{testMachine("a", full)},
		nodes:    nodeMap(testNode("node-a", corev1.ConditionTrue, now)),
		replicas: 1, labelled: 1, ready: 1, avai: 1,
	}, {
		name:     "a machine whose node is not Ready is neither ready nor available",
		set:      testSet(),
		machines: []*machinev1beta1.Machine{testMachine("a", full), testMachine("b", full)},
		nodes:    nodeMap(testNode("node-a", corev1.ConditionFalse, epoch), testNode("node-b", corev1.ConditionUnknown, epoch)),
		replicas: 2, labelled: 2,
	}, {
		name:     "a machine whose node is missing is not ready",
		set:      testSet(),
		machines: []*machinev1beta1.Machine{testMachine("a", full)},
		replicas: 1, labelled: 1,
	}, {
		name:     "a machine without a nodeRef is not ready, even if a node of that name is",
		set:      testSet(),
		machines: []*machinev1beta1.Machine{testMachine("a", full, nodeless())},
		nodes:    nodeMap(testNode("node-a", corev1.ConditionTrue, epoch)),
		replicas: 1, labelled: 1,
	}, {
		name:     "a ready machine is not available before minReadySeconds, and the set looks again exactly then",
		set:      testSet(minReady(60)),
		machines: []*machinev1beta1.Machine{testMachine("a", full)},
		nodes:    nodeMap(testNode("node-a", corev1.ConditionTrue, now.Add(-45*time.Second))),
		replicas: 1, labelled: 1, ready: 1,
		wantRecheck: 15 * time.Second,
	}, {
		name:     "a machine ready for exactly minReadySeconds is available",
		set:      testSet(minReady(60)),
		machines: []*machinev1beta1.Machine{testMachine("a", full)},
		nodes:    nodeMap(testNode("node-a", corev1.ConditionTrue, now.Add(-60*time.Second))),
		replicas: 1, labelled: 1, ready: 1, avai: 1,
	}, {
		name:     "the machine closest to available sets when the set looks again",
		set:      testSet(minReady(60)),
		machines: []*machinev1beta1.Machine{testMachine("a", full), testMachine("b", full), testMachine("c", full)},
		nodes: nodeMap(
			testNode("node-a", corev1.ConditionTrue, now.Add(-10*time.Second)),
			testNode("node-b", corev1.ConditionTrue, now.Add(-50*time.Second)),
			testNode("node-c", corev1.ConditionTrue, now.Add(-10*time.Minute)),
		),
		replicas: 3, labelled: 3, ready: 3, avai: 1,
		wantRecheck: 10 * time.Second,
	}, {
		name:     "a node Ready since an unknown time is never available under minReadySeconds",
		set:      testSet(minReady(60)),
		machines: []*machinev1beta1.Machine{testMachine("a", full)},
		nodes:    nodeMap(testNode("node-a", corev1.ConditionTrue, time.Time{})),
		replicas: 1, labelled: 1, ready: 1,
	}, {
		name:     "no machines: all counts zero",
		set:      testSet(),
		replicas: 0,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			st, recheck := replicaStatus(tc.set, tc.machines, tc.nodes, now)
			got := [4]int32{st.Replicas, st.FullyLabeledReplicas, st.ReadyReplicas, st.AvailableReplicas}
			if want := [4]int32{tc.replicas, tc.labelled, tc.ready, tc.avai}; got != want {
				t.Errorf("replicas, fullyLabeled, ready, available = %v, want %v", got, want)
			}
			if recheck != tc.wantRecheck {
				t.Errorf("looks again in %s, want %s", recheck, tc.wantRecheck)
			}
			if st.ObservedGeneration != tc.set.Generation {
				t.Errorf("observedGeneration %d, want %d", st.ObservedGeneration, tc.set.Generation)
			}
		})
	}
}

func TestReplicaStatusClearsAnEarlierError(t *testing.T) {
	ms := testSet(func(ms *machinev1beta1.MachineSet) {
		ms.Status.ErrorReason = ptr.To(machinev1beta1.InvalidConfigurationMachineSetError)
		ms.Status.ErrorMessage = ptr.To("spec.selector is empty")
	})
	st, _ := replicaStatus(ms, nil, nil, epoch)
	if st.ErrorReason != nil || st.ErrorMessage != nil {
		t.Errorf("errorReason %v, errorMessage %v; want both cleared", st.ErrorReason, st.ErrorMessage)
	}
}

func TestInvalidStatusKeepsTheCounts(t *testing.T) {
	ms := testSet(func(ms *machinev1beta1.MachineSet) {
		ms.Status = machinev1beta1.MachineSetStatus{Replicas: 3, ReadyReplicas: 2, ObservedGeneration: 1}
	})
	st := invalidStatus(ms, errors.New("spec.selector is empty"))
	if st.Replicas != 3 || st.ReadyReplicas != 2 || st.ObservedGeneration != 3 {
		t.Errorf("replicas %d, ready %d, observedGeneration %d; want 3, 2, 3", st.Replicas, st.ReadyReplicas, st.ObservedGeneration)
	}
	if ptr.Deref(st.ErrorReason, "") != machinev1beta1.InvalidConfigurationMachineSetError || ptr.Deref(st.ErrorMessage, "") != "spec.selector is empty" {
		t.Errorf("errorReason %v, errorMessage %v", st.ErrorReason, st.ErrorMessage)
	}
}
