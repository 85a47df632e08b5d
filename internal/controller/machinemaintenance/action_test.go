package machinemaintenance_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/controller/machinemaintenance"
	"github.com/pitstop-dev/pitstop/internal/machineapi"
	"github.com/pitstop-dev/pitstop/internal/maintenance"
	"github.com/pitstop-dev/pitstop/internal/nodeview"
	"github.com/pitstop-dev/pitstop/internal/plugin/trigger"
	"github.com/pitstop-dev/pitstop/internal/sim/ec2sim"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// newSet creates a MachineSet of aws Machines and plays the Machine
// controller for it: each new Machine gets an instance, a Ready Node and
// the phase Running; each Machine that goes takes its Node along.
func (c *cluster) newSet(name string, replicas int32) *machinev1beta1.MachineSet {
	c.t.Helper()
	ms := c.setOf(name, replicas)
	testutil.Create(c.t, env.Client, ms)
	c.runSet(ms, replicas)
	return ms
}

// setOf is a MachineSet of aws Machines selecting labelSet=name.
func (c *cluster) setOf(name string, replicas int32) *machinev1beta1.MachineSet {
	return &machinev1beta1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: name},
		Spec: machinev1beta1.MachineSetSpec{
			Replicas: ptr.To(replicas),
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{labelSet: name}},
			Template: machinev1beta1.MachineTemplateSpec{
				ObjectMeta: machinev1beta1.ObjectMeta{Labels: map[string]string{labelSet: name}},
				Spec:       machinev1beta1.MachineSpec{ProviderSpec: machinev1beta1.ProviderSpec{Value: awsSpec()}},
			},
		},
	}
}

// runSet plays the Machine controller for the set and waits for its
// replicas to run with their nodes Ready.
func (c *cluster) runSet(ms *machinev1beta1.MachineSet, replicas int32) {
	c.t.Helper()
	c.playMachineController(ms)
	eventually(c.t, func() error {
		if ready := c.readyMachines(ms); ready != int(replicas) {
			return fmt.Errorf("%d of %d machines Running with their node Ready", ready, replicas)
		}
		return nil
	})
}

// readyMachines counts the set's Machines that run with a Ready Node.
func (c *cluster) readyMachines(ms *machinev1beta1.MachineSet) int {
	var list machinev1beta1.MachineList
	if err := env.Client.List(context.Background(), &list, client.InNamespace(c.ns), client.MatchingLabels{labelSet: ms.Name}); err != nil {
		return -1
	}
	n := 0
	for i := range list.Items {
		m := &list.Items[i]
		if m.Status.Phase == nil || *m.Status.Phase != machinev1beta1.PhaseRunning || m.Status.NodeRef == nil {
			continue
		}
		node := &corev1.Node{}
		if env.Client.Get(context.Background(), client.ObjectKey{Name: m.Status.NodeRef.Name}, node) == nil && nodeview.Ready(node) {
			n++
		}
	}
	return n
}

// watchCapacity records the fewest Ready machines of the set seen, every
// 20ms, until the test ends.
func (c *cluster) watchCapacity(ms *machinev1beta1.MachineSet) func() int {
	ctx, cancel := context.WithCancel(context.Background())
	var fewest atomic.Int64
	fewest.Store(1 << 30)
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			if n := c.readyMachines(ms); n >= 0 && int64(n) < fewest.Load() {
				fewest.Store(int64(n))
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	c.t.Cleanup(func() { cancel(); wg.Wait() })
	return func() int { return int(fewest.Load()) }
}

// machinesOf names the set's Machines.
func (c *cluster) machinesOf(ms *machinev1beta1.MachineSet) []machinev1beta1.Machine {
	var list machinev1beta1.MachineList
	if err := env.Client.List(c.t.Context(), &list, client.InNamespace(c.ns), client.MatchingLabels{labelSet: ms.Name}); err != nil {
		c.t.Fatal(err)
	}
	return list.Items
}

// retire schedules a retirement for a Machine's instance and returns its
// MachineMaintenance once the poll has made it.
func (c *cluster) retire(m *machinev1beta1.Machine, eventID string) string {
	c.t.Helper()
	return c.retireID(instanceOfMachine(c.t, m), eventID)
}

// retireID schedules a retirement for an instance and returns its
// MachineMaintenance once the poll has made it.
func (c *cluster) retireID(id, eventID string) string {
	c.t.Helper()
	c.ec2.ScheduleEvent(id, ec2sim.ScheduledEvent{ID: eventID, Code: "instance-retirement", NotBefore: time.Now().Add(72 * time.Hour)})
	name := maintenance.MachineMaintenanceName(id, eventID)
	c.awaitEventOnNode(name)
	return name
}

// awaitEventOnNode polls until the MachineMaintenance name exists and
// names its node. A poll whose cache has not caught up with the Machine's
// nodeRef creates it without its node (the node is found only through the
// Machine), and a later poll names it, as the next poll does in a running
// manager; a trigger run on the node before that finds no event of it.
func (c *cluster) awaitEventOnNode(name string) {
	c.t.Helper()
	eventually(c.t, func() error {
		c.poll()
		mm, err := mmOf(c.t, c.ns, name)
		if err == nil && mm.Spec.NodeName == "" {
			return fmt.Errorf("MachineMaintenance %s/%s names no node yet", c.ns, name)
		}
		return err
	})
}

func instanceOfMachine(t *testing.T, m *machinev1beta1.Machine) string {
	t.Helper()
	got := &machinev1beta1.Machine{}
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(m), got); err != nil {
		t.Fatal(err)
	}
	pid := ptr.Deref(got.Spec.ProviderID, "")
	return pid[len("aws:///us-east-1a/"):]
}

