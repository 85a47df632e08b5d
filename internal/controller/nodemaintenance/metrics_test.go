package nodemaintenance

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

func TestDrainAges(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	type edit func(*pitstopv1alpha1.NodeMaintenance)
	maintenance := func(edits ...edit) pitstopv1alpha1.NodeMaintenance {
		nm := pitstopv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "nm", CreationTimestamp: metav1.NewTime(now.Add(-3 * time.Hour))}}
		for _, e := range edits {
			e(&nm)
		}
		return nm
	}
	started := func(ago time.Duration) edit {
		return func(nm *pitstopv1alpha1.NodeMaintenance) {
			nm.Status.StartTime = &metav1.Time{Time: now.Add(-ago)}
			nm.Status.DrainWaited = &metav1.Duration{Duration: ago}
		}
	}
	timeout := func(d time.Duration) edit {
		return func(nm *pitstopv1alpha1.NodeMaintenance) {
			nm.Spec.Drain.Timeout = &pitstopv1alpha1.Duration{Duration: d}
		}
	}
	drained := func(ok bool, reason string) edit {
		return func(nm *pitstopv1alpha1.NodeMaintenance) { setCondition(nm, ConditionDrained, ok, reason, reason) }
	}
	deleting := func(nm *pitstopv1alpha1.NodeMaintenance) { nm.DeletionTimestamp = &metav1.Time{Time: now} }

	for _, tc := range []struct {
		name    string
		list    []pitstopv1alpha1.NodeMaintenance
		overdue int
		oldest  time.Duration
	}{
		{"none", nil, 0, 0},
		{"a drain within its timeout", []pitstopv1alpha1.NodeMaintenance{maintenance(started(time.Minute), timeout(5*time.Minute), drained(false, pitstopv1alpha1.ReasonDraining))}, 0, time.Minute},
		{"a drain right at its timeout is overdue, as the drain itself decides", []pitstopv1alpha1.NodeMaintenance{maintenance(started(5*time.Minute), timeout(5*time.Minute), drained(false, pitstopv1alpha1.ReasonBlockedByPodDisruptionBudget))}, 1, 5 * time.Minute},
		{"a drain force-deleting past its timeout is overdue", []pitstopv1alpha1.NodeMaintenance{maintenance(started(time.Hour), timeout(time.Minute), drained(false, pitstopv1alpha1.ReasonForceDeleting))}, 1, time.Hour},
		{"a drain failed by its timeout is overdue until deleted", []pitstopv1alpha1.NodeMaintenance{maintenance(started(time.Hour), timeout(time.Minute), drained(false, pitstopv1alpha1.ReasonDrainTimedOut))}, 1, time.Hour},
		{"a drain without a timeout is never overdue", []pitstopv1alpha1.NodeMaintenance{maintenance(started(time.Hour), drained(false, pitstopv1alpha1.ReasonDraining))}, 0, time.Hour},
		{"a drained node is neither overdue nor running", []pitstopv1alpha1.NodeMaintenance{maintenance(started(time.Hour), timeout(time.Minute), drained(true, pitstopv1alpha1.ReasonDrained))}, 0, 0},
		{"a maintenance being deleted is neither overdue nor running", []pitstopv1alpha1.NodeMaintenance{maintenance(started(time.Hour), timeout(time.Minute), drained(false, pitstopv1alpha1.ReasonDraining), deleting)}, 0, 0},
		{"a maintenance whose drain has not started runs since its creation", []pitstopv1alpha1.NodeMaintenance{maintenance(timeout(time.Minute))}, 0, 3 * time.Hour},
		{"the oldest of several, and every overdue one", []pitstopv1alpha1.NodeMaintenance{
			maintenance(started(10*time.Minute), timeout(time.Minute)),
			maintenance(started(2*time.Hour), drained(false, pitstopv1alpha1.ReasonDraining)),
			maintenance(started(20*time.Minute), timeout(time.Minute)),
			maintenance(started(5*time.Hour), timeout(time.Minute), drained(true, pitstopv1alpha1.ReasonDrainedByForce)),
		}, 2, 2 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			overdue, oldest := drainAges(tc.list, now)
			if overdue != tc.overdue || oldest != tc.oldest {
				t.Errorf("drainAges = %d overdue, oldest %s; want %d, %s", overdue, oldest, tc.overdue, tc.oldest)
			}
		})
	}
}
