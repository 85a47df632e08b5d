package profile_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/engine"
	"github.com/pitstop-dev/pitstop/internal/maintenance"
	"github.com/pitstop-dev/pitstop/internal/nodeview"
	"github.com/pitstop-dev/pitstop/internal/testutil"
	"github.com/pitstop-dev/pitstop/internal/testutil/clustertest"
)

// TestANodeThatLeavesItsProfileIsRestored: a node that its profile stops
// selecting while the profile has it out of operational — drained and in
// maintenance, or with its drain under way and blocked by a
// PodDisruptionBudget — leaves the profile: its NodeMaintenance is deleted,
// the node is uncordoned, its budget slot is given back, the profile's
// entry leaves the node's record, and an Event says so. Whatever takes it
// out: its label removed, the profile's selector edited, or the profile
// deleted (which then goes once its node has left).
func TestANodeThatLeavesItsProfileIsRestored(t *testing.T) {
	ways := []struct {
		name  string
		leave func(t *testing.T, pool string)
	}{
		{"label", func(t *testing.T, pool string) {
			patch := []byte(`{"metadata":{"labels":{"pool":null}}}`)
			if _, err := env.Clientset.CoreV1().Nodes().Patch(t.Context(), pool+"-0", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		}},
		{"selector", func(t *testing.T, pool string) {
			testutil.Eventually(t, 5*time.Second, 50*time.Millisecond, func() error {
				p := &pitstopv1alpha1.MaintenanceProfile{}
				if err := env.Client.Get(t.Context(), client.ObjectKey{Name: pool}, p); err != nil {
					return err
				}
				p.Spec.NodeSelector.MatchLabels["pool"] = "elsewhere"
				return env.Client.Update(t.Context(), p)
			})
		}},
		{"deleted", func(t *testing.T, pool string) {
			p := &pitstopv1alpha1.MaintenanceProfile{ObjectMeta: metav1.ObjectMeta{Name: pool}}
			if err := env.Client.Delete(t.Context(), p); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, way := range ways {
		for _, phase := range []string{"in-maintenance", "draining"} {
			t.Run(way.name+"/"+phase, func(t *testing.T) {
				pool := "leave-" + way.name + "-" + strings.TrimSuffix(phase, "-maintenance")
				ns := startRestoring(t, pool, 2)
				node := pool + "-0"
				if phase == "draining" {
					testutil.PDB(t, env.Client, ns, "web", 2, 0)
				}
				annotateNode(t, node, "reboot-needed", `"true"`)
				if phase == "draining" {
					awaitDrainBlocked(t, maintenance.ForProfile(node))
					awaitNodeState(t, node, pitstopv1alpha1.StateMaintenanceRequired)
				} else {
					awaitNodeState(t, node, pitstopv1alpha1.StateInMaintenance)
				}
				if held := slotsHeldBy(t, node); held != 1 {
					t.Fatalf("%s holds %d budget slots before it leaves, want 1", node, held)
				}

				way.leave(t, pool)
				awaitLeft(t, pool, node)
				if way.name == "deleted" {
					awaitProfileGone(t, pool)
				}
			})
		}
	}
}

// TestADeletedProfileReleasesItsNodesAcrossARestart: a profile deleted
// while the manager is down, with a node in maintenance for it, is held
// by its finalizer; the next manager restores the node and lets the
// profile go.
func TestADeletedProfileReleasesItsNodesAcrossARestart(t *testing.T) {
	first := clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{})
	testutil.Kubelet(t, env.Clientset)
	p := restoringProfile("leave-restart")
	testutil.Create(t, env.Client, p)
	testutil.Create(t, env.Client, testutil.Node("leave-restart-0", testutil.WithLabels(map[string]string{"pool": "leave-restart"})))
	annotateNode(t, "leave-restart-0", "reboot-needed", `"true"`)
	awaitNodeState(t, "leave-restart-0", pitstopv1alpha1.StateInMaintenance)
	first.Stop()

	if err := env.Client.Delete(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{})
	awaitLeft(t, "leave-restart", "leave-restart-0")
	awaitProfileGone(t, p.Name)
}

// awaitProfileGone waits for a deleted profile's finalizer to let it go.
func awaitProfileGone(t *testing.T, name string) {
	t.Helper()
	testutil.Eventually(t, 15*time.Second, 100*time.Millisecond, func() error {
		p := &pitstopv1alpha1.MaintenanceProfile{}
		if err := env.Client.Get(t.Context(), client.ObjectKey{Name: name}, p); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the deleted profile is still there once its nodes left: %v, finalizers %v", err, p.Finalizers)
		}
		return nil
	})
}

// TestAProfileThatDoesNotCompileAtStartRunsItsLastValidGeneration: a
// profile edited into a generation that does not compile while the
// manager was down keeps running its last valid generation, which its
// status keeps: the node in maintenance finishes it. Without a valid
// generation (the status lost it), the node stays as it is and the
// dashboard, `pitstop explain` and an Event say why.
func TestAProfileThatDoesNotCompileAtStartRunsItsLastValidGeneration(t *testing.T) {
	first := clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{})
	testutil.Kubelet(t, env.Clientset)
	p := restoringProfile("broken-later")
	testutil.Create(t, env.Client, p)
	testutil.Create(t, env.Client, testutil.Node("broken-later-0", testutil.WithLabels(map[string]string{"pool": "broken-later"})))
	annotateNode(t, "broken-later-0", "reboot-needed", `"true"`)
	awaitNodeState(t, "broken-later-0", pitstopv1alpha1.StateInMaintenance)
	valid := awaitProfileCondition(t, p.Name, "Valid", metav1.ConditionTrue)
	if valid.Status.LastValid == nil || valid.Status.LastValid.Generation != valid.Generation {
		t.Fatalf("status.lastValid = %+v, want generation %d", valid.Status.LastValid, valid.Generation)
	}
	first.Stop()

	breakProfile(t, p.Name)
	second := clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{})
	annotateNode(t, "broken-later-0", "reboot-needed", "null")
	awaitNodeState(t, "broken-later-0", pitstopv1alpha1.StateOperational)
	if n := testutil.GetNode(t, env.Client, "broken-later-0"); n.Spec.Unschedulable {
		t.Error("operational again but still cordoned")
	}

	// Again, with the last valid generation lost.
	annotateNode(t, "broken-later-0", "reboot-needed", `"true"`)
	second.Stop()
	fixProfile(t, p.Name)
	third := clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{})
	awaitNodeState(t, "broken-later-0", pitstopv1alpha1.StateInMaintenance)
	third.Stop()
	breakProfile(t, p.Name)
	lost := &pitstopv1alpha1.MaintenanceProfile{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: p.Name}, lost); err != nil {
		t.Fatal(err)
	}
	before := lost.DeepCopy()
	lost.Status.LastValid = nil
	if err := env.Client.Status().Patch(t.Context(), lost, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{})
	annotateNode(t, "broken-later-0", "reboot-needed", "null")
	awaitEvent(t, "broken-later-0", "ProfileNotRunnable", "has no generation that compiles")
	n := testutil.GetNode(t, env.Client, "broken-later-0")
	if n.Labels[pitstopv1alpha1.LabelState] != string(pitstopv1alpha1.StateInMaintenance) || !n.Spec.Unschedulable {
		t.Errorf("a node of a profile that cannot run moved: state %q, unschedulable %v", n.Labels[pitstopv1alpha1.LabelState], n.Spec.Unschedulable)
	}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: maintenance.ForProfile("broken-later-0")}, &pitstopv1alpha1.NodeMaintenance{}); err != nil {
		t.Errorf("the drain of a node whose profile cannot run was undone: %v", err)
	}
}