// runTrigger runs a profile's trigger on a node, as the profile engine
// does, until it is done, and returns how many runs it took.
func runTrigger(t *testing.T, inst pitstopv1alpha1.TriggerInstance, nodeName, ns string, since time.Time) int {
	t.Helper()
	tr, err := trigger.New(inst)
	if err != nil {
		t.Fatal(err)
	}
	runs := 0
	eventually(t, func() error {
		node := &corev1.Node{}
		if err := env.Client.Get(t.Context(), client.ObjectKey{Name: nodeName}, node); err != nil {
			if apierrors.IsNotFound(err) && inst.ReplaceMachine != nil {
				return nil // replaced: the engine stops with its node, as here
			}
			return err
		}
		runs++
		done, status, err := tr.Run(t.Context(), trigger.Context{Node: node, Profile: "cloud", From: pitstopv1alpha1.StateMaintenanceRequired,
			Since: since, Now: time.Now(), Namespace: ns, Client: env.Client})
		if err != nil {
			t.Logf("trigger run %d: %v", runs, err)
			return err
		}
		if !done {
			return fmt.Errorf("trigger waits: %s", status)
		}
		return nil
	})
	return runs
}

// TestReplaceWithSurgeKeepsCapacity: the replaceMachine trigger on a node
// of a MachineSet of 3 asks for the replacement on its event's object;
// the set grows to 4, the new Machine runs with its node Ready, the old
// one is marked and the set shrinks back to 3 — never fewer than 3 Ready
// machines — and the object ends Completed, kept after its Machine went.
func TestReplaceWithSurgeKeepsCapacity(t *testing.T) {
	c := newCluster(t, "surge")
	ms := c.newSet("workers", 3)
	fewest := c.watchCapacity(ms)
	most := c.watchReplicas(ms)
	old := c.machinesOf(ms)[0]
	shrank := c.watchShrink(ms, 4, &old)
	name := c.retire(&old, "instance-event-r1")
	phaseIs(t, c.ns, name, pitstopv1alpha1.EventScheduled)

	since := time.Now().Add(-time.Minute)
	runTrigger(t, pitstopv1alpha1.TriggerInstance{Name: "replace", ReplaceMachine: &pitstopv1alpha1.ReplaceMachineTrigger{}}, c.ns+"-"+old.Name, c.ns, since)

	mm := phaseIs(t, c.ns, name, pitstopv1alpha1.EventCompleted)
	a := mm.Status.Action
	if a == nil || a.Type != pitstopv1alpha1.ActionReplace || !a.Surge || a.Step != pitstopv1alpha1.StepDone || a.Replacement == "" || a.MachineSet != ms.Name || a.Profile != "cloud" {
		t.Errorf("action = %+v", a)
	}
	if len(mm.OwnerReferences) != 0 {
		t.Errorf("the record is still owned: %v", mm.OwnerReferences)
	}
	if err := gone(t, &old); err != nil {
		t.Error(err)
	}
	got := &machinev1beta1.MachineSet{}
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(ms), got); err != nil {
		t.Fatal(err)
	}
	if *got.Spec.Replicas != 3 || len(got.Annotations) != 0 {
		t.Errorf("set ends at %d replicas, annotations %v; want 3 and none", *got.Spec.Replicas, got.Annotations)
	}
	eventually(t, func() error {
		if n := c.readyMachines(ms); n != 3 {
			return fmt.Errorf("%d Ready machines", n)
		}
		return nil
	})
	if f := fewest(); f < 3 {
		t.Errorf("capacity dropped to %d Ready machines", f)
	}
	if m := most(); m != 4 {
		t.Errorf("the set reached %d replicas, want 4: one surge", m)
	}
	// The set shrinks only once the mark has had time to reach the
	// MachineSet controller (five seconds), so that it removes the old
	// Machine and no other.
	at, wasMarked := shrank()
	switch {
	case at.IsZero():
		t.Error("the set was never seen shrinking from 4 replicas")
	case !wasMarked:
		t.Errorf("the set shrank at %s while machine %s was not marked for deletion", at.Format(time.StampMilli), old.Name)
	case a.MarkedTime == nil:
		t.Error("the action records no markedTime")
	case at.Sub(a.MarkedTime.Time) < 5*time.Second:
		t.Errorf("the set shrank %s after machine %s was marked, want at least 5s", at.Sub(a.MarkedTime.Time), old.Name)
	}
}

