package machinemaintenance_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/machineapi"
	"github.com/pitstop-dev/pitstop/internal/plugin/trigger"
)

// The tests below change the world under a surge: the old Machine goes,
// the MachineMaintenance is deleted, the new Machine never becomes Ready,
// the old Machine's links stop agreeing at the last step. Each must end
// with the MachineSet at its size, its surge record gone, and at most one
// Machine removed for the replacement.

// askReplace runs the replaceMachine trigger on a Machine's node until it
// has asked for the replacement, as the profile engine would.
func askReplace(t *testing.T, c *cluster, machine string, spec pitstopv1alpha1.ReplaceMachineTrigger) {
	t.Helper()
	node := &corev1.Node{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: c.ns + "-" + machine}, node); err != nil {
		t.Fatal(err)
	}
	tr, err := trigger.New(pitstopv1alpha1.TriggerInstance{Name: "replace", ReplaceMachine: &spec})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, func() error {
		_, _, err := tr.Run(t.Context(), trigger.Context{Node: node, Profile: "cloud", From: pitstopv1alpha1.StateMaintenanceRequired,
			Since: time.Now().Add(-time.Minute), Now: time.Now(), Namespace: c.ns, Client: env.Client})
		return err
	})
}

// stepIs waits for a MachineMaintenance's action to reach step and pass
// check.
func stepIs(t *testing.T, ns, name string, step pitstopv1alpha1.ActionStep, check func(*pitstopv1alpha1.MachineAction) error) *pitstopv1alpha1.MachineMaintenance {
	t.Helper()
	var mm *pitstopv1alpha1.MachineMaintenance
	eventually(t, func() error {
		var err error
		if mm, err = mmOf(t, ns, name); err != nil {
			return err
		}
		a := mm.Status.Action
		if a == nil || a.Step != step {
			return fmt.Errorf("action %+v, want step %s", a, step)
		}
		return check(a)
	})
	return mm
}

// withReplacement passes once the surge has claimed its new Machine.
func withReplacement(a *pitstopv1alpha1.MachineAction) error {
	if a.Replacement == "" {
		return fmt.Errorf("no replacement claimed yet: %s", a.Message)
	}
	return nil
}

// watchRemovals records, every 10ms until the test ends, the set's
// Machines seen going (deleted or being deleted), in order.
func (c *cluster) watchRemovals(ms *machinev1beta1.MachineSet) func() []string {
	ctx, cancel := context.WithCancel(context.Background())
	var (
		mu      sync.Mutex
		removed []string
	)
	seen := map[string]bool{}
	for _, m := range c.machinesOf(ms) {
		seen[m.Name] = true
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			var list machinev1beta1.MachineList
			if env.Client.List(ctx, &list, client.InNamespace(c.ns), client.MatchingLabels{labelSet: ms.Name}) == nil {
				live := map[string]bool{}
				for i := range list.Items {
					if list.Items[i].DeletionTimestamp.IsZero() {
						live[list.Items[i].Name] = true
						seen[list.Items[i].Name] = true
					}
				}
				mu.Lock()
				for name := range seen {
					if !live[name] && !slices.Contains(removed, name) {
						removed = append(removed, name)
					}
				}
				mu.Unlock()
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	c.t.Cleanup(func() { cancel(); wg.Wait() })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(removed)
	}
}

// wantAtSize checks that the set asks for n replicas and carries no surge
// record, and waits for it to have n Machines, each not being deleted.
func (c *cluster) wantAtSize(ms *machinev1beta1.MachineSet, n int32) {
	c.t.Helper()
	eventually(c.t, func() error {
		got := &machinev1beta1.MachineSet{}
		if err := env.Client.Get(c.t.Context(), client.ObjectKeyFromObject(ms), got); err != nil {
			return err
		}
		for k := range got.Annotations {
			if strings.HasPrefix(k, pitstopv1alpha1.AnnotationSurgePrefix) {
				return fmt.Errorf("set at %d replicas still carries %s", *got.Spec.Replicas, k)
			}
		}
		if *got.Spec.Replicas != n {
			return fmt.Errorf("set at %d replicas, want %d", *got.Spec.Replicas, n)
		}
		var live []string
		for _, m := range c.machinesOf(ms) {
			if m.DeletionTimestamp.IsZero() {
				live = append(live, m.Name)
			}
		}
		if len(live) != int(n) {
			return fmt.Errorf("set has machines %v, want %d", live, n)
		}
		return nil
	})
}

// kept checks that a Machine is there, not being deleted and not marked
// for deletion.
func kept(t *testing.T, m *machinev1beta1.Machine) {
	t.Helper()
	got := &machinev1beta1.Machine{}
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(m), got); err != nil || !got.DeletionTimestamp.IsZero() {
		t.Errorf("machine %s was removed (%v)", m.Name, err)
		return
	}
	if v, marked := got.Annotations[machineapi.AnnotationDeleteMachine]; marked {
		t.Errorf("machine %s is marked for deletion (%q)", m.Name, v)
	}
}

