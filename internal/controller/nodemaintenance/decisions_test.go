package nodemaintenance

import (
	"testing"
	"time"

	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/drain"
)

func TestActiveHolder(t *testing.T) {
	at := func(name string, sec int64, deleting bool) pitstopv1alpha1.NodeMaintenance {
		nm := pitstopv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.Unix(sec, 0)}}
		if deleting {
			nm.DeletionTimestamp = &metav1.Time{Time: time.Unix(sec+1, 0)}
		}
		return nm
	}
	self := at("b", 10, false)
	for _, tc := range []struct {
		name   string
		others []pitstopv1alpha1.NodeMaintenance
		want   string
	}{
		{"alone holds the node", nil, ""},
		{"an older one holds it", []pitstopv1alpha1.NodeMaintenance{at("a", 5, false)}, "a"},
		{"a newer one does not", []pitstopv1alpha1.NodeMaintenance{at("c", 20, false)}, ""},
		{"an older one being deleted does not", []pitstopv1alpha1.NodeMaintenance{at("a", 5, true)}, ""},
		{"same second: the name decides", []pitstopv1alpha1.NodeMaintenance{at("a", 10, false)}, "a"},
		{"same second, later name: self holds", []pitstopv1alpha1.NodeMaintenance{at("c", 10, false)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := activeHolder(&self, tc.others); got != tc.want {
				t.Errorf("activeHolder = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestSetSummary(t *testing.T) {
	cond := func(typ string, ok bool, reason string) metav1.Condition {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		return metav1.Condition{Type: typ, Status: s, Reason: reason, Message: reason + " message"}
	}
	for _, tc := range []struct {
		name       string
		conditions []metav1.Condition
		phase      pitstopv1alpha1.MaintenancePhase
		ready      string
	}{
		{"nothing yet is running", nil, pitstopv1alpha1.PhaseRunning, pitstopv1alpha1.ReasonInProgress},
		{"cordoned and draining is running", []metav1.Condition{cond(ConditionCordoned, true, "Cordoned"), cond(ConditionDrained, false, pitstopv1alpha1.ReasonDraining)}, pitstopv1alpha1.PhaseRunning, pitstopv1alpha1.ReasonInProgress},
		{"blocked by a budget is still running", []metav1.Condition{cond(ConditionCordoned, true, "Cordoned"), cond(ConditionDrained, false, pitstopv1alpha1.ReasonBlockedByPodDisruptionBudget)}, pitstopv1alpha1.PhaseRunning, pitstopv1alpha1.ReasonInProgress},
		{"waiting for quorum is still running", []metav1.Condition{cond(ConditionCordoned, false, pitstopv1alpha1.ReasonQuorumProtected)}, pitstopv1alpha1.PhaseRunning, pitstopv1alpha1.ReasonInProgress},
		{"cordoned and drained succeeded", []metav1.Condition{cond(ConditionCordoned, true, "Cordoned"), cond(ConditionDrained, true, "Drained")}, pitstopv1alpha1.PhaseSucceeded, pitstopv1alpha1.ReasonReady},
		{"a timed-out drain failed", []metav1.Condition{cond(ConditionCordoned, true, "Cordoned"), cond(ConditionDrained, false, pitstopv1alpha1.ReasonDrainTimedOut)}, pitstopv1alpha1.PhaseFailed, pitstopv1alpha1.ReasonFailed},
		{"a missing node failed", []metav1.Condition{cond(ConditionCordoned, false, pitstopv1alpha1.ReasonNodeNotFound), cond(ConditionDrained, false, pitstopv1alpha1.ReasonNodeNotFound)}, pitstopv1alpha1.PhaseFailed, pitstopv1alpha1.ReasonFailed},
		{"a duplicate failed", []metav1.Condition{cond(ConditionCordoned, false, pitstopv1alpha1.ReasonDuplicate)}, pitstopv1alpha1.PhaseFailed, pitstopv1alpha1.ReasonFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nm := &pitstopv1alpha1.NodeMaintenance{Spec: pitstopv1alpha1.NodeMaintenanceSpec{NodeName: "n"}}
			nm.Status.Conditions = tc.conditions
			setSummary(nm)
			ready := meta.FindStatusCondition(nm.Status.Conditions, ConditionReady)
			if nm.Status.Phase != tc.phase || ready == nil || ready.Reason != tc.ready {
				t.Errorf("phase %s ready %+v, want %s / %s", nm.Status.Phase, ready, tc.phase, tc.ready)
			}
		})
	}
}

// Condition types, for the table above.
const (
	ConditionCordoned = pitstopv1alpha1.ConditionCordoned
	ConditionDrained  = pitstopv1alpha1.ConditionDrained
	ConditionReady    = pitstopv1alpha1.ConditionReady
)

func TestRefusalBackoff(t *testing.T) {
	e := newExpectations()
	var got []time.Duration
	for _, refused := range []bool{true, true, true, true, true, true, false, true} {
		got = append(got, e.backoff("nm", refused, time.Second))
	}
	want := []time.Duration{1 * time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 16 * time.Second, 0, 1 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("backoff sequence %v, want %v", got, want)
		}
	}
}

func TestOnlyProgress(t *testing.T) {
	base := pitstopv1alpha1.NodeMaintenanceStatus{
		Phase:        pitstopv1alpha1.PhaseRunning,
		EvictionPods: 10,
		Conditions: []metav1.Condition{
			{Type: ConditionCordoned, Status: metav1.ConditionTrue, Reason: "Cordoned"},
			{Type: ConditionDrained, Status: metav1.ConditionFalse, Reason: pitstopv1alpha1.ReasonDraining, Message: "10 of 10 pods"},
		},
	}
	edit := func(f func(*pitstopv1alpha1.NodeMaintenanceStatus)) pitstopv1alpha1.NodeMaintenanceStatus {
		s := *base.DeepCopy()
		f(&s)
		return s
	}
	for _, tc := range []struct {
		name string
		next pitstopv1alpha1.NodeMaintenanceStatus
		want bool
	}{
		{"progress and message", edit(func(s *pitstopv1alpha1.NodeMaintenanceStatus) {
			s.DrainProgress = 40
			s.Conditions[1].Message = "6 of 10 pods"
			s.PendingPods = []pitstopv1alpha1.PodReference{{Namespace: "a", Name: "b"}}
		}), true},
		{"a reason change", edit(func(s *pitstopv1alpha1.NodeMaintenanceStatus) {
			s.Conditions[1].Reason = pitstopv1alpha1.ReasonBlockedByPodDisruptionBudget
		}), false},
		{"drained", edit(func(s *pitstopv1alpha1.NodeMaintenanceStatus) {
			s.Conditions[1].Status = metav1.ConditionTrue
			s.Conditions[1].Reason = pitstopv1alpha1.ReasonDrained
		}), false},
		{"the phase", edit(func(s *pitstopv1alpha1.NodeMaintenanceStatus) { s.Phase = pitstopv1alpha1.PhaseFailed }), false},
		{"a new condition", edit(func(s *pitstopv1alpha1.NodeMaintenanceStatus) {
			s.Conditions = append(s.Conditions, metav1.Condition{Type: ConditionReady, Status: metav1.ConditionFalse, Reason: "InProgress"})
		}), false},
	} {
		if got := onlyProgress(base, tc.next); got != tc.want {
			t.Errorf("%s: onlyProgress = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestPodShufflesCountMovedPodsByWorkload: evicted and deleted pods count
// by their workload's kind; refused and already gone ones do not.
func TestPodShufflesCountMovedPodsByWorkload(t *testing.T) {
	pod := func(kind string) *corev1.Pod {
		p := &corev1.Pod{}
		if kind != "" {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: kind, Name: "x", Controller: ptr.To(true)}}
		}
		return p
	}
	before := map[string]float64{}
	for _, k := range []string{"Deployment", "StatefulSet", "DaemonSet", "none", "other"} {
		before[k] = promtestutil.ToFloat64(podShuffles.WithLabelValues(k))
	}
	recordResults(drain.Result{Pods: []drain.PodResult{
		{Pod: pod("ReplicaSet"), Outcome: drain.Evicted},
		{Pod: pod("ReplicaSet"), Outcome: drain.Evicted},
		{Pod: pod("StatefulSet"), Outcome: drain.Evicted},
		{Pod: pod("DaemonSet"), Outcome: drain.Deleted},
		{Pod: pod(""), Outcome: drain.Deleted},
		{Pod: pod("CronTab"), Outcome: drain.Evicted},
		{Pod: pod("ReplicaSet"), Outcome: drain.Refused},
		{Pod: pod("StatefulSet"), Outcome: drain.Gone},
	}})
	for kind, want := range map[string]float64{"Deployment": 2, "StatefulSet": 1, "DaemonSet": 1, "none": 1, "other": 1} {
		if got := promtestutil.ToFloat64(podShuffles.WithLabelValues(kind)) - before[kind]; got != want {
			t.Errorf("pitstop_pod_shuffles_total{kind=%q} grew by %v, want %v", kind, got, want)
		}
	}
}