// TestAnOrphanedDrainIsDeleted: a NodeMaintenance labelled as a profile's
// whose profile is gone, or no longer selects its node, while the node's
// record does not hold it (left by an older version) is deleted, which
// restores the node.
func TestAnOrphanedDrainIsDeleted(t *testing.T) {
	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{})
	testutil.Create(t, env.Client, restoringProfile("orphans"))
	testutil.Create(t, env.Client,
		testutil.Node("orphan-gone", testutil.WithLabels(map[string]string{"pool": "orphans"})),
		testutil.Node("orphan-unselected"),
		testutil.Node("orphan-kept", testutil.WithLabels(map[string]string{"pool": "orphans"})))
	orphan := func(node, profile string) *pitstopv1alpha1.NodeMaintenance {
		return &pitstopv1alpha1.NodeMaintenance{
			ObjectMeta: metav1.ObjectMeta{Name: maintenance.ForProfile(node), Labels: map[string]string{pitstopv1alpha1.LabelProfile: profile}},
			Spec:       pitstopv1alpha1.NodeMaintenanceSpec{NodeName: node, Reason: "maintenance profile " + profile},
		}
	}
	testutil.Create(t, env.Client, orphan("orphan-gone", "no-such-profile"), orphan("orphan-unselected", "orphans"), orphan("orphan-kept", "orphans"))
	testutil.Eventually(t, 60*time.Second, 250*time.Millisecond, func() error {
		for _, node := range []string{"orphan-gone", "orphan-unselected"} {
			if err := env.Client.Get(t.Context(), client.ObjectKey{Name: maintenance.ForProfile(node)}, &pitstopv1alpha1.NodeMaintenance{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("NodeMaintenance of %s: %v, want it deleted", node, err)
			}
			if n := testutil.GetNode(t, env.Client, node); n.Spec.Unschedulable {
				return fmt.Errorf("%s still cordoned", node)
			}
		}
		return nil
	})
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: maintenance.ForProfile("orphan-kept")}, &pitstopv1alpha1.NodeMaintenance{}); err != nil {
		t.Errorf("the NodeMaintenance of a node its profile selects was deleted: %v", err)
	}
	awaitEvent(t, maintenance.ForProfile("orphan-gone"), "OrphanDeleted", "profile no-such-profile is gone")
}

