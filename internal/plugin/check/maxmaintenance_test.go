package check

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

func TestMaxMaintenance(t *testing.T) {
	const zone = "topology.kubernetes.io/zone"
	// Profile os selects n1…n4, profile fw selects n3 and n5; n4 and n5
	// have no zone.
	fresh := func() *fakeCluster {
		return cluster(node("n1", zone, "zone-a"), node("n2", zone, "zone-a"), node("n3", zone, "zone-b"), node("n4"), node("n5")).
			with("os", operational, "n1", "n2", "n3", "n4").
			with("fw", operational, "n3", "n5")
	}
	budget := func(n int32, profileScoped bool, groupBy string) pitstopv1alpha1.CheckInstance {
		return pitstopv1alpha1.CheckInstance{MaxMaintenance: &pitstopv1alpha1.MaxMaintenanceCheck{Max: n, ProfileScoped: profileScoped, GroupBy: groupBy}}
	}
	evalOn := func(cl *fakeCluster, name string) Context {
		return Context{Node: cl.nodeOf(name), Profile: "os", State: cl.states["os"][name], Cluster: cl, Now: noon}
	}
	cl := map[string]*fakeCluster{
		"n2":         fresh().with("os", inMaint, "n2"),
		"n1":         fresh().with("os", inMaint, "n1"),
		"n1 n2":      fresh().with("os", inMaint, "n1", "n2"),
		"n3":         fresh().with("os", inMaint, "n3"),
		"fw n5":      fresh().with("fw", inMaint, "n5"),
		"fw n3":      fresh().with("fw", inMaint, "n3").with("os", required, "n3"),
		"n2 n3 fw5":  fresh().with("os", inMaint, "n2", "n3").with("fw", inMaint, "n5"),
		"none":       fresh(),
		"n2 and fw3": fresh().with("os", inMaint, "n2").with("fw", inMaint, "n3"),
	}
	runCases(t, map[string]evalCase{
		"passes while fewer nodes than max are in maintenance": {
			inst: budget(2, false, ""), ctx: evalOn(cl["n2"], "n1"),
			want: Result{Passed: true, Reason: "1 of 2 maintenance slots taken"},
		},
		"fails when max nodes are in maintenance": {
			inst: budget(1, false, ""), ctx: evalOn(cl["n2"], "n1"),
			want: Result{Reason: "1 of 1 maintenance slots taken"},
		},
		"passes with no node in maintenance": {
			inst: budget(1, false, ""), ctx: evalOn(cl["none"], "n1"),
			want: Result{Passed: true, Reason: "0 of 1 maintenance slots taken"},
		},
		"does not count the node against itself when it is already in maintenance": {
			inst: budget(1, false, ""), ctx: evalOn(cl["n1"], "n1"),
			want: Result{Passed: true, Reason: "0 of 1 maintenance slots taken"},
		},
		"fails for a node in maintenance when the others fill every slot": {
			inst: budget(1, false, ""), ctx: evalOn(cl["n1 n2"], "n1"),
			want: Result{Reason: "1 of 1 maintenance slots taken"},
		},
		"counts nodes in maintenance for other profiles unless profile scoped": {
			inst: budget(1, false, ""), ctx: evalOn(cl["fw n5"], "n1"),
			want: Result{Reason: "1 of 1 maintenance slots taken"},
		},
		"profile scoped ignores nodes outside the profile": {
			inst: budget(1, true, ""), ctx: evalOn(cl["fw n5"], "n1"),
			want: Result{Passed: true, Reason: "0 of 1 maintenance slots taken in profile os"},
		},
		"profile scoped ignores a profile node in maintenance for another profile": {
			inst: budget(1, true, ""), ctx: evalOn(cl["fw n3"], "n1"),
			want: Result{Passed: true, Reason: "0 of 1 maintenance slots taken in profile os"},
		},
		"profile scoped counts the profile's nodes in maintenance for it": {
			inst: budget(2, true, ""), ctx: evalOn(cl["n2 n3 fw5"], "n1"),
			want: Result{Reason: "2 of 2 maintenance slots taken in profile os"},
		},
		"groupBy counts only nodes with the node's value of the label": {
			inst: budget(1, false, zone), ctx: evalOn(cl["n3"], "n1"),
			want: Result{Passed: true, Reason: "0 of 1 maintenance slots taken in topology.kubernetes.io/zone=zone-a"},
		},
		"groupBy fails when the node's group is full": {
			inst: budget(1, false, zone), ctx: evalOn(cl["n2"], "n1"),
			want: Result{Reason: "1 of 1 maintenance slots taken in topology.kubernetes.io/zone=zone-a"},
		},
		"groupBy puts nodes without the label in one group of their own": {
			inst: budget(1, false, zone), ctx: evalOn(cl["fw n5"], "n4"),
			want: Result{Reason: "1 of 1 maintenance slots taken in nodes without label topology.kubernetes.io/zone"},
		},
		"groupBy does not count labelled nodes against a node without the label": {
			inst: budget(1, false, zone), ctx: evalOn(cl["n2"], "n4"),
			want: Result{Passed: true, Reason: "0 of 1 maintenance slots taken in nodes without label topology.kubernetes.io/zone"},
		},
		"profile scoped and grouped counts the profile's nodes in the group": {
			inst: budget(2, true, zone), ctx: evalOn(cl["n2 and fw3"], "n1"),
			want: Result{Passed: true, Reason: "1 of 2 maintenance slots taken in profile os, topology.kubernetes.io/zone=zone-a"},
		},
	})

	// Nodes let in and still on their way (their drain under way) hold
	// slots too, where the cluster knows the slots.
	holding := func(cl *fakeCluster, holders ...string) slotsCluster {
		return slotsCluster{fakeCluster: cl, holders: map[string][]string{"os/": holders, "os/" + zone + "=zone-a": holders}}
	}
	on := func(cl slotsCluster, name string) Context {
		return Context{Node: cl.nodeOf(name), Profile: "os", State: cl.states["os"][name], Cluster: cl, Now: noon}
	}
	draining := holding(fresh().with("os", required, "n2"), "n2")
	runCases(t, map[string]evalCase{
		"counts a node holding a slot on its way in": {
			inst: budget(1, true, ""), ctx: on(draining, "n1"),
			want: Result{Reason: "1 of 1 maintenance slots taken in profile os"},
		},
		"counts a node in maintenance that holds its slot once": {
			inst: budget(2, true, ""), ctx: on(holding(fresh().with("os", inMaint, "n2"), "n2"), "n1"),
			want: Result{Passed: true, Reason: "1 of 2 maintenance slots taken in profile os"},
		},
		"counts nodes in maintenance and nodes on their way in together": {
			inst: budget(2, true, ""), ctx: on(holding(fresh().with("os", inMaint, "n3").with("os", required, "n2"), "n2", "n3"), "n1"),
			want: Result{Reason: "2 of 2 maintenance slots taken in profile os"},
		},
		"does not count the node's own slot against it": {
			inst: budget(1, true, ""), ctx: on(holding(fresh().with("os", required, "n1"), "n1"), "n1"),
			want: Result{Passed: true, Reason: "0 of 1 maintenance slots taken in profile os"},
		},
		"reads the slots of the node's group": {
			inst: budget(1, true, zone), ctx: on(slotsCluster{fakeCluster: fresh(), holders: map[string][]string{"os/" + zone + "=zone-b": {"n3"}}}, "n1"),
			want: Result{Passed: true, Reason: "0 of 1 maintenance slots taken in profile os, topology.kubernetes.io/zone=zone-a"},
		},
		"counts the slots of the node's own group": {
			inst: budget(1, true, zone), ctx: on(slotsCluster{fakeCluster: fresh(), holders: map[string][]string{"os/" + zone + "=zone-a": {"n3"}}}, "n1"),
			want: Result{Reason: "1 of 1 maintenance slots taken in profile os, topology.kubernetes.io/zone=zone-a"},
		},
	})
}