// watchShrink records when the set was first seen going below from
// replicas, and whether old carried its deletion mark then.
func (c *cluster) watchShrink(ms *machinev1beta1.MachineSet, from int32, old *machinev1beta1.Machine) func() (time.Time, bool) {
	ctx, cancel := context.WithCancel(context.Background())
	var (
		mu     sync.Mutex
		at     time.Time
		marked bool
	)
	var wg sync.WaitGroup
	wg.Go(func() {
		reached := false
		for ctx.Err() == nil {
			got := &machinev1beta1.MachineSet{}
			if env.Client.Get(ctx, client.ObjectKeyFromObject(ms), got) == nil {
				if *got.Spec.Replicas >= from {
					reached = true
				} else if reached {
					m := &machinev1beta1.Machine{}
					err := env.Client.Get(ctx, client.ObjectKeyFromObject(old), m)
					_, isMarked := m.Annotations[machineapi.AnnotationDeleteMachine]
					mu.Lock()
					at, marked = time.Now(), err == nil && isMarked || apierrors.IsNotFound(err)
					mu.Unlock()
					return
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	c.t.Cleanup(func() { cancel(); wg.Wait() })
	return func() (time.Time, bool) {
		mu.Lock()
		defer mu.Unlock()
		return at, marked
	}
}

// wrongPick is a surge on a MachineSet whose controller the test plays,
// one that ignores the deletion mark (removeNone: one that removes
// nothing), driven with a fake clock up to the set shrinking back; it
// returns the cluster, the set, the old Machine, the MachineMaintenance,
// the clock and the set's removals so far.
func wrongPick(t *testing.T, removeNone bool) (*cluster, *machinev1beta1.MachineSet, machinev1beta1.Machine, string, *clocktesting.FakeClock, func() []string) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Now())
	c := &cluster{t: t, ns: testutil.Namespace(t, env.Client, fmt.Sprintf("wrongpick-%d", namespaces.Add(1))), noSets: true}
	c.removeNone.Store(removeNone)
	newClusterOf(t, c, func(o *machinemaintenance.Options) { o.Clock = clk })
	ms := c.newSetPlayed("workers", 3)
	old := c.machinesOf(ms)[0]
	name := c.retire(&old, "instance-event-w1")
	withStartBy(t, c.ns, name)
	removals := c.watchRemovals(ms)
	askReplace(t, c, old.Name, pitstopv1alpha1.ReplaceMachineTrigger{})
	// Marked; the clock moves past the settle: the set shrinks.
	stepIs(t, c.ns, name, pitstopv1alpha1.StepDeletingMachine, func(a *pitstopv1alpha1.MachineAction) error {
		if a.MarkedTime == nil {
			return errors.New("not marked yet")
		}
		return nil
	})
	clk.Step(6 * time.Second)
	eventually(t, func() error { return replicasAre(t.Context(), ms, 3) })
	return c, ms, old, name, clk, removals
}

// TestASurgedMachineTheSetLeavesIsDeleted: a MachineSet controller that
// removes nothing when the surge's replica is taken off leaves the old
// Machine marked and in service; two minutes on, pitstop deletes it
// itself (the one removal of the replacement) and says so in a Warning
// Event, and the event completes.
func TestASurgedMachineTheSetLeavesIsDeleted(t *testing.T) {
	c, ms, old, name, clk, removals := wrongPick(t, true)
	// Not yet two minutes: the old machine stays.
	clk.Step(time.Minute)
	touch(t, c.ns, name)
	time.Sleep(time.Second)
	if m, err := mmOf(t, c.ns, name); err != nil || m.Status.Action.Step != pitstopv1alpha1.StepDeletingMachine {
		t.Fatalf("a minute after the set shrank: %v %+v", err, m.Status.Action)
	}
	if !contains(c.machinesOf(ms), old.Name) {
		t.Fatalf("machine %s went before the grace ran out", old.Name)
	}
	clk.Step(2 * time.Minute)
	touch(t, c.ns, name)
	phaseIs(t, c.ns, name, pitstopv1alpha1.EventCompleted)
	if err := gone(t, &old); err != nil {
		t.Error(err)
	}
	eventually(t, func() error {
		if n := c.readyMachines(ms); n != 3 {
			return fmt.Errorf("%d Ready machines, want 3 again", n)
		}
		return nil
	})
	if got := removals(); !slices.Equal(got, []string{old.Name}) {
		t.Errorf("machines removed: %v, want only %s", got, old.Name)
	}
	if !hasEventSaying(t, c.ns, "MachineNotRemoved", "pitstop deleted it") {
		t.Error("no MachineNotRemoved Event")
	}
}

// TestUntrustedSurgeWhoseSetRemovedAnotherMachineRemovesNoMore: a
// MachineSet controller that ignores the deletion mark removes another
// Machine when the surge's replica is taken off. That was the
// replacement's one removal: two minutes on, pitstop does not delete the
// old Machine as well. The old Machine stays in service with its mark
// taken off, the set is at its size, and the action fails, saying which
// Machine the set removed, with a MachineNotRemoved Warning Event.
func TestUntrustedSurgeWhoseSetRemovedAnotherMachineRemovesNoMore(t *testing.T) {
	c, ms, old, name, clk, removals := wrongPick(t, false)
	eventually(t, func() error {
		if left := c.machinesOf(ms); len(left) != 3 || !contains(left, old.Name) {
			return fmt.Errorf("machines %v; want 3 with %s still there", machineNames(left), old.Name)
		}
		return nil
	})
	clk.Step(3 * time.Minute)
	touch(t, c.ns, name)
	// Until the action ends, or the old machine goes as well.
	eventually(t, func() error {
		mm, err := mmOf(t, c.ns, name)
		if err != nil || mm.Status.Phase.Finished() || gone(t, &old) == nil {
			return err
		}
		return fmt.Errorf("%s is %s", name, mm.Status.Phase)
	})
	time.Sleep(settle)
	got := &machinev1beta1.Machine{}
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(&old), got); err != nil || !got.DeletionTimestamp.IsZero() {
		t.Fatalf("machine %s was removed as well (%v): two removals for one replacement", old.Name, err)
	}
	if v, marked := got.Annotations[machineapi.AnnotationDeleteMachine]; marked {
		t.Errorf("machine %s keeps its deletion mark %q", old.Name, v)
	}
	removed := removals()
	if len(removed) != 1 || removed[0] == old.Name {
		t.Errorf("machines removed: %v, want one, not %s", removed, old.Name)
	}
	want := fmt.Sprintf("MachineSet workers removed machine %s instead of machine %s", strings.Join(removed, ","), old.Name)
	if mm := phaseIs(t, c.ns, name, pitstopv1alpha1.EventFailed); !strings.Contains(mm.Status.Action.Message, want) {
		t.Errorf("message %q, want it to say %q", mm.Status.Action.Message, want)
	}
	c.wantAtSize(ms, 3)
	if !hasEventSaying(t, c.ns, "MachineNotRemoved", want) {
		t.Error("no MachineNotRemoved Event")
	}
}

// newSetPlayed creates a MachineSet whose controller the test plays, one
// that ignores the deletion mark: it creates Machines up to spec.replicas
// and, above it, deletes the unmarked Machine first in name order (or
// none, with c.removeNone).
func (c *cluster) newSetPlayed(name string, replicas int32) *machinev1beta1.MachineSet {
	c.t.Helper()
	ms := c.setOf(name, replicas)
	testutil.Create(c.t, env.Client, ms)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	c.t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Go(func() {
		for n := 0; ctx.Err() == nil; time.Sleep(100 * time.Millisecond) {
			set := &machinev1beta1.MachineSet{}
			if env.Client.Get(ctx, client.ObjectKeyFromObject(ms), set) != nil {
				continue
			}
			var list machinev1beta1.MachineList
			if env.Client.List(ctx, &list, client.InNamespace(c.ns), client.MatchingLabels{labelSet: name}) != nil {
				continue
			}
			var live []machinev1beta1.Machine
			for _, m := range list.Items {
				if m.DeletionTimestamp.IsZero() {
					live = append(live, m)
				}
			}
			switch want := int(*set.Spec.Replicas); {
			case len(live) < want:
				n++
				m := &machinev1beta1.Machine{
					ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: fmt.Sprintf("%s-%02d", name, n), Labels: map[string]string{labelSet: name},
						OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(set, machinev1beta1.GroupVersion.WithKind("MachineSet"))}},
					Spec: machinev1beta1.MachineSpec{ProviderSpec: machinev1beta1.ProviderSpec{Value: awsSpec()}},
				}
				_ = env.Client.Create(ctx, m)
			case len(live) > want && !c.removeNone.Load():
				slices.SortFunc(live, func(a, b machinev1beta1.Machine) int { return strings.Compare(a.Name, b.Name) })
				for i := range live {
					if _, marked := live[i].Annotations[machineapi.AnnotationDeleteMachine]; !marked {
						_ = env.Client.Delete(ctx, &live[i])
						break
					}
				}
			}
		}
	})
	c.runSet(ms, replicas)
	return ms
}

