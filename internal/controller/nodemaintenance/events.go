package nodemaintenance

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/drain"
)

// Events pair with condition changes; each is emitted on the transition,
// not on every reconcile. The node is the related object, so
// `kubectl describe node` shows them too.

func (r *Reconciler) eventStarted(nm *pitstopv1alpha1.NodeMaintenance) {
	reason := nm.Spec.Reason
	if reason == "" {
		reason = "no reason given"
	}
	r.recorder.Eventf(nm, nil, corev1.EventTypeNormal, pitstopv1alpha1.EventMaintenanceStarted, "Start",
		"maintenance of node %s started: %s", nm.Spec.NodeName, reason)
}

func (r *Reconciler) eventCordoned(nm *pitstopv1alpha1.NodeMaintenance, node *corev1.Node) {
	r.recorder.Eventf(nm, node, corev1.EventTypeNormal, pitstopv1alpha1.EventCordoned, "Cordon",
		"node %s cordoned and tainted %s", node.Name, pitstopv1alpha1.TaintDrain)
}

func (r *Reconciler) eventEvictionBlocked(nm *pitstopv1alpha1.NodeMaintenance, msg string) {
	r.recorder.Eventf(nm, nil, corev1.EventTypeWarning, pitstopv1alpha1.EventEvictionBlocked, "Evict", "%s", truncate(msg))
}

// eventEvictionHeld says the drain holds pods back until budgets' status
// is current: a wait, not a fault, but one a person may look for.
func (r *Reconciler) eventEvictionHeld(nm *pitstopv1alpha1.NodeMaintenance, msg string) {
	r.recorder.Eventf(nm, nil, corev1.EventTypeNormal, pitstopv1alpha1.EventEvictionHeld, "Evict", "%s", truncate(msg))
}

func (r *Reconciler) eventDrained(nm *pitstopv1alpha1.NodeMaintenance, took time.Duration) {
	r.recorder.Eventf(nm, nil, corev1.EventTypeNormal, pitstopv1alpha1.EventDrained, "Drain",
		"node %s drained in %s", nm.Spec.NodeName, took.Round(time.Millisecond))
}

// eventPods names each pod the drain evicted or deleted, as the
// maintenance-controller and the medik8s operator report each pod, on the
// NodeMaintenance with the pod as the related object. They are paced over
// every drain (Options.PodEventRate, PodEventBurst), so that a fleet's
// drains do not flood the API server with Events; a pod past the pace gets
// none (the status and the Drained Event still count every pod).
func (r *Reconciler) eventPods(nm *pitstopv1alpha1.NodeMaintenance, answers drain.Result) {
	for _, res := range answers.Pods {
		reason, done := pitstopv1alpha1.EventPodEvicted, "evicted"
		switch res.Outcome {
		case drain.Evicted:
		case drain.Deleted:
			reason, done = pitstopv1alpha1.EventPodDeleted, "deleted"
		default:
			continue
		}
		if !r.podEvents.TryAccept() {
			continue
		}
		r.recorder.Eventf(nm, res.Pod, corev1.EventTypeNormal, reason, "Drain", "pod %s/%s %s from node %s", res.Pod.Namespace, res.Pod.Name, done, nm.Spec.NodeName)
	}
}

func (r *Reconciler) eventDrainFailed(nm *pitstopv1alpha1.NodeMaintenance, msg string) {
	r.recorder.Eventf(nm, nil, corev1.EventTypeWarning, pitstopv1alpha1.EventDrainFailed, "Drain", "%s", truncate(msg))
}

func (r *Reconciler) eventForceDeleted(nm *pitstopv1alpha1.NodeMaintenance, pods []*corev1.Pod) {
	r.recorder.Eventf(nm, nil, corev1.EventTypeWarning, pitstopv1alpha1.EventForceDeleted, "Delete",
		"spec.drain.timeout passed: deleted %d pods past their PodDisruptionBudgets: %s", len(pods), podList(pods, messageListLimit))
}

func (r *Reconciler) eventNodeNotFound(nm *pitstopv1alpha1.NodeMaintenance, msg string) {
	r.recorder.Eventf(nm, nil, corev1.EventTypeWarning, pitstopv1alpha1.EventNodeNotFound, "Cordon", "%s", msg)
}

func (r *Reconciler) eventRestored(nm *pitstopv1alpha1.NodeMaintenance, node *corev1.Node, cordonedBefore bool) {
	if cordonedBefore {
		r.recorder.Eventf(nm, node, corev1.EventTypeNormal, pitstopv1alpha1.EventLeftCordoned, "Restore",
			"node %s stays cordoned: it was cordoned before the maintenance started; pitstop's taint is removed", node.Name)
		return
	}
	r.recorder.Eventf(nm, node, corev1.EventTypeNormal, pitstopv1alpha1.EventRestored, "Restore",
		"node %s uncordoned and pitstop's taints removed", node.Name)
}

// truncate keeps event notes under the API's 1 kB limit.
func truncate(s string) string {
	const limit = 1000
	if len(s) <= limit {
		return s
	}
	return fmt.Sprintf("%s…", s[:limit-3])
}
