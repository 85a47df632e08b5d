package nodemaintenance_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// runningPod creates a Running pod of a ReplicaSet on node with a grace
// period of one second. No kubelet runs in this test: an evicted pod stays
// terminating, as on a node that is down.
func runningPod(t *testing.T, ns, name, node string) *corev1.Pod {
	t.Helper()
	p := testutil.Pod(ns, name, testutil.OnNode(node), testutil.OwnedBy("ReplicaSet", name))
	p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	create(t, p)
	testutil.Eventually(t, 5*time.Second, 20*time.Millisecond, func() error {
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		return env.Client.Status().Update(t.Context(), p)
	})
	return p
}

// TestForceDeleteTerminatingEndsTheDrainOfADeadNode: on a node whose
// kubelet does not finish evicted pods, the drain waits for them for ever;
// with spec.drain.forceDeleteTerminating a pod still terminating past its
// grace period is deleted without grace, and the drain ends.
func TestForceDeleteTerminatingEndsTheDrainOfADeadNode(t *testing.T) {
	startManager(t, true)
	ns := namespace(t, "deadnode")
	create(t, testutil.Node("deadnode-1"), testutil.Node("deadnode-2"))
	forced := runningPod(t, ns, "forced", "deadnode-1")
	kept := runningPod(t, ns, "kept", "deadnode-2")

	nmForce := nodeMaintenance("deadnode-force", "deadnode-1", func(nm *pitstopv1alpha1.NodeMaintenance) {
		nm.Spec.Drain.ForceDeleteTerminating = true
	})
	nmWait := nodeMaintenance("deadnode-wait", "deadnode-2")
	create(t, nmForce, nmWait)

	awaitCondition(t, nmForce, pitstopv1alpha1.ConditionDrained, metav1.ConditionTrue, pitstopv1alpha1.ReasonDrained, 30*time.Second)
	awaitEvents(t, nmForce, pitstopv1alpha1.EventForceDeleted)
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(forced), &corev1.Pod{}); err == nil {
		t.Fatal("the stuck pod is still there")
	}

	// Without the option the other drain still waits on its pod.
	testutil.Eventually(t, 10*time.Second, 50*time.Millisecond, func() error {
		got := &corev1.Pod{}
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(kept), got); err != nil {
			return err
		}
		if got.DeletionTimestamp == nil {
			return fmt.Errorf("pod %s not evicted yet", kept.Name)
		}
		return nil
	})
	time.Sleep(3 * time.Second)
	if g := get(t, nmWait); isTrue(g, pitstopv1alpha1.ConditionDrained) {
		t.Fatal("a drain without forceDeleteTerminating ended with its pod terminating")
	}
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(kept), &corev1.Pod{}); err != nil {
		t.Fatalf("the pod of the drain without forceDeleteTerminating: %v", err)
	}
}

func isTrue(nm *pitstopv1alpha1.NodeMaintenance, cond string) bool {
	for _, c := range nm.Status.Conditions {
		if c.Type == cond {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}