// replicasAre says whether the set asks for n replicas now.
func replicasAre(ctx context.Context, ms *machinev1beta1.MachineSet, n int32) error {
	got := &machinev1beta1.MachineSet{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ms), got); err != nil {
		return err
	}
	if *got.Spec.Replicas != n {
		return fmt.Errorf("set at %d replicas, want %d", *got.Spec.Replicas, n)
	}
	return nil
}

func machineNames(machines []machinev1beta1.Machine) []string {
	var out []string
	for _, m := range machines {
		out = append(out, m.Name)
	}
	return out
}

// touch changes an annotation of a MachineMaintenance, so that its
// controller looks at it now.
func touch(t *testing.T, ns, name string) {
	t.Helper()
	eventually(t, func() error {
		mm, err := mmOf(t, ns, name)
		if err != nil {
			return err
		}
		base := mm.DeepCopy()
		if mm.Annotations == nil {
			mm.Annotations = map[string]string{}
		}
		mm.Annotations["test.pitstop.dev/touched"] = time.Now().Format(time.RFC3339Nano)
		return env.Client.Patch(t.Context(), mm, client.MergeFrom(base))
	})
}

// watchReplicas records the most replicas the set was seen with.
func (c *cluster) watchReplicas(ms *machinev1beta1.MachineSet) func() int {
	ctx, cancel := context.WithCancel(context.Background())
	var most atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			got := &machinev1beta1.MachineSet{}
			if env.Client.Get(ctx, client.ObjectKeyFromObject(ms), got) == nil && int64(*got.Spec.Replicas) > most.Load() {
				most.Store(int64(*got.Spec.Replicas))
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	c.t.Cleanup(func() { cancel(); wg.Wait() })
	return func() int { return int(most.Load()) }
}

// TestTwoSurgesOnOneSetAndARestartMidway: two replacements asked at once
// on one MachineSet each add their own replica; pitstop is restarted while
// they wait for their new machines; both complete, the set ends at the
// size it had, and capacity never dropped.
func TestTwoSurgesOnOneSetAndARestartMidway(t *testing.T) {
	c := newCluster(t, "twosurges")
	ms := c.newSet("workers", 3)
	fewest := c.watchCapacity(ms)
	machines := c.machinesOf(ms)
	a, b := machines[0], machines[1]
	nameA, nameB := c.retire(&a, "instance-event-a"), c.retire(&b, "instance-event-b")
	for _, n := range []string{nameA, nameB} {
		withStartBy(t, c.ns, n)
	}
	// Ask for both at once, as two nodes' triggers would, while no new
	// machine can run yet.
	c.hold.Store(true)
	for _, m := range []machinev1beta1.Machine{a, b} {
		node := &corev1.Node{}
		if err := env.Client.Get(t.Context(), client.ObjectKey{Name: c.ns + "-" + m.Name}, node); err != nil {
			t.Fatal(err)
		}
		tr, _ := trigger.New(pitstopv1alpha1.TriggerInstance{Name: "replace", ReplaceMachine: &pitstopv1alpha1.ReplaceMachineTrigger{}})
		eventually(t, func() error {
			_, _, err := tr.Run(t.Context(), trigger.Context{Node: node, Profile: "cloud", Since: time.Now().Add(-time.Minute), Now: time.Now(), Namespace: c.ns, Client: env.Client})
			return err
		})
	}
	// Both have scaled up: restart pitstop before they go on.
	eventually(t, func() error { return replicasAre(t.Context(), ms, 5) })
	for _, n := range []string{nameA, nameB} {
		eventually(t, func() error {
			if mm, err := mmOf(t, c.ns, n); err != nil || mm.Status.Action.Step != pitstopv1alpha1.StepWaitingForReplacement {
				return fmt.Errorf("%s is at step %s before the restart, want WaitingForReplacement (%v)", n, mm.Status.Action.Step, err)
			}
			return nil
		})
	}
	c.restart()
	c.hold.Store(false)
	phaseIs(t, c.ns, nameA, pitstopv1alpha1.EventCompleted)
	phaseIs(t, c.ns, nameB, pitstopv1alpha1.EventCompleted)
	mmA, _ := mmOf(t, c.ns, nameA)
	mmB, _ := mmOf(t, c.ns, nameB)
	if mmA.Status.Action.Replacement == mmB.Status.Action.Replacement {
		t.Errorf("both took machine %s as their replacement", mmA.Status.Action.Replacement)
	}
	got := &machinev1beta1.MachineSet{}
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(ms), got); err != nil {
		t.Fatal(err)
	}
	if *got.Spec.Replicas != 3 || len(got.Annotations) != 0 {
		t.Errorf("set ends at %d replicas, annotations %v; want 3 and none", *got.Spec.Replicas, got.Annotations)
	}
	if f := fewest(); f < 3 {
		t.Errorf("capacity dropped to %d Ready machines", f)
	}
}