// slotsCluster is a fakeCluster that knows the slot holders of each
// budget, by profile and group.
type slotsCluster struct {
	*fakeCluster
	holders map[string][]string
}

func (s slotsCluster) SlotHolders(profile string, _ *pitstopv1alpha1.MaxMaintenanceCheck, group string) []string {
	return s.holders[profile+"/"+group]
}

// TestMaxMaintenanceGroupsBySeveralLabels: with groupBy and groupByLabels
// the bound applies per combination of the labels' values: a node in
// maintenance in the same zone but another rack, or the same rack in
// another zone, does not count; one in the same zone and rack does.
func TestMaxMaintenanceGroupsBySeveralLabels(t *testing.T) {
	const zone, rack = "topology.kubernetes.io/zone", "rack"
	cl := func(inMaintenance ...string) *fakeCluster {
		return cluster(node("n1", zone, "a", rack, "r1"), node("n2", zone, "a", rack, "r2"), node("n3", zone, "b", rack, "r1"), node("n4", zone, "a", rack, "r1")).
			with("os", operational, "n1", "n2", "n3", "n4").with("os", inMaint, inMaintenance...)
	}
	inst := pitstopv1alpha1.CheckInstance{MaxMaintenance: &pitstopv1alpha1.MaxMaintenanceCheck{Max: 1, ProfileScoped: true, GroupBy: zone, GroupByLabels: []string{rack}}}
	on := func(c *fakeCluster) Context {
		return Context{Node: c.nodeOf("n1"), Profile: "os", State: operational, Cluster: c, Now: noon}
	}
	runCases(t, map[string]evalCase{
		"another rack of the zone, and the rack in another zone, do not count": {
			inst: inst, ctx: on(cl("n2", "n3")),
			want: Result{Passed: true, Reason: "0 of 1 maintenance slots taken in profile os, topology.kubernetes.io/zone=a, rack=r1"},
		},
		"the same zone and rack counts": {
			inst: inst, ctx: on(cl("n4")),
			want: Result{Reason: "1 of 1 maintenance slots taken in profile os, topology.kubernetes.io/zone=a, rack=r1"},
		},
	})
	m := inst.MaxMaintenance
	if g := GroupOf(m, map[string]string{zone: "a", rack: "r1"}); g != "topology.kubernetes.io/zone=a,rack=r1" || !InGroups(m, g) || InGroups(m, "topology.kubernetes.io/zone=a") {
		t.Errorf("group %q (in the budget's groups: %v), and a zone's alone must not be", g, InGroups(m, g))
	}
}

