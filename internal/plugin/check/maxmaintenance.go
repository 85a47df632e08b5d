package check

import (
	"context"
	"fmt"
	"strings"
	"time"

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
// counts. With groupBy (and groupByLabels) only nodes with the same values
// of those labels as the node count; nodes without a label form groups of
// their own (the value ""), so they share a budget instead of escaping it.
// (The seed, sapcc/maintenance-controller, drops the grouping for a node
// without the label and counts the whole cluster against it.)
type maxMaintenance struct {
	cfg pitstopv1alpha1.MaxMaintenanceCheck
}

func newMaxMaintenance(cfg *pitstopv1alpha1.MaxMaintenanceCheck) (Check, error) {
	if cfg.Max < 1 {
		return nil, fmt.Errorf("max: must be at least 1, got %d", cfg.Max)
	}
	return &maxMaintenance{cfg: *cfg.DeepCopy()}, nil
}

// Evaluate implements Check.
func (m *maxMaintenance) Evaluate(_ context.Context, c Context) (Result, error) {
	group := GroupOf(&m.cfg, c.Node.Labels)
	taken, next := maintenanceUsed(c.Cluster, c.Profile, &m.cfg, group, c.Node.Name, c.Now)
	reason := fmt.Sprintf("%d of %d maintenance slots taken%s", taken, m.cfg.Max, m.scope(c.Profile, c.Node.Labels))
	r := Result{Passed: taken < int(m.cfg.Max), Reason: reason}
	if !r.Passed && m.cfg.SkipAfter != nil {
		// A node in maintenance for longer than skipAfter stops counting
		// then, with nothing else changing.
		r.NextChange = next
		r.Reason += fmt.Sprintf(" (a node in maintenance for %s stops counting)", m.cfg.SkipAfter.Duration)
	}
	return r, nil
}

// MaintenanceUsed counts the nodes that use a maxMaintenance budget m in
// one group (GroupOf: the nodes with those values of its labels; every
// node without groups), leaving out the node named except: the
// nodes in maintenance (with ProfileScoped the profile's nodes in
// maintenance for it, otherwise every node in maintenance for any
// profile) and, when the Cluster knows them (Slots), the nodes holding
// the budget's slots on their way in; without ProfileScoped also, when the
// Cluster knows them (Occupancy), every node under maintenance whatever
// started it.
func MaintenanceUsed(cluster Cluster, profile string, m *pitstopv1alpha1.MaxMaintenanceCheck, group, except string, now time.Time) int {
	n, _ := maintenanceUsed(cluster, profile, m, group, except, now)
	return n
}

// maintenanceUsed is MaintenanceUsed, and with skipAfter the time the
// first node counted stops counting (zero: none will by itself).
func maintenanceUsed(cluster Cluster, profile string, m *pitstopv1alpha1.MaxMaintenanceCheck, group, except string, now time.Time) (int, time.Time) {
	if m.ProfileScoped {
		profile = ScopeProfile(profile, m)
	}
	counted := map[string]bool{}
	nodes, inGroup := budgetScope(cluster, profile, m, group)
	for _, n := range nodes {
		if n.Name == except {
			continue
		}
		state, anywhere := cluster.StateOf(n, profile)
		if (m.ProfileScoped && state == pitstopv1alpha1.StateInMaintenance) || (!m.ProfileScoped && anywhere) {
			counted[n.Name] = true
		}
	}
	if slots, ok := cluster.(Slots); ok {
		for _, holder := range slots.SlotHolders(profile, m, group) {
			if holder != except {
				counted[holder] = true
			}
		}
	}
	if o, ok := cluster.(Occupancy); ok && !m.ProfileScoped {
		for _, name := range o.Occupied() {
			if name != except && inGroup(name) {
				counted[name] = true
			}
		}
	}
	var next time.Time
	if ages, ok := cluster.(MaintenanceAges); ok && m.SkipAfter != nil {
		for name := range counted {
			since, in := ages.InMaintenanceSince(name)
			if !in {
				continue
			}
			if skipped := since.Add(m.SkipAfter.Duration); !now.Before(skipped) {
				delete(counted, name)
			} else if next.IsZero() || skipped.Before(next) {
				next = skipped
			}
		}
	}
	return len(counted), next
}

// budgetScope returns the nodes in m's group that may count against it:
// of the profile's nodes when profileScoped, else of every node; those
// whose record holds budget slots where the Cluster keeps them (Holding),
// otherwise all of them. inGroup says whether a node named is in the
// group's scope (every node, without profileScoped, in the group).
func budgetScope(cluster Cluster, profile string, m *pitstopv1alpha1.MaxMaintenanceCheck, group string) (nodes []*corev1.Node, inGroup func(string) bool) {
	if h, ok := cluster.(Holding); ok {
		for _, n := range h.HoldingNodes() {
			if (!m.ProfileScoped || h.Selects(profile, n)) && GroupOf(m, n.Labels) == group {
				nodes = append(nodes, n)
			}
		}
		return nodes, func(name string) bool {
			n := h.Node(name)
			return n != nil && GroupOf(m, n.Labels) == group
		}
	}
	scope := map[string]bool{}
	for _, n := range scopedNodes(cluster, profile, m.ProfileScoped) {
		if GroupOf(m, n.Labels) == group {
			nodes = append(nodes, n)
			scope[n.Name] = true
		}
	}
	return nodes, func(name string) bool { return scope[name] }
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
func (m *maxMaintenance) scope(profile string, labels map[string]string) string {
	s := ""
	if m.cfg.ProfileScoped {
		s = " in profile " + ScopeProfile(profile, &m.cfg)
	}
	keys := GroupLabels(&m.cfg)
	if len(keys) == 0 {
		return s
	}
	if s == "" {
		s = " in"
	} else {
		s += ","
	}
	var parts []string
	for _, k := range keys {
		if v, ok := labels[k]; ok && v != "" {
			parts = append(parts, k+"="+v)
		} else {
			parts = append(parts, "nodes without label "+k)
		}
	}
	return s + " " + strings.Join(parts, ", ")
}