// TestReplaceWithoutSurgeDeletesTheMachine: surge: false deletes the
// Machine (its node is drained as for any deletion) and completes once it
// is gone; a control-plane machine with AlertOnly is never touched.
func TestReplaceWithoutSurgeDeletesTheMachine(t *testing.T) {
	c := newCluster(t, "nosurge")
	m, id := c.machine("worker-a", nil)
	c.ec2.ScheduleEvent(id, ec2sim.ScheduledEvent{ID: "instance-event-s", Code: "instance-stop", NotBefore: time.Now().Add(48 * time.Hour)})
	name := maintenance.MachineMaintenanceName(id, "instance-event-s")
	c.awaitEventOnNode(name)
	runTrigger(t, pitstopv1alpha1.TriggerInstance{Name: "replace", ReplaceMachine: &pitstopv1alpha1.ReplaceMachineTrigger{Surge: ptr.To(false)}}, c.ns+"-worker-a", c.ns, time.Now().Add(-time.Minute))
	phaseIs(t, c.ns, name, pitstopv1alpha1.EventCompleted)
	if err := gone(t, m); err != nil {
		t.Error(err)
	}

	cp, _ := c.machine("master-0", nil)
	patchNode(t, c.ns+"-master-0", func(n *corev1.Node) { n.Labels["node-role.kubernetes.io/control-plane"] = "" })
	node := &corev1.Node{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: c.ns + "-master-0"}, node); err != nil {
		t.Fatal(err)
	}
	tr, _ := trigger.New(pitstopv1alpha1.TriggerInstance{Name: "replace", ReplaceMachine: &pitstopv1alpha1.ReplaceMachineTrigger{ControlPlane: pitstopv1alpha1.ControlPlaneAlertOnly}})
	done, status, err := tr.Run(t.Context(), trigger.Context{Node: node, Profile: "cloud", Now: time.Now(), Namespace: c.ns, Client: env.Client})
	if done || err != nil || status == "" {
		t.Errorf("AlertOnly on a control-plane machine: done %v, %q, %v", done, status, err)
	}
	time.Sleep(time.Second)
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(cp), cp); err != nil || !cp.DeletionTimestamp.IsZero() {
		t.Errorf("the control-plane machine was touched: %v", err)
	}
}