// TestMaxMaintenanceCountsAnotherProfile: with profile, a profile-scoped
// budget counts the nodes of the profile it names, in maintenance for that
// one, and its budget's slots.
func TestMaxMaintenanceCountsAnotherProfile(t *testing.T) {
	cl := cluster(node("n1"), node("n2"), node("n5")).
		with("os", operational, "n1", "n2").with("os", inMaint, "n2").
		with("fw", inMaint, "n5")
	inst := func(max int32) pitstopv1alpha1.CheckInstance {
		return pitstopv1alpha1.CheckInstance{MaxMaintenance: &pitstopv1alpha1.MaxMaintenanceCheck{Max: max, ProfileScoped: true, Profile: "fw"}}
	}
	on := Context{Node: cl.nodeOf("n1"), Profile: "os", State: operational, Cluster: cl, Now: noon}
	runCases(t, map[string]evalCase{
		"counts fw's node in maintenance, not os's own": {
			inst: inst(2), ctx: on,
			want: Result{Passed: true, Reason: "1 of 2 maintenance slots taken in profile fw"},
		},
		"fails once fw has max in maintenance": {
			inst: inst(1), ctx: on,
			want: Result{Reason: "1 of 1 maintenance slots taken in profile fw"},
		},
	})
	if key := MaxMaintenanceKey("os", inst(1).MaxMaintenance, ""); key.Name != "fw" {
		t.Errorf("budget key %+v, want fw's", key)
	}
}

// agesCluster is a fakeCluster that knows since when nodes are in
// maintenance.
type agesCluster struct {
	*fakeCluster
	since map[string]time.Time
}

func (a agesCluster) InMaintenanceSince(node string) (time.Time, bool) {
	t, ok := a.since[node]
	return t, ok
}