// restoringProfile is rollingProfile with a drain on the way in and a
// restore on the way out.
func restoringProfile(pool string) *pitstopv1alpha1.MaintenanceProfile {
	p := rollingProfile(pool, pool, 1)
	p.Spec.Triggers = append(p.Spec.Triggers,
		pitstopv1alpha1.TriggerInstance{Name: "drain", Drain: &pitstopv1alpha1.DrainTrigger{}},
		pitstopv1alpha1.TriggerInstance{Name: "restore", Restore: &pitstopv1alpha1.RestoreTrigger{}})
	p.Spec.States.MaintenanceRequired.Transitions[0].Triggers = []string{"drain"}
	p.Spec.States.InMaintenance.Transitions[0].Triggers = []string{"restore"}
	return p
}

// breakProfile makes the profile's current generation refer to a check
// that does not exist (the webhook is not serving).
func breakProfile(t *testing.T, name string) { setOperationalCheck(t, name, "reboot_neded") }

func fixProfile(t *testing.T, name string) { setOperationalCheck(t, name, "reboot_needed") }

func setOperationalCheck(t *testing.T, name, check string) {
	t.Helper()
	testutil.Eventually(t, 5*time.Second, 50*time.Millisecond, func() error {
		p := &pitstopv1alpha1.MaintenanceProfile{}
		if err := env.Client.Get(t.Context(), client.ObjectKey{Name: name}, p); err != nil {
			return err
		}
		p.Spec.States.Operational.Transitions[0].Check = check
		return env.Client.Update(t.Context(), p)
	})
}

