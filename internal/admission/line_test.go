package admission

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/engine"
)

// TestOnlyANodeWaitingForNothingButABudgetIsInLine: a node stands in line
// for the budgets whose checks alone fail in a transition into
// maintenance; a node that also waits for its window, one already in
// maintenance, and a budget check outside a transition into maintenance
// hold no place.
func TestOnlyANodeWaitingForNothingButABudgetIsInLine(t *testing.T) {
	p := &pitstopv1alpha1.MaintenanceProfile{
		ObjectMeta: metav1.ObjectMeta{Name: "line"},
		Spec: pitstopv1alpha1.MaintenanceProfileSpec{
			Checks: []pitstopv1alpha1.CheckInstance{
				{Name: "wanted", HasAnnotation: &pitstopv1alpha1.KeyValueCheck{Key: "reboot-needed"}},
				{Name: "window", TimeWindow: &pitstopv1alpha1.TimeWindowCheck{Start: "22:00", End: "04:00"}},
				{Name: "budget", MaxMaintenance: &pitstopv1alpha1.MaxMaintenanceCheck{Max: 2, ProfileScoped: true, GroupBy: "zone"}},
				{Name: "fleet", MaxMaintenance: &pitstopv1alpha1.MaxMaintenanceCheck{Max: 10}},
			},
			States: pitstopv1alpha1.StatesSpec{
				Operational: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "wanted && fleet", Next: pitstopv1alpha1.StateMaintenanceRequired}}},
				MaintenanceRequired: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{
					{Check: "window && budget && fleet", Next: pitstopv1alpha1.StateInMaintenance},
					{Check: "!wanted", Next: pitstopv1alpha1.StateOperational},
				}},
				InMaintenance: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "!wanted && budget", Next: pitstopv1alpha1.StateOperational}}},
			},
		},
	}
	ep, err := engine.Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	c := Profile{Spec: p, Transitions: ep.Transitions}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"zone": "a"}}}
	const zone, fleet = "budget/line/zone=a", "budget/all-profiles/"
	for _, tc := range []struct {
		name   string
		state  pitstopv1alpha1.MaintenanceState
		passed map[string]bool
		want   []string
	}{
		{"the zone's budget is full", pitstopv1alpha1.StateMaintenanceRequired, map[string]bool{"window": true, "budget": false, "fleet": true, "wanted": true}, []string{zone}},
		{"both budgets are full", pitstopv1alpha1.StateMaintenanceRequired, map[string]bool{"window": true, "budget": false, "fleet": false, "wanted": true}, []string{zone, fleet}},
		{"the window is shut too", pitstopv1alpha1.StateMaintenanceRequired, map[string]bool{"window": false, "budget": false, "fleet": true, "wanted": true}, nil},
		{"nothing fails", pitstopv1alpha1.StateMaintenanceRequired, map[string]bool{"window": true, "budget": true, "fleet": true, "wanted": true}, nil},
		{"into maintenance-required only", pitstopv1alpha1.StateOperational, map[string]bool{"wanted": true, "fleet": false}, nil},
		{"in maintenance", pitstopv1alpha1.StateInMaintenance, map[string]bool{"wanted": false, "budget": false}, nil},
	} {
		if got := LineKeys(c, node, tc.state, tc.passed); !slices.Equal(got, tc.want) {
			t.Errorf("%s: in line for %v, want %v", tc.name, got, tc.want)
		}
	}
}
