package check_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/budget"
	"github.com/pitstop-dev/pitstop/internal/plugin/check"
)

// TestChecksSayWhatTheyAre: each plugin says what its answer reads, and the
// budget checks say which slots they admit through, so that the engine
// never names a plugin to know it.
func TestChecksSayWhatTheyAre(t *testing.T) {
	kv := &pitstopv1alpha1.KeyValueCheck{Key: "k"}
	for _, tc := range []struct {
		inst  pitstopv1alpha1.CheckInstance
		reads check.Reads
	}{
		{pitstopv1alpha1.CheckInstance{HasLabel: kv}, check.ReadsNode},
		{pitstopv1alpha1.CheckInstance{HasAnnotation: kv}, check.ReadsNode},
		{pitstopv1alpha1.CheckInstance{Wait: &pitstopv1alpha1.WaitCheck{}}, check.ReadsNode},
		{pitstopv1alpha1.CheckInstance{AnyLabel: kv}, check.ReadsFleet},
		{pitstopv1alpha1.CheckInstance{Affinity: &pitstopv1alpha1.AffinityCheck{}}, check.ReadsFleet},
		{pitstopv1alpha1.CheckInstance{NodeCount: &pitstopv1alpha1.NodeCountCheck{}}, check.ReadsFleet},
		{pitstopv1alpha1.CheckInstance{MaxMaintenance: &pitstopv1alpha1.MaxMaintenanceCheck{}}, check.ReadsFleet},
		{pitstopv1alpha1.CheckInstance{TimeWindow: &pitstopv1alpha1.TimeWindowCheck{}}, check.ReadsClock},
		{pitstopv1alpha1.CheckInstance{Freeze: &pitstopv1alpha1.FreezeCheck{}}, check.ReadsClock},
	} {
		if got := check.ReadsOf(tc.inst); got != tc.reads {
			t.Errorf("%s reads %d, want %d", check.PluginName(tc.inst), got, tc.reads)
		}
	}

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"zone": "a"}}}
	limit := &pitstopv1alpha1.MaxMaintenanceCheck{Max: 2, GroupBy: "zone"}
	for name, tc := range map[string]struct {
		inst pitstopv1alpha1.CheckInstance
		want check.SlotBudget
		ok   bool
	}{
		"a maxMaintenance check shared by every profile, per zone": {
			pitstopv1alpha1.CheckInstance{Name: "budget", MaxMaintenance: limit},
			check.SlotBudget{Key: budget.Key{Name: check.AllProfilesBudget, Group: "zone=a"}, Size: 2, MaxMaintenance: limit}, true,
		},
		"a stagger: its slots last its duration": {
			pitstopv1alpha1.CheckInstance{Name: "pace", Stagger: &pitstopv1alpha1.StaggerCheck{Duration: pitstopv1alpha1.Duration{Duration: time.Minute}}},
			check.SlotBudget{Key: budget.Key{Name: "p-stagger-pace"}, Size: 1, Lasts: time.Minute}, true,
		},
		"a check that is no budget": {pitstopv1alpha1.CheckInstance{Name: "wanted", HasLabel: kv}, check.SlotBudget{}, false},
	} {
		got, ok := check.BudgetOf("p", tc.inst, node)
		if ok != tc.ok || got != tc.want {
			t.Errorf("%s: BudgetOf = %+v, %v; want %+v, %v", name, got, ok, tc.want, tc.ok)
		}
	}
}