// TestMaxMaintenanceSkipAfterLeavesOutLongMaintenances: a node in
// maintenance for longer than skipAfter no longer counts; until then the
// failing check says when the first one will stop counting.
func TestMaxMaintenanceSkipAfterLeavesOutLongMaintenances(t *testing.T) {
	base := cluster(node("n1"), node("n2"), node("n3")).with("p", inMaint, "n1", "n2").with("p", required, "n3")
	cl := agesCluster{fakeCluster: base, since: map[string]time.Time{"n1": noon.Add(-2 * time.Hour), "n2": noon.Add(-10 * time.Minute)}}
	mm := func(skip time.Duration) pitstopv1alpha1.CheckInstance {
		m := &pitstopv1alpha1.MaxMaintenanceCheck{Max: 2, ProfileScoped: true}
		if skip > 0 {
			m.SkipAfter = &pitstopv1alpha1.Duration{Duration: skip}
		}
		return pitstopv1alpha1.CheckInstance{MaxMaintenance: m}
	}
	ctx := Context{Node: base.nodeOf("n3"), Profile: "p", Cluster: cl, Now: noon}
	eval := func(inst pitstopv1alpha1.CheckInstance) Result {
		t.Helper()
		c, err := New(inst, Deps{})
		if err != nil {
			t.Fatal(err)
		}
		r, err := c.Evaluate(t.Context(), ctx)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := eval(mm(0)); r.Passed {
		t.Fatalf("without skipAfter: %+v", r)
	}
	if r := eval(mm(time.Hour)); !r.Passed || r.Reason != "1 of 2 maintenance slots taken in profile p" {
		t.Fatalf("skipAfter 1h, n1 in maintenance for 2h: %+v", r)
	}
	r := eval(mm(3 * time.Hour))
	if r.Passed || !r.NextChange.Equal(noon.Add(time.Hour)) || !strings.Contains(r.Reason, "a node in maintenance for 3h0m0s stops counting") {
		t.Fatalf("skipAfter 3h: %+v, want a failure changing at %s", r, noon.Add(time.Hour))
	}
}

// TestMaxMaintenanceCountsTheSameFromTheNodesHoldingSlots: a Cluster that
// hands the check only the nodes in maintenance (Holding) gets the count
// it gets from every node, for every kind of budget, node and fleet.
func TestMaxMaintenanceCountsTheSameFromTheNodesHoldingSlots(t *testing.T) {
	const zone = "topology.kubernetes.io/zone"
	fresh := func() *fakeCluster {
		return cluster(node("n1", zone, "zone-a"), node("n2", zone, "zone-a"), node("n3", zone, "zone-b"), node("n4"), node("n5")).
			with("os", operational, "n1", "n2", "n3", "n4").
			with("fw", operational, "n3", "n5")
	}
	fleets := map[string]*fakeCluster{
		"none":       fresh(),
		"n1 n2":      fresh().with("os", inMaint, "n1", "n2"),
		"fw n3":      fresh().with("fw", inMaint, "n3").with("os", required, "n3"),
		"n2 n3 fw5":  fresh().with("os", inMaint, "n2", "n3").with("fw", inMaint, "n5"),
		"n4 and fw3": fresh().with("os", inMaint, "n4").with("fw", inMaint, "n3"),
	}
	occupied := [][]string{nil, {"n4"}, {"n1", "n5"}, {"n3", "a-node-that-is-gone"}}
	for name, f := range fleets {
		for _, occ := range occupied {
			for _, profileScoped := range []bool{false, true} {
				for _, groupBy := range []string{"", zone} {
					m := &pitstopv1alpha1.MaxMaintenanceCheck{Max: 1, ProfileScoped: profileScoped, GroupBy: groupBy}
					for _, n := range f.nodes {
						group := GroupOf(m, n.Labels)
						every := MaintenanceUsed(occupiedCluster{f, occ}, "os", m, group, n.Name, noon)
						held := MaintenanceUsed(holdingCluster{f, occ}, "os", m, group, n.Name, noon)
						if every != held {
							t.Errorf("%s, occupied %v, profileScoped %v, groupBy %q, for %s: %d counted from every node, %d from those holding slots",
								name, occ, profileScoped, groupBy, n.Name, every, held)
						}
					}
				}
			}
		}
	}
}

// occupiedCluster is a fakeCluster that knows the nodes under maintenance
// whatever started it.
type occupiedCluster struct {
	*fakeCluster
	occupied []string
}

func (o occupiedCluster) Occupied() []string { return o.occupied }

// holdingCluster is an occupiedCluster that hands out only the nodes in
// maintenance for some profile (Holding).
type holdingCluster occupiedCluster

func (h holdingCluster) Occupied() []string { return h.occupied }

func (h holdingCluster) HoldingNodes() []*corev1.Node {
	var out []*corev1.Node
	for i := range h.nodes {
		if _, anywhere := h.StateOf(&h.nodes[i], ""); anywhere {
			out = append(out, &h.nodes[i])
		}
	}
	return out
}

func (h holdingCluster) Node(name string) *corev1.Node {
	for i := range h.nodes {
		if h.nodes[i].Name == name {
			return &h.nodes[i]
		}
	}
	return nil
}

func (h holdingCluster) Selects(profile string, node *corev1.Node) bool {
	_, ok := h.states[profile][node.Name]
	return ok
}

// Nodes and ProfileNodes are not read when the nodes holding slots are at
// hand.
func (h holdingCluster) Nodes() []*corev1.Node { panic("every node was listed") }

func (h holdingCluster) ProfileNodes(string) []*corev1.Node {
	panic("every node of the profile was listed")
}
