package machineset

import (
	"context"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pitstop-dev/pitstop/internal/nodeview"
)

// replicaStatus returns the MachineSet's status for its owned Machines at
// now, and how long until a ready Machine becomes available (zero when no
// Machine is waiting for that), so the reconcile can come back exactly
// then: nothing else would wake it. nodes are the Nodes named by the
// Machines' nodeRefs; a Machine whose Node is missing is not ready.
func replicaStatus(ms *machinev1beta1.MachineSet, owned []*machinev1beta1.Machine, nodes map[string]*corev1.Node, now time.Time) (machinev1beta1.MachineSetStatus, time.Duration) {
	st := *ms.Status.DeepCopy()
	st.ObservedGeneration = ms.Generation
	st.ErrorReason, st.ErrorMessage = nil, nil
	st.Replicas, st.FullyLabeledReplicas, st.ReadyReplicas, st.AvailableReplicas = int32(len(owned)), 0, 0, 0

	templateLabels := labels.SelectorFromSet(ms.Spec.Template.Labels)
	minReady := time.Duration(ms.Spec.MinReadySeconds) * time.Second
	var recheck time.Duration
	for _, m := range owned {
		if templateLabels.Matches(labels.Set(m.Labels)) {
			st.FullyLabeledReplicas++
		}
		ready := readyCondition(m, nodes)
		if ready == nil {
			continue
		}
		st.ReadyReplicas++
		switch wait := ready.LastTransitionTime.Add(minReady).Sub(now); {
		case minReady == 0 || !ready.LastTransitionTime.IsZero() && wait <= 0:
			st.AvailableReplicas++
		case ready.LastTransitionTime.IsZero():
			// No way to tell for how long the Node has been ready: as
			// OpenShift does, it is not available.
		case recheck == 0 || wait < recheck:
			recheck = wait
		}
	}
	// The CRD's scale subresource names status.labelSelector, but neither
	// its schema nor the Go type has that field, so the API server would
	// drop it: the selector is not written.
	return st, recheck
}

// readyCondition returns the Ready condition of the Machine's Node when it
// is True, or nil.
func readyCondition(m *machinev1beta1.Machine, nodes map[string]*corev1.Node) *corev1.NodeCondition {
	if m.Status.NodeRef == nil {
		return nil
	}
	node := nodes[m.Status.NodeRef.Name]
	if node == nil {
		return nil
	}
	if c := nodeview.Condition(node, corev1.NodeReady); c != nil && c.Status == corev1.ConditionTrue {
		return c
	}
	return nil
}

// invalidStatus returns the MachineSet's status when its spec is invalid:
// the counts stay as they were, and errorReason and errorMessage say what
// a person must fix.
func invalidStatus(ms *machinev1beta1.MachineSet, err error) machinev1beta1.MachineSetStatus {
	st := *ms.Status.DeepCopy()
	st.ObservedGeneration = ms.Generation
	st.ErrorReason = ptr.To(machinev1beta1.InvalidConfigurationMachineSetError)
	st.ErrorMessage = ptr.To(err.Error())
	return st
}

// patchStatus writes the status of ms, when it differs from base's, with
// one merge patch of the status subresource. The optimistic lock makes a
// reconcile that read a stale MachineSet lose instead of overwriting a
// newer status.
func (r *Reconciler) patchStatus(ctx context.Context, base, ms *machinev1beta1.MachineSet) (bool, error) {
	if equality.Semantic.DeepEqual(base.Status, ms.Status) {
		return false, nil
	}
	return true, r.client.Status().Patch(ctx, ms, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}
