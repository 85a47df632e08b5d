package nodemaintenance

import (
	"fmt"

	"github.com/pitstop-dev/pitstop/internal/maintenance"
	"github.com/pitstop-dev/pitstop/internal/nodeview"
	corev1 "k8s.io/api/core/v1"
)

// quorumViolation returns why taking target down would leave fewer Ready
// control-plane nodes than a quorum of all control-plane nodes, or "" when
// it would not (or target is not a control-plane node). inMaintenance names
// the nodes other maintenances already hold: they count as down.
func quorumViolation(target string, nodes []corev1.Node, inMaintenance map[string]bool) string {
	total, remaining := 0, 0
	isTargetCP := false
	for i := range nodes {
		n := &nodes[i]
		if !maintenance.IsControlPlane(n) {
			continue
		}
		total++
		if n.Name == target {
			isTargetCP = true
			continue
		}
		if nodeview.Ready(n) && !inMaintenance[n.Name] {
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
