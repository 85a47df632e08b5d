package profile_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/budget"
	"github.com/pitstop-dev/pitstop/internal/controller/profile"
	"github.com/pitstop-dev/pitstop/internal/engine"
	"github.com/pitstop-dev/pitstop/internal/testutil"
	"github.com/pitstop-dev/pitstop/internal/testutil/clustertest"
)

// gaugesProfile: nodes labelled pool=gauges need maintenance when they
// carry reboot-needed; at most two per zone are in maintenance at once,
// and two at most enter it in any ten minutes.
func gaugesProfile() *pitstopv1alpha1.MaintenanceProfile {
	return &pitstopv1alpha1.MaintenanceProfile{
		ObjectMeta: metav1.ObjectMeta{Name: "gauges"},
		Spec: pitstopv1alpha1.MaintenanceProfileSpec{
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "gauges"}},
			Checks: []pitstopv1alpha1.CheckInstance{
				{Name: "reboot_needed", HasAnnotation: &pitstopv1alpha1.KeyValueCheck{Key: "reboot-needed"}},
				{Name: "budget", MaxMaintenance: &pitstopv1alpha1.MaxMaintenanceCheck{Max: 2, ProfileScoped: true, GroupBy: "zone"}},
				{Name: "pace", Stagger: &pitstopv1alpha1.StaggerCheck{Duration: pitstopv1alpha1.Duration{Duration: 10 * time.Minute}, Parallel: 2}},
			},
			States: pitstopv1alpha1.StatesSpec{
				Operational:         pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "reboot_needed", Next: pitstopv1alpha1.StateMaintenanceRequired}}},
				MaintenanceRequired: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "budget && pace", Next: pitstopv1alpha1.StateInMaintenance}}},
				InMaintenance:       pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "!reboot_needed", Next: pitstopv1alpha1.StateOperational}}},
			},
		},
	}
}

