package profile_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/engine"
	"github.com/pitstop-dev/pitstop/internal/explain"
	"github.com/pitstop-dev/pitstop/internal/fleet"
	"github.com/pitstop-dev/pitstop/internal/plugin/check"
	"github.com/pitstop-dev/pitstop/internal/testutil"
	"github.com/pitstop-dev/pitstop/internal/testutil/clustertest"
)

// TestEnterTriggersRunOnceTheNodeHasEnteredTheState: with the drain among
// in-maintenance's enter triggers, the node is in-maintenance (its label
// and record say so) while the drain runs, after the transition's own
// trigger; its transitions wait for the drain even when their check
// passes, across a restart of the manager; `pitstop explain` says what it
// waits for. Once drained it moves on, and operational's enter triggers
// restore it.
func TestEnterTriggersRunOnceTheNodeHasEnteredTheState(t *testing.T) {
	const pool, node = "enterer", "enterer-0"
	first := clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{})
	testutil.Kubelet(t, env.Clientset)
	p := rollingProfile(pool, pool, 1)
	p.Spec.Triggers = append(p.Spec.Triggers,
		pitstopv1alpha1.TriggerInstance{Name: "drain", Drain: &pitstopv1alpha1.DrainTrigger{}},
		pitstopv1alpha1.TriggerInstance{Name: "restore", Restore: &pitstopv1alpha1.RestoreTrigger{}})
	p.Spec.States.InMaintenance.Enter = []string{"drain"}
	p.Spec.States.Operational.Enter = []string{"restore"}
	testutil.Create(t, env.Client, p)
	ns := testutil.Namespace(t, env.Client, pool)
	testutil.Create(t, env.Client, testutil.Node(node, testutil.WithLabels(map[string]string{"pool": pool})))
	testutil.ManagedPods(t, env.Client, ns, node, "web", 2)
	pdb := testutil.PDB(t, env.Client, ns, "web", 2, 0) // no eviction allowed

	record := func() engine.ProfileRecord {
		t.Helper()
		r, err := engine.ReadRecord(testutil.GetNode(t, env.Client, node))
		if err != nil {
			t.Fatal(err)
		}
		return r.Profiles[pool]
	}
	annotateNode(t, node, "reboot-needed", `"true"`)
	awaitNodeState(t, node, pitstopv1alpha1.StateInMaintenance)
	n := testutil.GetNode(t, env.Client, node)
	if n.Labels["maintained-by"] != pool {
		t.Errorf("in maintenance without the transition's own trigger run: labels %v", n.Labels)
	}
	if pr := record(); !pr.Entering {
		t.Errorf("record %+v: not entering", pr)
	}
	// The drain starts after the move, and cannot end: the budget allows
	// no eviction.
	testutil.Eventually(t, 10*time.Second, 50*time.Millisecond, func() error {
		return env.Client.Get(t.Context(), client.ObjectKey{Name: "profile-" + node}, &pitstopv1alpha1.NodeMaintenance{})
	})
	if left := testutil.PodsOn(t, env.Client, ns, node); len(left) != 2 {
		t.Errorf("pods left on the node: %v, want both (the budget allows no eviction)", left)
	}

	// The way out passes now; it waits for the enter triggers.
	annotateNode(t, node, "reboot-needed", "null")
	report, err := explain.Node(t.Context(), env.Client, env.Client, fleet.NewEvaluator(env.Client, check.Deps{}), node, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if err := report.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "entering in-maintenance: ") || strings.Contains(text.String(), "→ operational") {
		t.Errorf("explain does not say the node is entering in-maintenance, or shows its transitions:\n%s", text.String())
	}

	// A manager started anew goes on with the drain, not the transition.
	first.Stop()
	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{})
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if pr := record(); pr.Current != pitstopv1alpha1.StateInMaintenance || !pr.Entering {
			t.Fatalf("record %+v: left in-maintenance, or stopped entering, before the drain was done", pr)
		}
	}

	testutil.SetAllowed(t, env.Client, pdb, 2, 2)
	awaitNodeState(t, node, pitstopv1alpha1.StateOperational)
	testutil.Eventually(t, 30*time.Second, 50*time.Millisecond, func() error {
		n := testutil.GetNode(t, env.Client, node)
		pr := record()
		switch {
		case n.Spec.Unschedulable:
			return fmt.Errorf("operational and still cordoned")
		case pr.Entering:
			return fmt.Errorf("record %+v: still entering operational", pr)
		}
		if err := env.Client.Get(t.Context(), client.ObjectKey{Name: "profile-" + node}, &pitstopv1alpha1.NodeMaintenance{}); err == nil {
			return fmt.Errorf("the NodeMaintenance outlived the maintenance")
		}
		return nil
	})
	if left := testutil.PodsOn(t, env.Client, ns, node); len(left) != 0 {
		t.Errorf("pods left after the drain: %v", left)
	}
}

