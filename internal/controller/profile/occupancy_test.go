package profile_test

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/engine"
	"github.com/pitstop-dev/pitstop/internal/maintenance"
	"github.com/pitstop-dev/pitstop/internal/testutil"
	"github.com/pitstop-dev/pitstop/internal/testutil/clustertest"
)

// TestABudgetCountsEveryMaintenanceInItsScope: a maxMaintenance budget
// shared by every profile counts every node pitstop has under maintenance
// in its scope, whatever let it in: a node another budget let in (with a
// different max, or grouped by another label) whose drain is under way,
// and a node a user's NodeMaintenance drains. Two managers run at once.
func TestABudgetCountsEveryMaintenanceInItsScope(t *testing.T) {
	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{})
	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{})
	testutil.Kubelet(t, env.Clientset)
	node := func(name string, labels map[string]string) {
		t.Helper()
		testutil.Create(t, env.Client, testutil.Node(name, testutil.WithLabels(labels)))
	}
	// blockDrain puts pods on node whose PodDisruptionBudget allows none
	// to go: the node's drain waits.
	blockDrain := func(ns, node string) {
		t.Helper()
		testutil.ManagedPods(t, env.Client, testutil.Namespace(t, env.Client, ns), node, "web", 2)
		testutil.PDB(t, env.Client, ns, "web", 2, 0)
	}

	t.Run("another max", func(t *testing.T) {
		// big lets two nodes in, small one; both are shared by every
		// profile, grouped by occ=max. big-0 takes the first slot and
		// leaves; big-1, let in second, drains. The first slot is free,
		// but small's node must count big-1.
		testutil.Create(t, env.Client, sharedBudgetProfile("occ-big", "occ-big", 2, "occ"), sharedBudgetProfile("occ-small", "occ-small", 1, "occ"))
		node("occ-big-0", map[string]string{"pool": "occ-big", "occ": "max"})
		node("occ-big-1", map[string]string{"pool": "occ-big", "occ": "max"})
		node("occ-small-0", map[string]string{"pool": "occ-small", "occ": "max"})
		blockDrain("occ-big-1", "occ-big-1")
		annotateNode(t, "occ-big-0", "reboot-needed", `"true"`)
		awaitNodeState(t, "occ-big-0", pitstopv1alpha1.StateInMaintenance)
		annotateNode(t, "occ-big-1", "reboot-needed", `"true"`)
		awaitDrainBlocked(t, maintenance.ForProfile("occ-big-1"))
		annotateNode(t, "occ-big-0", "reboot-needed", "null")
		awaitNodeState(t, "occ-big-0", pitstopv1alpha1.StateOperational)

		annotateNode(t, "occ-small-0", "reboot-needed", `"true"`)
		awaitNodeState(t, "occ-small-0", pitstopv1alpha1.StateMaintenanceRequired)
		staysOut(t, "occ-small-0", "occ-big-1")
	})

	t.Run("another groupBy", func(t *testing.T) {
		// zoned allows one node per zone, racked one per rack. A racked
		// node of zone z1 drains: the zoned node of z1 waits for it.
		testutil.Create(t, env.Client, sharedBudgetProfile("occ-zoned", "occ-zoned", 1, "occ-zone"), sharedBudgetProfile("occ-racked", "occ-racked", 1, "occ-rack"))
		node("occ-racked-0", map[string]string{"pool": "occ-racked", "occ-zone": "z1", "occ-rack": "r1"})
		node("occ-zoned-0", map[string]string{"pool": "occ-zoned", "occ-zone": "z1", "occ-rack": "r2"})
		blockDrain("occ-racked-0", "occ-racked-0")
		annotateNode(t, "occ-racked-0", "reboot-needed", `"true"`)
		awaitDrainBlocked(t, maintenance.ForProfile("occ-racked-0"))

		annotateNode(t, "occ-zoned-0", "reboot-needed", `"true"`)
		awaitNodeState(t, "occ-zoned-0", pitstopv1alpha1.StateMaintenanceRequired)
		staysOut(t, "occ-zoned-0", "occ-racked-0")
	})

	t.Run("a user's NodeMaintenance", func(t *testing.T) {
		testutil.Create(t, env.Client, sharedBudgetProfile("occ-user", "occ-user", 1, "occ"))
		node("occ-user-0", map[string]string{"pool": "occ-user", "occ": "user"})
		node("occ-by-hand", map[string]string{"occ": "user"})
		nm := &pitstopv1alpha1.NodeMaintenance{
			ObjectMeta: metav1.ObjectMeta{Name: "occ-by-hand"},
			Spec:       pitstopv1alpha1.NodeMaintenanceSpec{NodeName: "occ-by-hand", Reason: "replacing a disk"},
		}
		testutil.Create(t, env.Client, nm)

		annotateNode(t, "occ-user-0", "reboot-needed", `"true"`)
		awaitNodeState(t, "occ-user-0", pitstopv1alpha1.StateMaintenanceRequired)
		staysOut(t, "occ-user-0", "occ-by-hand")

		// Once the user's maintenance ends, the node goes in: the end
		// wakes it, rather than its recheck (every 30 s).
		ended := time.Now()
		if err := env.Client.Delete(t.Context(), nm); err != nil {
			t.Fatal(err)
		}
		awaitNodeState(t, "occ-user-0", pitstopv1alpha1.StateInMaintenance)
		if took := time.Since(ended); took > 10*time.Second {
			t.Errorf("occ-user-0 went in %s after the user's maintenance ended: the end did not wake it", took.Round(time.Second))
		}
	})
}

// staysOut checks that node stays maintenance-required for a while, its
// budget check failing, while other is under maintenance.
func staysOut(t *testing.T, node, other string) {
	t.Helper()
	for end := time.Now().Add(4 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		n := testutil.GetNode(t, env.Client, node)
		if n.Labels[pitstopv1alpha1.LabelState] != string(pitstopv1alpha1.StateMaintenanceRequired) || n.Spec.Unschedulable {
			t.Fatalf("%s went in while %s was under maintenance in its budget's scope: state %q, unschedulable %v",
				node, other, n.Labels[pitstopv1alpha1.LabelState], n.Spec.Unschedulable)
		}
	}
	testutil.Eventually(t, 10*time.Second, 200*time.Millisecond, func() error {
		rec, err := engine.ReadRecord(testutil.GetNode(t, env.Client, node))
		if err != nil {
			return err
		}
		for _, pr := range rec.Profiles {
			if pr.Checks["budget"] {
				return fmt.Errorf("%s's budget check passed", node)
			}
		}
		return nil
	})
}

// sharedBudgetProfile drains the annotated nodes of pool, letting in at
// most max at once per value of the groupBy label, counted over every
// profile.
func sharedBudgetProfile(name, pool string, max int32, groupBy string) *pitstopv1alpha1.MaintenanceProfile {
	p := restoringProfile(pool)
	p.Name = name
	p.Spec.Checks[1].MaxMaintenance = &pitstopv1alpha1.MaxMaintenanceCheck{Max: max, GroupBy: groupBy}
	return p
}