// TestRebootInstanceRebootsInPlace: rebootInstance drains the node through
// a NodeMaintenance (the test plays its controller), reboots the instance
// through EC2 once, waits for the new boot ID and restores the node; the
// instance-reboot event completes.
func TestRebootInstanceRebootsInPlace(t *testing.T) {
	c := newCluster(t, "reboot")
	_, id := c.machine("worker-a", nil)
	nodeName := c.ns + "-worker-a"
	c.ec2.ScheduleEvent(id, ec2sim.ScheduledEvent{ID: "instance-event-b", Code: "instance-reboot", NotBefore: time.Now().Add(24 * time.Hour)})
	name := maintenance.MachineMaintenanceName(id, "instance-event-b")
	c.awaitEventOnNode(name)
	// The instance comes back with a new boot ID.
	c.ec2.OnReboot(func(string) {
		go func() {
			node := &corev1.Node{}
			_ = env.Client.Get(context.Background(), client.ObjectKey{Name: nodeName}, node)
			base := node.DeepCopy()
			node.Status.NodeInfo.BootID = "boot-2"
			_ = env.Client.Status().Patch(context.Background(), node, client.MergeFrom(base))
		}()
	})
	playNodeMaintenances(t)
	runTrigger(t, pitstopv1alpha1.TriggerInstance{Name: "reboot", RebootInstance: &pitstopv1alpha1.RebootInstanceTrigger{}}, nodeName, c.ns, time.Now().Add(-time.Minute))
	if n := c.ec2.Reboots(id); n != 1 {
		t.Errorf("%d reboots, want 1", n)
	}
	mm := phaseIs(t, c.ns, name, pitstopv1alpha1.EventCompleted)
	if a := mm.Status.Action; a == nil || a.BootID != "boot-1" || a.Step != pitstopv1alpha1.StepDone {
		t.Errorf("action = %+v", a)
	}
	var nms pitstopv1alpha1.NodeMaintenanceList
	if err := env.Client.List(t.Context(), &nms); err != nil {
		t.Fatal(err)
	}
	for _, nm := range nms.Items {
		if nm.Spec.NodeName == nodeName {
			t.Errorf("NodeMaintenance %s of the rebooted node is left", nm.Name)
		}
	}
}

