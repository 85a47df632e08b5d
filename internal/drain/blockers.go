package drain

import (
	"fmt"

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

// PDBMessage says, for people, why a budget refuses disruptions now:
// "PodDisruptionBudget team-a/web allows 0 disruptions (9 of 10 pods healthy, 9 needed)".
func PDBMessage(pdb *policyv1.PodDisruptionBudget) string {
	return fmt.Sprintf("PodDisruptionBudget %s/%s allows %d disruptions (%d of %d pods healthy, %d needed)",
		pdb.Namespace, pdb.Name, pdb.Status.DisruptionsAllowed, pdb.Status.CurrentHealthy, pdb.Status.ExpectedPods, pdb.Status.DesiredHealthy)
}
