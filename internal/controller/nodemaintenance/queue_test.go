package nodemaintenance_test

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/manager"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// TestARestoreAndAStartDoNotWaitBehindADrain: with a single reconcile
// worker, a drain whose evictions each take 4 s to be answered does not
// hold it: another NodeMaintenance's node is restored, and a new one's
// node cordoned, while those evictions are still on their way.
func TestARestoreAndAStartDoNotWaitBehindADrain(t *testing.T) {
	c := &evictionCounter{delay: 4 * time.Second}
	startCountedManager(t, c, func(o *manager.Options) { o.NodeMaintenance.MaxConcurrentReconciles = 1 })
	testutil.Kubelet(t, env.Clientset)
	ns := namespace(t, "behind")
	for _, n := range []string{"behind-slow", "behind-done", "behind-new"} {
		create(t, testutil.Node(n))
	}
	done := nodeMaintenance("behind-done", "behind-done")
	create(t, done)
	awaitCondition(t, done, condReady, metav1.ConditionTrue, pitstopv1alpha1.ReasonReady, 20*time.Second)

	managedPods(t, ns, "behind-slow", "web", 3)
	slow := nodeMaintenance("behind-slow", "behind-slow")
	create(t, slow)
	testutil.Eventually(t, 20*time.Second, 10*time.Millisecond, func() error {
		if c.unanswered() == 0 {
			return errorString("no eviction on its way yet")
		}
		return nil
	})

	start := time.Now()
	if err := env.Client.Delete(t.Context(), done); err != nil {
		t.Fatal(err)
	}
	create(t, nodeMaintenance("behind-new", "behind-new"))
	var restored, cordoned time.Duration
	testutil.Eventually(t, 20*time.Second, 10*time.Millisecond, func() error {
		if restored == 0 && !node(t, "behind-done").Spec.Unschedulable {
			restored = time.Since(start)
		}
		if cordoned == 0 && node(t, "behind-new").Spec.Unschedulable {
			cordoned = time.Since(start)
		}
		if restored == 0 || cordoned == 0 {
			return errorString("not yet restored and cordoned")
		}
		return nil
	})
	switch {
	case restored > 2*time.Second || cordoned > 2*time.Second:
		t.Errorf("restored after %s, cordoned after %s, with the drain's evictions (4 s each) on their way: want both within 2 s", restored, cordoned)
	case c.unanswered() == 0:
		t.Fatalf("the drain's evictions were answered before the restore (%s) and the cordon (%s) were seen: nothing was shown", restored, cordoned)
	}
	awaitCondition(t, slow, condDrained, metav1.ConditionTrue, pitstopv1alpha1.ReasonDrained, 30*time.Second)
}

// TestARefusedPodIsNotAskedAgainBeforeItsRetry: the answer to a refused
// eviction wakes its drain, which must not send the eviction again at once
// (a loop of refusals as fast as the API server answers): with a budget
// that allows nothing and a retry interval of an hour, the drain stays
// blocked and its pod is asked once in 5 s.
func TestARefusedPodIsNotAskedAgainBeforeItsRetry(t *testing.T) {
	c := &evictionCounter{}
	startCountedManager(t, c, nil)
	testutil.Kubelet(t, env.Clientset)
	ns := namespace(t, "refused-once")
	create(t, testutil.Node("refused-once-1"))
	managedPods(t, ns, "refused-once-1", "web", 1)
	pdb(t, ns, "web", 0)
	nm := nodeMaintenance("refused-once", "refused-once-1", func(nm *pitstopv1alpha1.NodeMaintenance) {
		nm.Spec.Drain.PodEvictionRetryInterval = &pitstopv1alpha1.Duration{Duration: time.Hour}
	})
	create(t, nm)
	// The drain would go on blocked in the next test's manager: end it
	// while this one runs.
	t.Cleanup(func() {
		if err := env.Client.Delete(context.Background(), nm); err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
		testutil.Eventually(t, 10*time.Second, 50*time.Millisecond, func() error {
			return ignoreGone(env.Client.Get(context.Background(), client.ObjectKeyFromObject(nm), &pitstopv1alpha1.NodeMaintenance{}))
		})
	})
	awaitCondition(t, nm, condDrained, metav1.ConditionFalse, pitstopv1alpha1.ReasonBlockedByPodDisruptionBudget, 10*time.Second)
	time.Sleep(5 * time.Second)
	c.mu.Lock()
	asked := len(c.starts)
	c.mu.Unlock()
	if asked != 1 {
		t.Errorf("the refused pod was asked %d times in 5 s with a retry interval of an hour, want once", asked)
	}
	awaitCondition(t, nm, condDrained, metav1.ConditionFalse, pitstopv1alpha1.ReasonBlockedByPodDisruptionBudget, time.Second)
}