// TestUntrustedSurgeOldMachineDeletedMidSurge: the old Machine is deleted
// by someone else (a health check, the cloud's retirement, a user) while
// the surge waits for its new Machine. The record is not the Machine's
// any more, so the Machine's deletion does not take it along (the test
// plays the garbage collector, which envtest does not run); the set
// replaces the deleted Machine, so the surge's replica is taken back: the
// set ends at its size with its surge record gone, and the action is done,
// saying what happened. The poller ending the event (the instance is
// gone) does not stop that.
func TestUntrustedSurgeOldMachineDeletedMidSurge(t *testing.T) {
	c := newCluster(t, "surge-oldgone")
	ms := c.newSet("workers", 3)
	old := c.machinesOf(ms)[0]
	name := c.retire(&old, "instance-event-g1")
	withStartBy(t, c.ns, name)
	c.hold.Store(true)
	askReplace(t, c, old.Name, pitstopv1alpha1.ReplaceMachineTrigger{})
	stepIs(t, c.ns, name, pitstopv1alpha1.StepWaitingForReplacement, withReplacement)
	eventually(t, func() error { return replicasAre(t.Context(), ms, 4) })

	if err := env.Client.Delete(t.Context(), &old); err != nil {
		t.Fatal(err)
	}
	collectGarbage(t, c.ns, &old)
	c.poll()
	// The new machines run once the set is back at its size (the played
	// Machine controller would wait for one the set removes).
	c.wantAtSize(ms, 3)
	c.hold.Store(false)
	eventually(t, func() error {
		if n := c.readyMachines(ms); n != 3 {
			return fmt.Errorf("%d Ready machines, want 3", n)
		}
		return nil
	})
	mm, err := mmOf(t, c.ns, name)
	if err != nil {
		t.Fatalf("the record went with its Machine: %v", err)
	}
	want := fmt.Sprintf("machine %s was removed by someone else during the surge: MachineSet workers is back at its size", old.Name)
	if a := mm.Status.Action; a.Step != pitstopv1alpha1.StepDone || !strings.Contains(a.Message, want) {
		t.Errorf("action at %s: %q; want Done saying %q", a.Step, a.Message, want)
	}
	c.wantAtSize(ms, 3)
}

// collectGarbage deletes the MachineMaintenances in ns that a deleted
// owner owns, as the garbage collector would.
func collectGarbage(t *testing.T, ns string, owner client.Object) {
	t.Helper()
	var list pitstopv1alpha1.MachineMaintenanceList
	if err := env.Client.List(t.Context(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		for _, ref := range list.Items[i].OwnerReferences {
			if ref.UID == owner.GetUID() {
				t.Logf("garbage collector: deleting MachineMaintenance %s, owned by %s", list.Items[i].Name, owner.GetName())
				if err := env.Client.Delete(t.Context(), &list.Items[i]); err != nil && !apierrors.IsNotFound(err) {
					t.Fatal(err)
				}
			}
		}
	}
}

// TestUntrustedSurgeMachineMaintenanceDeletedMidSurge: a user deletes the
// MachineMaintenance while its surge waits for the new Machine. The
// object stays until the surge is undone: the new Machine is marked for
// deletion and the set shrinks back, so the set removes that one, keeps
// the old one, ends at its size without its surge record, and only then
// does the object go.
func TestUntrustedSurgeMachineMaintenanceDeletedMidSurge(t *testing.T) {
	c, ms, before, _, mm := heldSurge(t, "surge-mmdeleted", "instance-event-d1", pitstopv1alpha1.ReplaceMachineTrigger{})
	added := mm.Status.Action.Replacement
	eventually(t, func() error { return replicasAre(t.Context(), ms, 4) })

	if err := env.Client.Delete(t.Context(), mm); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() error { return gone(t, mm) })
	c.wantUndone(ms, before, added)
}