func annotateNode(t *testing.T, node, key, value string) {
	t.Helper()
	patch := []byte(`{"metadata":{"annotations":{"` + key + `":` + value + `}}}`)
	if _, err := env.Clientset.CoreV1().Nodes().Patch(t.Context(), node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func awaitNodeState(t *testing.T, node string, want pitstopv1alpha1.MaintenanceState) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, 50*time.Millisecond, func() error {
		if got := testutil.GetNode(t, env.Client, node).Labels[pitstopv1alpha1.LabelState]; got != string(want) {
			return fmt.Errorf("%s is %q, want %q", node, got, want)
		}
		return nil
	})
}

func awaitDrainBlocked(t *testing.T, name string) {
	t.Helper()
	testutil.Eventually(t, 20*time.Second, 100*time.Millisecond, func() error {
		nm := &pitstopv1alpha1.NodeMaintenance{}
		if err := env.Client.Get(t.Context(), client.ObjectKey{Name: name}, nm); err != nil {
			node := testutil.GetNode(t, env.Client, strings.TrimPrefix(name, "profile-"))
			return fmt.Errorf("%v; the node's record: %s; slots: %s", err, node.Annotations[pitstopv1alpha1.AnnotationMaintenanceData], slotHolders(t))
		}
		if !meta.IsStatusConditionFalse(nm.Status.Conditions, pitstopv1alpha1.ConditionDrained) {
			return fmt.Errorf("drain not blocked yet: %+v", nm.Status.Conditions)
		}
		return nil
	})
}

// awaitLeft waits until node has left profile: restored, its drain gone,
// no budget slot held, the profile out of its record, and the Event that
// says so written.
func awaitLeft(t *testing.T, profile, node string) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		n := testutil.GetNode(t, env.Client, node)
		if n.Spec.Unschedulable || nodeview.HasTaint(n, pitstopv1alpha1.TaintDrain) {
			return fmt.Errorf("%s not restored: unschedulable %v, taints %v", node, n.Spec.Unschedulable, n.Spec.Taints)
		}
		record, err := engine.ReadRecord(n)
		if err != nil {
			return err
		}
		if pr, ok := record.Profiles[profile]; ok {
			return fmt.Errorf("%s still has profile %s in its record: %+v", node, profile, pr)
		}
		if err := env.Client.Get(t.Context(), client.ObjectKey{Name: maintenance.ForProfile(node)}, &pitstopv1alpha1.NodeMaintenance{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the NodeMaintenance of %s is still there: %v", node, err)
		}
		if held := slotsHeldBy(t, node); held != 0 {
			return fmt.Errorf("%s still holds %d budget slots", node, held)
		}
		return nil
	})
	awaitEvent(t, node, "LeftProfile", "left profile "+profile)
}

// slotHolders lists every budget slot and its holder, for failures.
func slotHolders(t *testing.T) string {
	t.Helper()
	leases := &coordinationv1.LeaseList{}
	if err := env.Client.List(t.Context(), leases, client.InNamespace("pitstop-system")); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range leases.Items {
		if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
			out = append(out, l.Name+"="+*l.Spec.HolderIdentity)
		}
	}
	return strings.Join(out, " ")
}

// slotsHeldBy counts the budget slots node holds.
func slotsHeldBy(t *testing.T, node string) int {
	t.Helper()
	leases := &coordinationv1.LeaseList{}
	if err := env.Client.List(t.Context(), leases, client.InNamespace("pitstop-system")); err != nil {
		t.Fatal(err)
	}
	held := 0
	for _, l := range leases.Items {
		if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == "node/"+node {
			held++
		}
	}
	return held
}

// awaitEvent waits for an Event about the object named regarding with the
// reason and a note containing note.
func awaitEvent(t *testing.T, regarding, reason, note string) {
	t.Helper()
	testutil.Eventually(t, 15*time.Second, 100*time.Millisecond, func() error {
		list := &eventsv1.EventList{}
		if err := env.Client.List(context.Background(), list); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Regarding.Name == regarding && e.Reason == reason && strings.Contains(e.Note, note) {
				return nil
			}
		}
		return fmt.Errorf("no %s Event about %s saying %q", reason, regarding, note)
	})
}
