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
	taken := MaintenanceUsed(c.Cluster, c.Profile, m.profileScoped, m.groupBy, group, c.Node.Name)
	reason := fmt.Sprintf("%d of %d maintenance slots taken%s", taken, m.max, m.scope(c.Profile, group))
	return Result{Passed: taken < m.max, Reason: reason}, nil
}

// MaintenanceUsed counts the nodes in maintenance that a maxMaintenance
// budget counts in one group (the nodes whose groupBy label has the value
// group; every node when groupBy is empty), leaving out the node named
// except: with profileScoped the profile's nodes in maintenance for it,
// otherwise every node in maintenance for any profile.
func MaintenanceUsed(cluster Cluster, profile string, profileScoped bool, groupBy, group, except string) int {
	used := 0
	for _, n := range scopedNodes(cluster, profile, profileScoped) {
		if n.Name == except || (groupBy != "" && n.Labels[groupBy] != group) {
			continue
		}
		state, anywhere := cluster.StateOf(n, profile)
		if (profileScoped && state == pitstopv1alpha1.StateInMaintenance) || (!profileScoped && anywhere) {
			used++
		}
	}
	return used
}

// scopedNodes is the profile's nodes when profileScoped, else every node.
func scopedNodes(cluster Cluster, profile string, profileScoped bool) []*corev1.Node {
	if profileScoped {
		return cluster.ProfileNodes(profile)
	}
	return cluster.Nodes()
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
