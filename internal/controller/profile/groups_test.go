package profile_test

import (
	"fmt"
	"testing"
	"time"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/testutil"
	"github.com/pitstop-dev/pitstop/internal/testutil/clustertest"
)

// TestABudgetPerZoneAndRack: a maxMaintenance of one node per zone and rack
// (groupBy and groupByLabels) lets in one node of each combination at once:
// of two nodes of one zone and rack one waits, while a node of the same
// zone in another rack goes in.
func TestABudgetPerZoneAndRack(t *testing.T) {
	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{})
	p := rollingProfile("racks", "racks", 1)
	p.Spec.Checks[1].MaxMaintenance.GroupBy = "zone"
	p.Spec.Checks[1].MaxMaintenance.GroupByLabels = []string{"rack"}
	testutil.Create(t, env.Client, p)
	for name, rack := range map[string]string{"racks-a1-0": "r1", "racks-a1-1": "r1", "racks-a2-0": "r2"} {
		testutil.Create(t, env.Client, testutil.Node(name, testutil.WithLabels(map[string]string{"pool": "racks", "zone": "a", "rack": rack})))
		annotateNode(t, name, "reboot-needed", `"true"`)
	}
	awaitNodeState(t, "racks-a2-0", pitstopv1alpha1.StateInMaintenance)
	count := func() (in int) {
		for _, n := range []string{"racks-a1-0", "racks-a1-1"} {
			if testutil.GetNode(t, env.Client, n).Labels[pitstopv1alpha1.LabelState] == string(pitstopv1alpha1.StateInMaintenance) {
				in++
			}
		}
		return in
	}
	testutil.Eventually(t, 30*time.Second, 50*time.Millisecond, func() error {
		if n := count(); n != 1 {
			return fmt.Errorf("%d nodes of zone a, rack r1 in maintenance, want 1", n)
		}
		return nil
	})
	time.Sleep(2 * time.Second)
	if n := count(); n != 1 {
		t.Errorf("%d nodes of zone a, rack r1 in maintenance with a budget of one per zone and rack", n)
	}
}
