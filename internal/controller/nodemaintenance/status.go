package nodemaintenance

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/drain"
)

// setCondition sets one condition; its transition time changes only when
// its status does.
func setCondition(nm *pitstopv1alpha1.NodeMaintenance, condType string, status bool, reason, message string) {
	s := metav1.ConditionFalse
	if status {
		s = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&nm.Status.Conditions, metav1.Condition{
		Type:               condType,
		Status:             s,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: nm.Generation,
	})
}

func isConditionTrue(nm *pitstopv1alpha1.NodeMaintenance, condType string) bool {
	return meta.IsStatusConditionTrue(nm.Status.Conditions, condType)
}

// terminalReasons are the reasons after which the maintenance cannot
// finish on its own.
var terminalReasons = map[string]bool{
	pitstopv1alpha1.ReasonNodeNotFound:  true,
	pitstopv1alpha1.ReasonDuplicate:     true,
	pitstopv1alpha1.ReasonDrainTimedOut: true,
	pitstopv1alpha1.ReasonInvalidSpec:   true,
}

// setSummary derives the Ready condition and the phase from Cordoned and
// Drained. It is the one place the phase is computed.
func setSummary(nm *pitstopv1alpha1.NodeMaintenance) {
	cordoned := meta.FindStatusCondition(nm.Status.Conditions, pitstopv1alpha1.ConditionCordoned)
	drained := meta.FindStatusCondition(nm.Status.Conditions, pitstopv1alpha1.ConditionDrained)
	switch {
	case cordoned != nil && drained != nil && cordoned.Status == metav1.ConditionTrue && drained.Status == metav1.ConditionTrue:
		setCondition(nm, pitstopv1alpha1.ConditionReady, true, pitstopv1alpha1.ReasonReady, "node "+nm.Spec.NodeName+" is cordoned and drained")
		nm.Status.Phase = pitstopv1alpha1.PhaseSucceeded
	case failing(cordoned) != nil || failing(drained) != nil:
		c := failing(cordoned)
		if c == nil {
			c = failing(drained)
		}
		setCondition(nm, pitstopv1alpha1.ConditionReady, false, pitstopv1alpha1.ReasonFailed, c.Message)
		nm.Status.Phase = pitstopv1alpha1.PhaseFailed
	default:
		msg := "cordoning node " + nm.Spec.NodeName
		if cordoned != nil && cordoned.Status == metav1.ConditionFalse {
			msg = cordoned.Message
		} else if drained != nil {
			msg = drained.Message
		}
		setCondition(nm, pitstopv1alpha1.ConditionReady, false, pitstopv1alpha1.ReasonInProgress, msg)
		nm.Status.Phase = pitstopv1alpha1.PhaseRunning
	}
}

func failing(c *metav1.Condition) *metav1.Condition {
	if c != nil && c.Status == metav1.ConditionFalse && terminalReasons[c.Reason] {
		return c
	}
	return nil
}

// statusEqual compares statuses ignoring nothing.
func statusEqual(a, b pitstopv1alpha1.NodeMaintenanceStatus) bool {
	return equality.Semantic.DeepEqual(a, b)
}

// onlyProgress reports whether b differs from a only in how far a drain has
// come (progress, pending pods, blockers, messages), not in any condition's
// status or reason, the phase or the counts. Such changes are paced by the
// writePacer, so a drain of many pods costs a few status writes, not one
// per pod.
func onlyProgress(a, b pitstopv1alpha1.NodeMaintenanceStatus) bool {
	if a.Phase != b.Phase || a.ObservedGeneration != b.ObservedGeneration || !a.StartTime.Equal(b.StartTime) ||
		a.TotalPods != b.TotalPods || a.EvictionPods != b.EvictionPods || a.ForceDeletedPods != b.ForceDeletedPods ||
		len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for _, ca := range a.Conditions {
		cb := meta.FindStatusCondition(b.Conditions, ca.Type)
		if cb == nil || cb.Status != ca.Status || cb.Reason != ca.Reason {
			return false
		}
	}
	return true
}

// leftPods are the pods the plan leaves on the node, bounded for status.
func leftPods(skipped []drain.Skipped) []pitstopv1alpha1.LeftPod {
	if len(skipped) == 0 {
		return nil
	}
	out := make([]pitstopv1alpha1.LeftPod, 0, min(len(skipped), statusListLimit))
	for _, s := range skipped[:min(len(skipped), statusListLimit)] {
		out = append(out, pitstopv1alpha1.LeftPod{
			Pod:    pitstopv1alpha1.PodReference{Namespace: s.Pod.Namespace, Name: s.Pod.Name},
			Reason: string(s.Reason),
		})
	}
	return out
}

// skipCounts says how many pods stay for each reason: "2 DaemonSet, 1
// ToleratesCordon".
func skipCounts(skipped []drain.Skipped) string {
	counts := map[drain.SkipReason]int{}
	for _, s := range skipped {
		counts[s.Reason]++
	}
	parts := make([]string, 0, len(counts))
	for _, reason := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%d %s", counts[reason], reason))
	}
	return strings.Join(parts, ", ")
}
