package nodemaintenance

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// Control-plane role labels: the current one, and the one older clusters
// (and OpenShift) still set.
const (
	labelControlPlane = "node-role.kubernetes.io/control-plane"
	labelMaster       = "node-role.kubernetes.io/master"
)

// IsControlPlane says whether a node runs the control plane, by either
// role label. The Machine controller's one-drain-at-a-time rule asks it too.
func IsControlPlane(node *corev1.Node) bool {
	_, cp := node.Labels[labelControlPlane]
	_, master := node.Labels[labelMaster]
	return cp || master
}

func isReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// quorumViolation returns why taking target down would leave fewer Ready
// control-plane nodes than a quorum of all control-plane nodes, or "" when
// it would not (or target is not a control-plane node). inMaintenance names
// the nodes other maintenances already hold: they count as down.
func quorumViolation(target string, nodes []corev1.Node, inMaintenance map[string]bool) string {
	total, remaining := 0, 0
	isTargetCP := false
	for i := range nodes {
		n := &nodes[i]
		if !IsControlPlane(n) {
			continue
		}
		total++
		if n.Name == target {
			isTargetCP = true
			continue
		}
		if isReady(n) && !inMaintenance[n.Name] {
			remaining++
		}
	}
	if !isTargetCP {
		return ""
	}
	quorum := total/2 + 1
	if remaining >= quorum {
		return ""
	}
	return fmt.Sprintf("control-plane node %s cannot go into maintenance: %d of %d control-plane nodes would stay Ready, fewer than the quorum of %d", target, remaining, total, quorum)
}
