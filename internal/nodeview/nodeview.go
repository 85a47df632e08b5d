// Package nodeview answers what pitstop asks of a Node object: whether it
// is Ready and whether it carries a taint.
package nodeview

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// Ready says whether the node's Ready condition is True.
func Ready(node *corev1.Node) bool {
	if c := Condition(node, corev1.NodeReady); c != nil {
		return c.Status == corev1.ConditionTrue
	}
	return false
}

// Condition returns the node's condition of type t, or nil.
func Condition(node *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == t {
			return &node.Status.Conditions[i]
		}
	}
	return nil
}

// HasTaint says whether the node carries a taint with key, of any effect.
func HasTaint(node *corev1.Node, key string) bool {
	return slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key })
}

// taintCloudUninitialized is the taint a cloud provider's node controller
// keeps on a node until it has initialized it.
const taintCloudUninitialized = "node.cloudprovider.kubernetes.io/uninitialized"

// Serving says whether the node takes workloads: Ready, not cordoned, and
// free of the taints the control plane keeps on a node that is not ready,
// unreachable or not initialized yet. A Ready node may carry the not-ready
// taint for a moment after it became Ready: it does not count yet.
func Serving(node *corev1.Node) bool {
	if !Ready(node) || node.Spec.Unschedulable {
		return false
	}
	for _, key := range []string{corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable, taintCloudUninitialized} {
		if HasTaint(node, key) {
			return false
		}
	}
	return true
}