// TestANodeLeavingMaintenanceHoldsItsSlotUntilItsEnterTriggersAreDone:
// budget 1; the first node leaves in-maintenance for operational, whose
// enter triggers drain it (a budget allows no eviction) and restore it.
// While they run the first node is operational but not back, and keeps the
// budget's slot: the second node, maintenance-required meanwhile, waits
// for it, and goes in once the first node's enter triggers are done.
func TestANodeLeavingMaintenanceHoldsItsSlotUntilItsEnterTriggersAreDone(t *testing.T) {
	const pool = "leaver"
	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{})
	testutil.Kubelet(t, env.Clientset)
	p := rollingProfile(pool, pool, 1)
	p.Spec.Triggers = append(p.Spec.Triggers,
		pitstopv1alpha1.TriggerInstance{Name: "drain", Drain: &pitstopv1alpha1.DrainTrigger{}},
		pitstopv1alpha1.TriggerInstance{Name: "restore", Restore: &pitstopv1alpha1.RestoreTrigger{}})
	p.Spec.States.Operational.Enter = []string{"drain", "restore"}
	testutil.Create(t, env.Client, p)
	ns := testutil.Namespace(t, env.Client, pool)
	first, second := pool+"-0", pool+"-1"
	for _, n := range []string{first, second} {
		testutil.Create(t, env.Client, testutil.Node(n, testutil.WithLabels(map[string]string{"pool": pool})))
	}
	testutil.ManagedPods(t, env.Client, ns, first, "web", 1)
	pdb := testutil.PDB(t, env.Client, ns, "web", 1, 0)

	annotateNode(t, first, "reboot-needed", `"true"`)
	awaitNodeState(t, first, pitstopv1alpha1.StateInMaintenance)
	annotateNode(t, second, "reboot-needed", `"true"`)
	awaitNodeState(t, second, pitstopv1alpha1.StateMaintenanceRequired)
	annotateNode(t, first, "reboot-needed", "null")
	awaitNodeState(t, first, pitstopv1alpha1.StateOperational)

	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		r, err := engine.ReadRecord(testutil.GetNode(t, env.Client, first))
		if err != nil {
			t.Fatal(err)
		}
		if !r.Profiles[pool].Leaving() {
			t.Fatalf("record %+v: the first node's enter triggers are done, with the eviction refused", r.Profiles[pool])
		}
		if got := testutil.GetNode(t, env.Client, second).Labels[pitstopv1alpha1.LabelState]; got != string(pitstopv1alpha1.StateMaintenanceRequired) {
			t.Fatalf("the second node is %s while the first still holds the slot", got)
		}
	}

	testutil.SetAllowed(t, env.Client, pdb, 1, 1)
	awaitNodeState(t, second, pitstopv1alpha1.StateInMaintenance)
	r, err := engine.ReadRecord(testutil.GetNode(t, env.Client, first))
	if err != nil {
		t.Fatal(err)
	}
	if pr := r.Profiles[pool]; pr.Entering {
		t.Errorf("the second node went in while the first's enter triggers ran: %+v", pr)
	}
}
