package nodelink

import (
	"maps"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/klog/v2"

	"github.com/pitstop-dev/pitstop/internal/machineapi"
)

// machineKey is the value of the Node's machineapi.AnnotationMachine:
// namespace/name.
func machineKey(m *machinev1beta1.Machine) string { return klog.KObj(m).String() }

// linkedNode returns a copy of node as it is once linked to m: annotated
// with the Machine, carrying the Machine's spec.metadata labels and
// annotations (the Machine's value wins when both have a key, as in
// OpenShift), and with each of the Machine's taints the Node has no taint
// of the same key and effect for appended. Nothing the Node has is
// removed. taintsAdded says whether the taint list grew, which is what
// makes the write need an optimistic lock.
func linkedNode(node *corev1.Node, m *machinev1beta1.Machine) (linked *corev1.Node, taintsAdded bool) {
	linked = node.DeepCopy()
	linked.Labels = merged(linked.Labels, m.Spec.ObjectMeta.Labels)
	linked.Annotations = merged(linked.Annotations, m.Spec.ObjectMeta.Annotations)
	// Set after the Machine's annotations: the link itself is not theirs to
	// name.
	linked.Annotations = merged(linked.Annotations, map[string]string{machineapi.AnnotationMachine: machineKey(m)})
	for _, t := range m.Spec.Taints {
		if !hasTaint(linked.Spec.Taints, t) {
			linked.Spec.Taints = append(linked.Spec.Taints, t)
			taintsAdded = true
		}
	}
	return linked, taintsAdded
}

// merged returns dst with every entry of src set, allocating dst only when
// there is something to set.
func merged(dst, src map[string]string) map[string]string {
	if len(src) == 0 {
		return dst
	}
	if dst == nil {
		dst = make(map[string]string, len(src))
	}
	maps.Copy(dst, src)
	return dst
}

// hasTaint says whether taints hold one with t's key and effect: the
// Node's own value for it is kept, as OpenShift does and as the API server
// allows only one taint per key and effect.
func hasTaint(taints []corev1.Taint, t corev1.Taint) bool {
	for _, have := range taints {
		if have.Key == t.Key && have.Effect == t.Effect {
			return true
		}
	}
	return false
}

// nodeChanged says whether linkedNode changed anything a patch would write.
func nodeChanged(before, after *corev1.Node) bool {
	return !equality.Semantic.DeepEqual(before.Labels, after.Labels) ||
		!equality.Semantic.DeepEqual(before.Annotations, after.Annotations) ||
		!equality.Semantic.DeepEqual(before.Spec.Taints, after.Spec.Taints)
}

// nodeRef is the reference a linked Machine's status.nodeRef holds.
func nodeRef(node *corev1.Node) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Node", Name: node.Name, UID: node.UID}
}

// isLinkedTo says whether m's status.nodeRef already names node, this very
// object (a Node deleted and registered again under the same name has
// another UID).
func isLinkedTo(m *machinev1beta1.Machine, node *corev1.Node) bool {
	ref := m.Status.NodeRef
	return ref != nil && ref.Kind == "Node" && ref.Name == node.Name && ref.UID == node.UID
}