// TestUntrustedSurgeReplacementNeverReadyIsUndone: the new Machine never
// runs. Past the trigger's timeout (3s here; 20m by default) the surge is
// undone: the new Machine is marked for deletion and the set shrinks, so
// the set removes it and keeps the old one; the action fails saying why,
// with a Warning Event.
func TestUntrustedSurgeReplacementNeverReadyIsUndone(t *testing.T) {
	c, ms, before, name, mm := heldSurge(t, "surge-neverready", "instance-event-n1", pitstopv1alpha1.ReplaceMachineTrigger{Timeout: &pitstopv1alpha1.Duration{Duration: 3 * time.Second}})
	old := before[0]
	added := mm.Status.Action.Replacement

	mm = phaseIs(t, c.ns, name, pitstopv1alpha1.EventFailed)
	want := fmt.Sprintf("new machine %s did not run with its node Ready within 3s of the scale-up; surge undone: MachineSet workers is back at its size (it removes new machine %s, marked for deletion) and machine %s stays",
		added, added, old.Name)
	if a := mm.Status.Action; a.Message != want {
		t.Errorf("message %q, want %q", a.Message, want)
	}
	c.wantUndone(ms, before, added)
	if !hasEventSaying(t, c.ns, "ActionStep", "UndoingSurge: new machine "+added+" did not run with its node Ready within 3s") {
		t.Error("no Warning Event saying the surge is undone")
	}
}

// TestUntrustedSurgeRefusedAtItsLastStepTakesTheReplicaBack: the old
// Machine's node starts pointing at another Machine while the surge waits
// for its new one, so the check before the old Machine is marked refuses.
// The old Machine is not touched; the new one, which pitstop knows as the
// set's own, is marked for deletion before the set shrinks back, so the
// set removes it and ends at its size; the action fails and a
// TargetRefused Event says why.
func TestUntrustedSurgeRefusedAtItsLastStepTakesTheReplicaBack(t *testing.T) {
	c, ms, before, name, mm := heldSurge(t, "surge-refused", "instance-event-r1", pitstopv1alpha1.ReplaceMachineTrigger{})
	old, other := before[0], before[1]
	added := mm.Status.Action.Replacement
	liar := c.ns + "-" + old.Name
	patchNode(t, liar, func(n *corev1.Node) { n.Annotations["machine.openshift.io/machine"] = c.ns + "/" + other.Name })
	c.hold.Store(false)

	mm = phaseIs(t, c.ns, name, pitstopv1alpha1.EventFailed)
	refusal := fmt.Sprintf("node %s's annotation machine.openshift.io/machine names machine %s/%s", liar, c.ns, other.Name)
	if a := mm.Status.Action; !strings.Contains(a.Message, refusal) || !strings.Contains(a.Message, "surge undone: MachineSet workers is back at its size (it removes new machine "+added) {
		t.Errorf("message %q, want it to give the refusal and the surge undone", a.Message)
	}
	c.wantUndone(ms, before, added)
	if !hasEventSaying(t, c.ns, "TargetRefused", refusal) {
		t.Error("no TargetRefused Event")
	}
}

// heldSurge starts a surge on a new set of 3 in its own namespace
// (namespace), replacing the set's first Machine for the scheduled event
// event, with new Machines held from running: it returns once the surge
// waits for its new Machine. before are the set's Machines before it.
func heldSurge(t *testing.T, namespace, event string, trigger pitstopv1alpha1.ReplaceMachineTrigger) (*cluster, *machinev1beta1.MachineSet, []machinev1beta1.Machine, string, *pitstopv1alpha1.MachineMaintenance) {
	t.Helper()
	c := newCluster(t, namespace)
	ms := c.newSet("workers", 3)
	before := c.machinesOf(ms)
	name := c.retire(&before[0], event)
	withStartBy(t, c.ns, name)
	c.hold.Store(true)
	askReplace(t, c, before[0].Name, trigger)
	mm := stepIs(t, c.ns, name, pitstopv1alpha1.StepWaitingForReplacement, withReplacement)
	return c, ms, before, name, mm
}

// wantUndone says the surge on ms was undone: the set at its size again,
// every Machine it had before kept, the new Machine added gone.
func (c *cluster) wantUndone(ms *machinev1beta1.MachineSet, before []machinev1beta1.Machine, added string) {
	c.t.Helper()
	c.wantAtSize(ms, 3)
	for i := range before {
		kept(c.t, &before[i])
	}
	if contains(c.machinesOf(ms), added) {
		c.t.Errorf("new machine %s is still there", added)
	}
}
