package machinemaintenance

import (
	"context"
	"fmt"
	"maps"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/nodeview"
)

// signal puts the earliest open event of a node on it: the label, the
// annotations the deadline check reads, and the ScheduledEvent condition;
// without one, it takes them off. changed is the object just written,
// newer than its copy in all.
func (r *Reconciler) signal(ctx context.Context, nodeName string, all []pitstopv1alpha1.MachineMaintenance, changed *pitstopv1alpha1.MachineMaintenance) error {
	if nodeName == "" {
		return nil
	}
	node := &corev1.Node{}
	if err := r.client.Get(ctx, client.ObjectKey{Name: nodeName}, node); err != nil {
		return client.IgnoreNotFound(err)
	}
	var open []*pitstopv1alpha1.MachineMaintenance
	for i := range all {
		mm := &all[i]
		if changed != nil && mm.Namespace == changed.Namespace && mm.Name == changed.Name {
			mm = changed
		}
		if mm.Spec.NodeName == nodeName && !mm.Status.Phase.Finished() && mm.DeletionTimestamp.IsZero() && mm.Spec.Provider != providerPitstop {
			open = append(open, mm)
		}
	}
	sort.SliceStable(open, func(i, j int) bool { return open[i].Spec.StartsBefore(&open[j].Spec) })
	before := node.DeepCopy()
	cond := corev1.NodeCondition{Type: pitstopv1alpha1.ConditionScheduledEvent, Status: corev1.ConditionFalse, Reason: ReasonNoScheduledEvent,
		Message: "no scheduled cloud event"}
	if len(open) == 0 {
		delete(node.Labels, pitstopv1alpha1.LabelScheduledEvent)
		for _, k := range []string{pitstopv1alpha1.AnnotationScheduledEventNotBefore, pitstopv1alpha1.AnnotationScheduledEventStartBy, pitstopv1alpha1.AnnotationScheduledEventObject} {
			delete(node.Annotations, k)
		}
	} else {
		e := open[0]
		if node.Labels == nil {
			node.Labels = map[string]string{}
		}
		if node.Annotations == nil {
			node.Annotations = map[string]string{}
		}
		node.Labels[pitstopv1alpha1.LabelScheduledEvent] = e.Spec.Code
		setOrDelete(node.Annotations, pitstopv1alpha1.AnnotationScheduledEventNotBefore, rfc3339(e.Spec.NotBefore))
		setOrDelete(node.Annotations, pitstopv1alpha1.AnnotationScheduledEventStartBy, rfc3339(e.Status.LatestSafeStart))
		node.Annotations[pitstopv1alpha1.AnnotationScheduledEventObject] = e.Namespace + "/" + e.Name
		cond = corev1.NodeCondition{Type: pitstopv1alpha1.ConditionScheduledEvent, Status: corev1.ConditionTrue, Reason: camel(e.Spec.Code),
			Message: fmt.Sprintf("%s at %s (start by %s), MachineMaintenance %s/%s", e.Spec.Code, timeOr(e.Spec.NotBefore, "an unknown time"),
				timeOr(e.Status.LatestSafeStart, "-"), e.Namespace, e.Name)}
		if len(open) > 1 {
			cond.Message += fmt.Sprintf("; %d more events", len(open)-1)
		}
	}
	if !maps.Equal(before.Labels, node.Labels) || !maps.Equal(before.Annotations, node.Annotations) {
		if err := r.client.Patch(ctx, node, client.MergeFrom(before)); err != nil {
			return client.IgnoreNotFound(err)
		}
	}
	old := nodeview.Condition(before, pitstopv1alpha1.ConditionScheduledEvent)
	if old == nil && cond.Status == corev1.ConditionFalse {
		return nil // never had one: nothing to say
	}
	if old != nil && old.Status == cond.Status && old.Reason == cond.Reason && old.Message == cond.Message {
		return nil
	}
	now := metav1.NewTime(r.clock.Now())
	cond.LastHeartbeatTime, cond.LastTransitionTime = now, now
	if old != nil && old.Status == cond.Status {
		cond.LastTransitionTime = old.LastTransitionTime
	}
	statusBefore := node.DeepCopy()
	setNodeCondition(node, cond)
	if err := r.client.Status().Patch(ctx, node, client.StrategicMergeFrom(statusBefore)); err != nil {
		return client.IgnoreNotFound(err)
	}
	return nil
}

func setNodeCondition(node *corev1.Node, c corev1.NodeCondition) {
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == c.Type {
			node.Status.Conditions[i] = c
			return
		}
	}
	node.Status.Conditions = append(node.Status.Conditions, c)
}
