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
