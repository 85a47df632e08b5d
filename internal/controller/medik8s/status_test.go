package medik8s

import (
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

func condition(condType, status, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: condType, Status: metav1.ConditionStatus(status), Reason: reason, Message: msg}
}

func TestMirror(t *testing.T) {
	for name, tc := range map[string]struct {
		in   pitstopv1alpha1.NodeMaintenanceStatus
		want status
	}{
		"reports Running before pitstop has written any status": {
			want: status{Phase: phaseRunning},
		},
		"reports a drain under way with its pods pending by name and by reference": {
			in: pitstopv1alpha1.NodeMaintenanceStatus{
				Phase: pitstopv1alpha1.PhaseRunning, DrainProgress: 50, TotalPods: 5, EvictionPods: 4,
				PendingPods: []pitstopv1alpha1.PodReference{{Namespace: "a", Name: "web-0"}, {Namespace: "b", Name: "web-0"}},
				Conditions:  []metav1.Condition{condition("Drained", "False", pitstopv1alpha1.ReasonDraining, "2 of 4 pods still to leave")},
			},
			want: status{
				Phase: phaseRunning, DrainProgress: 50, TotalPods: 5, EvictionPods: 4,
				PendingPods:     []string{"web-0", "web-0"},
				PendingPodsRefs: []podReference{{Namespace: "a", Name: "web-0"}, {Namespace: "b", Name: "web-0"}},
			},
		},
		"reports a budget refusal in lastError while the drain retries": {
			in: pitstopv1alpha1.NodeMaintenanceStatus{
				Phase:      pitstopv1alpha1.PhaseRunning,
				Conditions: []metav1.Condition{condition("Drained", "False", pitstopv1alpha1.ReasonBlockedByPodDisruptionBudget, "1 pods blocked by PodDisruptionBudgets: a/web-0")},
			},
			want: status{Phase: phaseRunning, LastError: "1 pods blocked by PodDisruptionBudgets: a/web-0"},
		},
		"reports a missing node as Failed with the condition that says so": {
			in: pitstopv1alpha1.NodeMaintenanceStatus{
				Phase: pitstopv1alpha1.PhaseFailed,
				Conditions: []metav1.Condition{
					condition("Cordoned", "False", pitstopv1alpha1.ReasonNodeNotFound, "node n1 does not exist"),
					condition("Drained", "False", pitstopv1alpha1.ReasonNodeNotFound, "node n1 does not exist"),
				},
			},
			want: status{Phase: phaseFailed, LastError: "node n1 does not exist"},
		},
		"prefers pitstop's own lastError over condition messages": {
			in: pitstopv1alpha1.NodeMaintenanceStatus{
				Phase: pitstopv1alpha1.PhaseRunning, LastError: "evicting pod a/web-0: timeout",
				Conditions: []metav1.Condition{condition("Drained", "False", pitstopv1alpha1.ReasonEvictionFailed, "evicting pod a/web-0: timeout")},
			},
			want: status{Phase: phaseRunning, LastError: "evicting pod a/web-0: timeout"},
		},
		"reports success with everything gone and no error": {
			in: pitstopv1alpha1.NodeMaintenanceStatus{
				Phase: pitstopv1alpha1.PhaseSucceeded, DrainProgress: 100, TotalPods: 3, EvictionPods: 2,
				Conditions: []metav1.Condition{condition("Drained", "True", pitstopv1alpha1.ReasonDrained, "every pod left")},
			},
			want: status{Phase: phaseSucceeded, DrainProgress: 100, TotalPods: 3, EvictionPods: 2},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := mirror(&pitstopv1alpha1.NodeMaintenance{Status: tc.in})
			if !equality.Semantic.DeepEqual(got, tc.want) {
				t.Errorf("mirror = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestStamp(t *testing.T) {
	earlier := &metav1.Time{Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	now := time.Date(2026, 1, 1, 0, 5, 0, 0, time.UTC)
	for name, tc := range map[string]struct {
		prev, next status
		want       *metav1.Time
	}{
		"keeps lastUpdate when nothing else changed, so nothing is written": {
			prev: status{Phase: phaseRunning, LastUpdate: earlier},
			next: status{Phase: phaseRunning},
			want: earlier,
		},
		"moves lastUpdate when the progress changed": {
			prev: status{Phase: phaseRunning, DrainProgress: 10, LastUpdate: earlier},
			next: status{Phase: phaseRunning, DrainProgress: 20},
			want: &metav1.Time{Time: now},
		},
		"sets lastUpdate on the first status": {
			next: status{Phase: phaseRunning},
			want: &metav1.Time{Time: now},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := stamp(tc.prev, tc.next, now)
			if !got.LastUpdate.Equal(tc.want) {
				t.Errorf("lastUpdate = %v, want %v", got.LastUpdate, tc.want)
			}
		})
	}
}

func TestFailedAndErred(t *testing.T) {
	prev := status{Phase: phaseRunning, DrainProgress: 40, EvictionPods: 5}
	if got := failed(prev, "refused"); got.Phase != phaseFailed || got.LastError != "refused" || got.DrainProgress != 40 {
		t.Errorf("failed keeps what was known and fails: got %+v", got)
	}
	if got := erred(status{}, errors.New("timeout")); got.Phase != phaseRunning || got.LastError != "timeout" {
		t.Errorf("erred on a new object reports Running with the error: got %+v", got)
	}
	if got := erred(status{Phase: phaseSucceeded}, errors.New("timeout")); got.Phase != phaseSucceeded {
		t.Errorf("erred changes the phase: got %+v", got)
	}
}

func TestStatusRoundTrip(t *testing.T) {
	obj := medik8sKind.newObject()
	want := status{
		Phase: phaseRunning, DrainProgress: 50, LastUpdate: &metav1.Time{Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)},
		PendingPods: []string{"web-0"}, PendingPodsRefs: []podReference{{Namespace: "a", Name: "web-0"}}, TotalPods: 3, EvictionPods: 2,
		ErrorOnLeaseCount: 2,
	}
	if err := setStatus(obj, want); err != nil {
		t.Fatal(err)
	}
	// medik8s spells the total in lower case.
	if n, found, _ := unstructured.NestedInt64(obj.Object, "status", "totalpods"); !found || n != 3 {
		t.Errorf("status.totalpods = %d (found %v), want 3", n, found)
	}
	// The medik8s operator's count of failed attempts at the Lease.
	if n, found, _ := unstructured.NestedInt64(obj.Object, "status", "errorOnLeaseCount"); !found || n != 2 {
		t.Errorf("status.errorOnLeaseCount = %d (found %v), want 2", n, found)
	}
	got, err := statusOf(obj)
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("round trip = %+v, want %+v", got, want)
	}
}