// TestFleetGaugesAreReadFromTheCacheAtScrapeTime: the manager serves the
// waiting and budget gauges of every profile, 0 while nothing waits and
// nothing is taken. Computed when scraped from the nodes' records and the
// slot Leases, the longest wait leaves out operational nodes and nodes
// whose checks passed (they are moving on), a budget per zone reports its
// fullest zone, a stagger slot whose time ran out is free, and the figures
// move with the clock alone.
func TestFleetGaugesAreReadFromTheCacheAtScrapeTime(t *testing.T) {
	m := clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{})
	p := gaugesProfile()
	testutil.Create(t, env.Client, p)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), p) })
	testutil.Eventually(t, 10*time.Second, 100*time.Millisecond, func() error {
		return expectSeries(testutil.GaugeSeries(t, metrics.Registry), map[string]float64{
			`pitstop_nodes_waiting_longest_seconds{profile="gauges"}`:            0,
			`pitstop_budget_slots{budget="budget",kind="size",profile="gauges"}`: 2,
			`pitstop_budget_slots{budget="budget",kind="used",profile="gauges"}`: 0,
			`pitstop_budget_slots{budget="pace",kind="size",profile="gauges"}`:   2,
			`pitstop_budget_slots{budget="pace",kind="used",profile="gauges"}`:   0,
		})
	})
	// Without a manager, nothing but the test changes the nodes' records
	// and the slots below.
	m.Stop()

	t0 := time.Now().Truncate(time.Second)
	for _, n := range []struct {
		name  string
		zone  string
		state pitstopv1alpha1.MaintenanceState
		since time.Duration // before t0
		// checks are the results the node's last evaluation recorded.
		checks map[string]bool
	}{
		{"gauges-operational", "c", pitstopv1alpha1.StateOperational, 10 * time.Hour, map[string]bool{"reboot_needed": false}},
		{"gauges-moving-on", "c", pitstopv1alpha1.StateMaintenanceRequired, 5 * time.Hour, map[string]bool{"budget": true, "pace": true}},
		{"gauges-zone-full", "a", pitstopv1alpha1.StateMaintenanceRequired, time.Hour, map[string]bool{"budget": false, "pace": true}},
		{"gauges-in", "a", pitstopv1alpha1.StateInMaintenance, 30 * time.Minute, map[string]bool{"reboot_needed": true}},
	} {
		record := engine.Record{Profiles: map[string]engine.ProfileRecord{"gauges": {
			Current: n.state, Previous: pitstopv1alpha1.StateOperational, Since: engine.Stamp{Time: t0.Add(-n.since)}, Checks: n.checks,
		}}}
		node := testutil.Node(n.name, testutil.WithLabels(map[string]string{"pool": "gauges", "zone": n.zone}), func(node *corev1.Node) {
			node.Annotations = map[string]string{pitstopv1alpha1.AnnotationMaintenanceData: record.Encode()}
		})
		testutil.Create(t, env.Client, node)
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), node) })
	}

	ns := testutil.Namespace(t, env.Client, "gauges-slots")
	slots := &budget.Slots{Client: env.Client, Cache: env.Client, Namespace: ns} // the API server stands in for the cache
	inZone := func(zone string) *corev1.Node {
		return testutil.Node("any", testutil.WithLabels(map[string]string{"zone": zone}))
	}
	for _, take := range []struct {
		check, zone, holder string
		at                  time.Duration // before t0
	}{
		{"budget", "a", "a-0", time.Hour},
		{"budget", "a", "a-1", time.Hour},
		{"budget", "b", "b-0", time.Hour},
		{"pace", "", "old", 20 * time.Minute},
		{"pace", "", "new", 5 * time.Minute},
	} {
		key, err := profile.BudgetKey(p, take.check, inZone(take.zone))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok, err := slots.Acquire(t.Context(), key, 2, take.holder, t0.Add(-take.at), nil); err != nil || !ok {
			t.Fatalf("%s taking a slot of %v: %v %v", take.holder, key, ok, err)
		}
	}

	clk := clocktesting.NewFakePassiveClock(t0)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(profile.NewFleetCollector(env.Client, &budget.Slots{Cache: env.Client, Namespace: ns}, clk))
	for _, tc := range []struct {
		at   time.Duration // after t0
		want map[string]float64
	}{
		// gauges-zone-full has waited an hour for a slot of zone a, whose
		// two slots are taken; gauges-in, half an hour for its reboot.
		// Of the two stagger slots, one was taken 20 minutes ago: free.
		{0, map[string]float64{
			`pitstop_nodes{profile="gauges",state="operational"}`:                1,
			`pitstop_nodes{profile="gauges",state="maintenance-required"}`:       2,
			`pitstop_nodes{profile="gauges",state="in-maintenance"}`:             1,
			`pitstop_nodes_waiting_longest_seconds{profile="gauges"}`:            3600,
			`pitstop_budget_slots{budget="budget",kind="used",profile="gauges"}`: 2,
			`pitstop_budget_slots{budget="budget",kind="size",profile="gauges"}`: 2,
			`pitstop_budget_slots{budget="pace",kind="used",profile="gauges"}`:   1,
			`pitstop_budget_slots{budget="pace",kind="size",profile="gauges"}`:   2,
		}},
		// Six minutes on, the other stagger slot's ten minutes are up too.
		{6 * time.Minute, map[string]float64{
			`pitstop_nodes_waiting_longest_seconds{profile="gauges"}`:            3960,
			`pitstop_budget_slots{budget="budget",kind="used",profile="gauges"}`: 2,
			`pitstop_budget_slots{budget="pace",kind="used",profile="gauges"}`:   0,
		}},
	} {
		clk.SetTime(t0.Add(tc.at))
		if err := expectSeries(testutil.GaugeSeries(t, reg), tc.want); err != nil {
			t.Errorf("at t0+%s: %v", tc.at, err)
		}
	}
}

// expectSeries says which of the series wanted are missing or differ.
func expectSeries(got, want map[string]float64) error {
	var wrong []string
	for series, w := range want {
		v, ok := got[series]
		switch {
		case !ok:
			wrong = append(wrong, series+" is missing")
		case v != w:
			wrong = append(wrong, fmt.Sprintf("%s = %v, want %v", series, v, w))
		}
	}
	sort.Strings(wrong)
	if len(wrong) > 0 {
		return fmt.Errorf("%s", strings.Join(wrong, "; "))
	}
	return nil
}
