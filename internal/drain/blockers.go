package drain

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// CoveringPDB returns the PodDisruptionBudget that covers pod, or nil. The
// Eviction API refuses to evict a pod covered by more than one budget, so
// the first match is the one that matters.
func CoveringPDB(pod *corev1.Pod, pdbs []policyv1.PodDisruptionBudget) *policyv1.PodDisruptionBudget {
	for i := range pdbs {
		pdb := &pdbs[i]
		if pdb.Namespace != pod.Namespace || pdb.Spec.Selector == nil {
			continue
		}
		selector, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || selector.Empty() {
			continue
		}
		if selector.Matches(labels.Set(pod.Labels)) {
			return pdb
		}
	}
	return nil
}

// disruptedPodTimeout is how long the disruption controller keeps counting
// a pod whose eviction the API server admitted but that has not been
// deleted (an eviction cut off between the two): after it, the pod counts
// as healthy again.
const disruptedPodTimeout = 2 * time.Minute

// PDBMessage says, for people, why a budget refuses disruptions now:
// "PodDisruptionBudget team-a/web allows 0 disruptions (9 of 10 pods healthy, 9 needed)".
// Pods the budget still counts as being evicted (status.disruptedPods) are
// named with when the last is forgotten: they explain a budget that allows
// nothing with every pod healthy.
func PDBMessage(pdb *policyv1.PodDisruptionBudget) string {
	msg := fmt.Sprintf("PodDisruptionBudget %s/%s allows %d disruptions (%d of %d pods healthy, %d needed",
		pdb.Namespace, pdb.Name, pdb.Status.DisruptionsAllowed, pdb.Status.CurrentHealthy, pdb.Status.ExpectedPods, pdb.Status.DesiredHealthy)
	if n := len(pdb.Status.DisruptedPods); n > 0 {
		var last time.Time
		for _, at := range pdb.Status.DisruptedPods {
			if at.After(last) {
				last = at.Time
			}
		}
		msg += fmt.Sprintf("; %d %s counted as being evicted until %s at the latest",
			n, plural(n, "pod", "pods"), last.Add(disruptedPodTimeout).UTC().Format(time.RFC3339))
	}
	return msg + ")"
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// StatusView is what a manager has seen of a PodDisruptionBudget's status,
// on its own clock.
type StatusView struct {
	// Gap is when the manager last lost sight of the API server, or took
	// over a drain another process had started (zero: never). Status read
	// before then, or unchanged since, may predate the disruption
	// controller's recomputation after an API server restart.
	Gap time.Time
	// Changed is when the manager last saw the budget's status change
	// (zero: not since it started).
	Changed time.Time
	// Settle is how long after Gap a budget whose status has not changed
	// is trusted all the same: the disruption controller writes status only
	// when it changes, so an unchanged status may be current.
	Settle time.Duration
}

// StaleStatus says why a budget's status cannot be trusted to evict the
// pods it covers at now ("" when it can), and until when at most the wait
// lasts (zero: until the budget changes).
//
// The status is stale while status.observedGeneration is behind
// metadata.generation: the disruption controller has not yet judged the
// budget as written. After a gap, a status that allows disruptions is also
// stale until the manager sees it change, or until Settle has passed.
func StaleStatus(pdb *policyv1.PodDisruptionBudget, v StatusView, now time.Time) (string, time.Time) {
	name := pdb.Namespace + "/" + pdb.Name
	if pdb.Status.ObservedGeneration < pdb.Generation {
		return fmt.Sprintf("waiting for PodDisruptionBudget %s status to be current: status.observedGeneration %d is behind metadata.generation %d",
			name, pdb.Status.ObservedGeneration, pdb.Generation), time.Time{}
	}
	// A stale status that allows no disruption can only keep pods in
	// place: the API server refuses their evictions on it.
	if pdb.Status.DisruptionsAllowed < 1 || v.Gap.IsZero() || v.Changed.After(v.Gap) {
		return "", time.Time{}
	}
	until := v.Gap.Add(v.Settle)
	if !now.Before(until) {
		return "", time.Time{}
	}
	return fmt.Sprintf("waiting for PodDisruptionBudget %s status to be current: pitstop lost sight of the API server (or took the drain over) at %s; the status has not changed since, so it is trusted from %s at the latest",
		name, v.Gap.UTC().Format(time.RFC3339), until.UTC().Format(time.RFC3339)), until
}
