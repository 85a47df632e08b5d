package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/pitstop-dev/pitstop/internal/dashboard"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// TestStandbyAnswersInfoFromTheLeadersResults: two replicas of `pitstop
// run`; the standby, which evaluates nothing, answers the
// maintenance-controller's GET /api/v1/info for a waiting node with the
// results the leader recorded on the node: the same state, the same
// transition not taken, each check passing or failing as the leader found
// it, its reason saying that the leader knows more.
func TestStandbyAnswersInfoFromTheLeadersResults(t *testing.T) {
	now := time.Now()
	profile := explainProfile("standby-info", "standby-info", now)
	testutil.Create(t, env.Client, profile)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), profile) })
	node := testutil.Node("standby-info-0", testutil.WithLabels(map[string]string{"pool": "standby-info"}),
		func(n *corev1.Node) { n.Annotations = map[string]string{"reboot-needed": "true"} })
	testutil.Create(t, env.Client, node)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), node) })

	argsA, _, _ := runArgs(t, "pitstop-standby-info")
	dashboardA := freeAddr(t)
	a := startPitstop(t, append(argsA, "--dashboard-addr="+dashboardA)...)
	awaitHolder(t, "pitstop-standby-info", func(h string) bool { return h != "" && h[0] != '<' }, "a holder")
	argsB, _, healthB := runArgs(t, "pitstop-standby-info")
	dashboardB := freeAddr(t)
	b := startPitstop(t, append(argsB, "--dashboard-addr="+dashboardB)...)
	awaitOK(t, "http://"+healthB+"/readyz")

	// waiting is the node's one profile once the leader has it waiting
	// for the window in maintenance-required.
	waiting := func(addr string) (dashboard.SeedProfileResult, error) {
		var infos []dashboard.SeedNodeInfo
		if err := json.Unmarshal([]byte(awaitOK(t, "http://"+addr+"/api/v1/info")), &infos); err != nil {
			return dashboard.SeedProfileResult{}, err
		}
		for _, info := range infos {
			if info.Node != node.Name {
				continue
			}
			if len(info.Profiles) != 1 || info.Profiles[0].State != "maintenance-required" || len(info.Profiles[0].Applied.Transitions) != 1 {
				return dashboard.SeedProfileResult{}, fmt.Errorf("%s answers %+v", addr, info)
			}
			if _, ok := info.Profiles[0].Applied.Transitions[0].Chain.Info["window"]; !ok {
				return dashboard.SeedProfileResult{}, fmt.Errorf("%s has no result for the window yet: %+v", addr, info)
			}
			return info.Profiles[0], nil
		}
		return dashboard.SeedProfileResult{}, fmt.Errorf("%s does not list %s", addr, node.Name)
	}
	var leader, standby dashboard.SeedProfileResult
	testutil.Eventually(t, 20*time.Second, 200*time.Millisecond, func() error {
		var err error
		if leader, err = waiting(dashboardA); err != nil {
			return err
		}
		standby, err = waiting(dashboardB)
		return err
	})
	lt, st := leader.Applied.Transitions[0], standby.Applied.Transitions[0]
	if st.Passed || st.Target != lt.Target || st.Chain.Expression != lt.Chain.Expression || standby.Applied.Next != leader.Applied.Next {
		t.Errorf("the standby answers %+v, the leader %+v", standby, leader)
	}
	for name, l := range lt.Chain.Info {
		s, ok := st.Chain.Info[name]
		if !ok || s.Passed != l.Passed || s.ID != l.ID {
			t.Errorf("check %s: the standby says %+v, the leader %+v", name, s, l)
		}
		if reason, _ := s.Info["reason"].(string); !strings.Contains(reason, "known to the replica that made it") {
			t.Errorf("check %s: the standby's reason %q does not say where the leader's reason is", name, reason)
		}
	}
	if w := lt.Chain.Info["window"]; w.Passed || lt.Chain.Info["budget"].Passed != true {
		t.Errorf("the leader's checks %+v, want the window closed and the budget free", lt.Chain.Info)
	}
	for _, p := range []*child{b, a} {
		if code := p.signal(syscall.SIGTERM, 15*time.Second); code != 0 {
			t.Fatalf("exit code %d after SIGTERM", code)
		}
	}
}
