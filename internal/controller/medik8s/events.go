package medik8s

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Event reasons on a medik8s NodeMaintenance, and UncordonNode on its
// Node: the ones the medik8s operator emits, so alerts and dashboards built
// on them keep working.
const (
	EventBeginMaintenance   = "BeginMaintenance"
	EventSucceedMaintenance = "SucceedMaintenance"
	EventFailedMaintenance  = "FailedMaintenance"
	EventRemovedMaintenance = "RemovedMaintenance"
	// EventUncordonNode is on the Node: its maintenance ended and it is
	// schedulable again. pitstop's own Restored Event is on pitstop's
	// NodeMaintenance, where the medik8s operator's users do not look.
	EventUncordonNode = "UncordonNode"
	// EventLeaseHeld is pitstop's: the node's medik8s Lease is held by
	// another component, and the maintenance waits for it.
	EventLeaseHeld = "LeaseHeld"
)

// Events are emitted on transitions, after the write that makes them true
// succeeded.

func (r *Reconciler) eventBegin(obj *unstructured.Unstructured, s spec) {
	r.recorder.Eventf(obj, nil, corev1.EventTypeNormal, EventBeginMaintenance, "Start",
		"maintenance of node %s began; pitstop NodeMaintenance %s cordons and drains it", s.NodeName, r.kind.maintenanceName(client.ObjectKeyFromObject(obj)))
}

// eventPhase reports a change of phase to Succeeded or Failed.
func (r *Reconciler) eventPhase(obj *unstructured.Unstructured, s spec, before, after status) {
	if before.Phase == after.Phase {
		return
	}
	switch after.Phase {
	case phaseSucceeded:
		r.recorder.Eventf(obj, nil, corev1.EventTypeNormal, EventSucceedMaintenance, "Drain",
			"node %s is cordoned and drained", s.NodeName)
	case phaseFailed:
		r.recorder.Eventf(obj, nil, corev1.EventTypeWarning, EventFailedMaintenance, "Drain",
			"maintenance of node %s failed: %s", s.NodeName, truncate(after.LastError))
	}
}

func (r *Reconciler) eventRemoved(obj *unstructured.Unstructured, s spec) {
	r.recorder.Eventf(obj, nil, corev1.EventTypeNormal, EventRemovedMaintenance, "Restore",
		"maintenance of node %s ended", s.NodeName)
}

// eventUncordon reports on the node, as the medik8s operator does, that
// the maintenance of obj ended and the node takes pods again.
func (r *Reconciler) eventUncordon(obj *unstructured.Unstructured, node *corev1.Node) {
	r.recorder.Eventf(node, obj, corev1.EventTypeNormal, EventUncordonNode, "Uncordon",
		"node %s is schedulable again: the maintenance of %s ended", node.Name, r.kind.describe(obj))
}

// truncate keeps event notes under the API's 1 kB limit.
func truncate(s string) string {
	const limit = 900
	if len(s) <= limit {
		return s
	}
	return strings.ToValidUTF8(s[:limit], "") + "…"
}
