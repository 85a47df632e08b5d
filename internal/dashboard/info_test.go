package dashboard_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/pitstop-dev/pitstop/internal/dashboard"
	"github.com/pitstop-dev/pitstop/internal/manager"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// infoLabels are the labels TestAPI's dashboard shows in /api/v1/info.
func infoLabels(o *manager.Options) { o.DashboardLabels = []string{"zone", "absent"} }

// checkSeedInfo: GET /api/v1/info answers as the maintenance-controller's
// does: one entry per node with its profiles, each with its state and last
// evaluation (the state it goes to next, each transition's check chain with
// every check's plugin, result and reason), and the labels
// --dashboard-labels names (infoLabels). TestAPI runs it on its fleet.
func checkSeedInfo(t *testing.T, base string) {
	var a1 dashboard.SeedNodeInfo
	testutil.Eventually(t, 10*time.Second, 100*time.Millisecond, func() error {
		var infos []dashboard.SeedNodeInfo
		getJSON(t, base+"/api/v1/info", &infos)
		for _, info := range infos {
			if info.Node == "zones-a1" {
				a1 = info
				if len(info.Profiles) == 1 && info.Profiles[0].State == "maintenance-required" && len(info.Profiles[0].Applied.Transitions) == 1 {
					return nil
				}
			}
		}
		return fmt.Errorf("zones-a1 is %+v", a1)
	})
	if fmt.Sprint(a1.Labels) != "map[zone:a]" {
		t.Errorf("labels %v, want zone only (absent is not on the node, pool is not asked for)", a1.Labels)
	}
	p := a1.Profiles[0]
	tr := p.Applied.Transitions[0]
	if p.Name != "zones" || p.Applied.Next != "maintenance-required" || tr.Passed || tr.Target != "in-maintenance" || tr.Chain.Expression != "(approved || window) && budget && freeze" {
		t.Errorf("profile %+v, want zones staying in maintenance-required, its transition to in-maintenance not passing", p)
	}
	budget, ok := tr.Chain.Info["budget"]
	if !ok || budget.ID != "maxMaintenance" || !budget.Passed || budget.Info["reason"] == nil {
		t.Errorf("budget check %+v, want maxMaintenance passing with its reason", budget)
	}
	if approved := tr.Chain.Info["approved"]; approved.ID != "hasLabel" || approved.Passed {
		t.Errorf("approved check %+v, want hasLabel failing", approved)
	}
	if a1.Updated.IsZero() {
		t.Error("updated is not set")
	}
}
