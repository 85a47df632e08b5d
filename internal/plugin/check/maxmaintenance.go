package check

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

// maxMaintenance passes while fewer than max nodes other than the node
// under evaluation are in maintenance. The node itself never counts, so a
// node already in maintenance keeps passing: the check guards entry, and
// must not throw a node out of the slot it holds.
//
// With profileScoped only the profile's nodes in-maintenance for this
// profile count; otherwise every node in maintenance for any profile
// counts. With groupBy only nodes with the same value of that label as the
// node count; nodes without the label form one group of their own (the
// value ""), so they share a budget instead of escaping it. (The seed,
// sapcc/maintenance-controller, drops the grouping for a node without the
// label and counts the whole cluster against it.)
type maxMaintenance struct {
	max           int
	profileScoped bool
	groupBy       string
}

func newMaxMaintenance(cfg *pitstopv1alpha1.MaxMaintenanceCheck) (Check, error) {
	if cfg.Max < 1 {
		return nil, fmt.Errorf("max: must be at least 1, got %d", cfg.Max)
	}
	return &maxMaintenance{max: int(cfg.Max), profileScoped: cfg.ProfileScoped, groupBy: cfg.GroupBy}, nil
}

// Evaluate implements Check.
func (m *maxMaintenance) Evaluate(_ context.Context, c Context) (Result, error) {
	group := c.Node.Labels[m.groupBy]
	taken := 0
	nodes := m.candidates(c)
	for i := range nodes {
		n := &nodes[i]
		if n.Name == c.Node.Name || (m.groupBy != "" && n.Labels[m.groupBy] != group) {
			continue
		}
		if m.inMaintenance(c, n) {
			taken++
		}
	}
	reason := fmt.Sprintf("%d of %d maintenance slots taken%s", taken, m.max, m.scope(c.Profile, group))
	return Result{Passed: taken < m.max, Reason: reason}, nil
}

func (m *maxMaintenance) candidates(c Context) []corev1.Node {
	if m.profileScoped {
		return c.Cluster.ProfileNodes(c.Profile)
	}
	return c.Cluster.Nodes()
}

func (m *maxMaintenance) inMaintenance(c Context, n *corev1.Node) bool {
	state, anywhere := c.Cluster.StateOf(n, c.Profile)
	if m.profileScoped {
		return state == pitstopv1alpha1.StateInMaintenance
	}
	return anywhere
}

// scope says which nodes were counted: " in profile os-patching,
// topology.kubernetes.io/zone=zone-a".
func (m *maxMaintenance) scope(profile, group string) string {
	s := ""
	if m.profileScoped {
		s = " in profile " + profile
	}
	if m.groupBy == "" {
		return s
	}
	if s == "" {
		s = " in"
	} else {
		s += ","
	}
	if group == "" {
		return s + " nodes without label " + m.groupBy
	}
	return s + " " + m.groupBy + "=" + group
}
