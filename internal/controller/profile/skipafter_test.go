package profile_test

import (
	"fmt"
	"testing"
	"time"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/testutil"
	"github.com/pitstop-dev/pitstop/internal/testutil/clustertest"
)

// TestSkipAfterLetsTheNextNodePastAStuckOne: with a budget of one and
// skipAfter 3s, a node that stays in maintenance stops holding the budget
// 3 s after it entered: the next node takes its slot then, not before.
func TestSkipAfterLetsTheNextNodePastAStuckOne(t *testing.T) {
	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{})
	p := rollingProfile("skipper", "skipper", 1)
	p.Spec.Checks[1].MaxMaintenance.SkipAfter = &pitstopv1alpha1.Duration{Duration: 3 * time.Second}
	testutil.Create(t, env.Client, p)
	for _, name := range []string{"skipper-0", "skipper-1"} {
		testutil.Create(t, env.Client, testutil.Node(name, testutil.WithLabels(map[string]string{"pool": "skipper"})))
	}
	entered := map[string]time.Time{}
	watch := func() error {
		for _, n := range []string{"skipper-0", "skipper-1"} {
			if _, ok := entered[n]; !ok && testutil.GetNode(t, env.Client, n).Labels[pitstopv1alpha1.LabelState] == string(pitstopv1alpha1.StateInMaintenance) {
				entered[n] = time.Now()
			}
		}
		if len(entered) < 2 {
			return fmt.Errorf("in maintenance: %v", entered)
		}
		return nil
	}
	annotateNode(t, "skipper-0", "reboot-needed", `"true"`)
	awaitNodeState(t, "skipper-0", pitstopv1alpha1.StateInMaintenance)
	annotateNode(t, "skipper-1", "reboot-needed", `"true"`)
	// Neither leaves maintenance: the reboot never finishes.
	testutil.Eventually(t, 60*time.Second, 50*time.Millisecond, watch)
	first := testutil.GetNode(t, env.Client, "skipper-0")
	if first.Labels[pitstopv1alpha1.LabelState] != string(pitstopv1alpha1.StateInMaintenance) {
		t.Fatalf("the first node left maintenance: %v", first.Labels)
	}
	if gap := entered["skipper-1"].Sub(entered["skipper-0"]); gap < 2500*time.Millisecond {
		t.Fatalf("the second node entered %s after the first, before skipAfter (3s) passed", gap)
	}
}