// playNodeMaintenances plays the NodeMaintenance controller: each new
// NodeMaintenance is Ready at once, and a deleted one goes at once.
func playNodeMaintenances(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Go(func() {
		for ctx.Err() == nil {
			var list pitstopv1alpha1.NodeMaintenanceList
			if env.Client.List(ctx, &list) == nil {
				for i := range list.Items {
					nm := &list.Items[i]
					if len(nm.Status.Conditions) == 0 {
						base := nm.DeepCopy()
						nm.Status.Conditions = []metav1.Condition{{Type: pitstopv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: pitstopv1alpha1.ReasonReady, LastTransitionTime: metav1.Now()}}
						_ = env.Client.Status().Patch(ctx, nm, client.MergeFrom(base))
					}
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}

func patchNode(t *testing.T, name string, edit func(*corev1.Node)) {
	t.Helper()
	eventually(t, func() error {
		node := &corev1.Node{}
		if err := env.Client.Get(t.Context(), client.ObjectKey{Name: name}, node); err != nil {
			return err
		}
		base := node.DeepCopy()
		if node.Labels == nil {
			node.Labels = map[string]string{}
		}
		edit(node)
		return env.Client.Patch(t.Context(), node, client.MergeFrom(base))
	})
}

// TestRebootANodeWithoutMachineOrEvent: a profile may reboot a node that
// has neither a Machine nor a scheduled event: the trigger records a
// reboot of its own (provider pitstop, in pitstop's namespace), EC2
// reboots the node's instance (read from its providerID, with the default
// credentials), and the record ends Completed.
func TestRebootANodeWithoutMachineOrEvent(t *testing.T) {
	c := newCluster(t, "lonereboot")
	id, providerID := c.instance("lone")
	node := c.node("lone", providerID)
	c.ec2.OnReboot(func(string) {
		go patchNodeStatus(node.Name, func(n *corev1.Node) { n.Status.NodeInfo.BootID = "boot-2" })
	})
	playNodeMaintenances(t)
	runTrigger(t, pitstopv1alpha1.TriggerInstance{Name: "reboot", RebootInstance: &pitstopv1alpha1.RebootInstanceTrigger{}}, node.Name, c.ns, time.Now().Add(-time.Minute))
	if n := c.ec2.Reboots(id); n != 1 {
		t.Errorf("%d reboots, want 1", n)
	}
	var list pitstopv1alpha1.MachineMaintenanceList
	if err := env.Client.List(t.Context(), &list, client.InNamespace(c.ns)); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Fatalf("%d MachineMaintenances, want the reboot's own", len(list.Items))
	}
	mm := phaseIs(t, c.ns, list.Items[0].Name, pitstopv1alpha1.EventCompleted)
	if mm.Spec.Provider != "pitstop" || mm.Spec.Code != "reboot" || mm.Spec.InstanceID != id || mm.Spec.NodeName != node.Name {
		t.Errorf("spec = %+v", mm.Spec)
	}
}

func patchNodeStatus(name string, edit func(*corev1.Node)) {
	node := &corev1.Node{}
	if env.Client.Get(context.Background(), client.ObjectKey{Name: name}, node) != nil {
		return
	}
	base := node.DeepCopy()
	edit(node)
	_ = env.Client.Status().Patch(context.Background(), node, client.MergeFrom(base))
}

// TestNoReplacementIsAskedForAMachineBeingDeleted: the replaceMachine
// trigger on the node of a Machine that is being deleted (its deletion
// held here by a finalizer) asks for nothing: no MachineMaintenance
// holds a replacement and the set stays at its size, where a surge would
// grow it and shrink it back by deleting another machine.
func TestNoReplacementIsAskedForAMachineBeingDeleted(t *testing.T) {
	c := newCluster(t, "leaving")
	ms := c.newSet("workers", 3)
	old := c.machinesOf(ms)[0]
	const hold = "test.pitstop.dev/hold"
	got := &machinev1beta1.Machine{}
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(&old), got); err != nil {
		t.Fatal(err)
	}
	got.Finalizers = append(got.Finalizers, hold)
	if err := env.Client.Update(t.Context(), got); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		m := &machinev1beta1.Machine{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(&old), m); err == nil {
			m.Finalizers = slices.DeleteFunc(m.Finalizers, func(f string) bool { return f == hold })
			_ = env.Client.Update(context.Background(), m)
		}
	})
	if err := env.Client.Delete(t.Context(), got); err != nil {
		t.Fatal(err)
	}
	nodeName := c.ns + "-" + old.Name
	tr, err := trigger.New(pitstopv1alpha1.TriggerInstance{Name: "replace", ReplaceMachine: &pitstopv1alpha1.ReplaceMachineTrigger{}})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, func() error {
		node := &corev1.Node{}
		if err := env.Client.Get(t.Context(), client.ObjectKey{Name: nodeName}, node); err != nil {
			return err
		}
		done, status, err := tr.Run(t.Context(), trigger.Context{Node: node, Profile: "cloud", From: pitstopv1alpha1.StateMaintenanceRequired,
			Since: time.Now().Add(-time.Minute), Now: time.Now(), Namespace: c.ns, Client: env.Client})
		if err != nil || done || !strings.Contains(status, "is being deleted") {
			return fmt.Errorf("trigger: done %v, status %q, error %v; want it waiting on the deletion", done, status, err)
		}
		return nil
	})
	var list pitstopv1alpha1.MachineMaintenanceList
	if err := env.Client.List(t.Context(), &list, client.InNamespace(c.ns)); err != nil {
		t.Fatal(err)
	}
	for _, mm := range list.Items {
		if mm.Status.Action != nil {
			t.Errorf("MachineMaintenance %s holds a %s action for a machine being deleted", mm.Name, mm.Status.Action.Type)
		}
	}
	set := &machinev1beta1.MachineSet{}
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(ms), set); err != nil {
		t.Fatal(err)
	}
	if *set.Spec.Replicas != 3 {
		t.Errorf("the set is at %d replicas, want 3", *set.Spec.Replicas)
	}
}
