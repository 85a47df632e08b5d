package nodelink

import (
	"fmt"
	"strings"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Event reasons.
const (
	// EventLinked, on a Machine: its status.nodeRef now names its Node.
	EventLinked = "Linked"
	// EventAmbiguousMachine, on a Node: several Machines match it equally
	// well, so it is linked to none.
	EventAmbiguousMachine = "AmbiguousMachine"
	// EventAmbiguousNode, on a Node: the Machine it matches matches other
	// Nodes equally well, so none of them is linked to it.
	EventAmbiguousNode = "AmbiguousNode"
)

// actionLink is the action of every Event here.
const actionLink = "Link"

// Events are emitted after the write that makes them true succeeded, or,
// for the ambiguous matches, when a link is refused.

func (r *Reconciler) eventLinked(m *machinev1beta1.Machine, node *corev1.Node, by evidence) {
	r.recorder.Eventf(m, node, corev1.EventTypeNormal, EventLinked, actionLink,
		"linked to node %s by %s", node.Name, by)
}

func (r *Reconciler) eventAmbiguousMachine(node *corev1.Node, machines []*machinev1beta1.Machine, by evidence) {
	r.recorder.Eventf(node, machines[0], corev1.EventTypeWarning, EventAmbiguousMachine, actionLink,
		"node %s matches machines %s by %s; linking none until only one does", node.Name, names(machines), by)
}

func (r *Reconciler) eventAmbiguousNode(node *corev1.Node, m *machinev1beta1.Machine, nodes []*corev1.Node, by evidence) {
	r.recorder.Eventf(node, m, corev1.EventTypeWarning, EventAmbiguousNode, actionLink,
		"machine %s matches nodes %s by %s; linking none until only one does", machineKey(m), names(nodes), by)
}

// maxNames bounds the objects an Event note names.
const maxNames = 5

// names lists objects as "a and b" or "a, b, c and d", at most maxNames of
// them, then how many more there are.
func names[T client.Object](objs []T) string {
	list := make([]string, 0, min(len(objs), maxNames))
	for _, o := range objs[:min(len(objs), maxNames)] {
		list = append(list, klog.KObj(o).String())
	}
	if rest := len(objs) - len(list); rest > 0 {
		return strings.Join(list, ", ") + fmt.Sprintf(" and %d more", rest)
	}
	if len(list) < 2 {
		return strings.Join(list, "")
	}
	return strings.Join(list[:len(list)-1], ", ") + " and " + list[len(list)-1]
}
