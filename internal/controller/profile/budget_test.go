package profile_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/budget"
	"github.com/pitstop-dev/pitstop/internal/controller/profile"
	"github.com/pitstop-dev/pitstop/internal/engine"
	"github.com/pitstop-dev/pitstop/internal/fleet"
	"github.com/pitstop-dev/pitstop/internal/maintenance"
	"github.com/pitstop-dev/pitstop/internal/plugin/check"
	"github.com/pitstop-dev/pitstop/internal/testutil"
	"github.com/pitstop-dev/pitstop/internal/testutil/clustertest"
)

// TestBudgetHoldsWithTwoManagersAndFiftyNodes: 50 nodes want maintenance at
// once, budget 3, and two managers act at the same time (as during a leader
// handover), each with 10 concurrent reconciles. A watch records the most
// nodes ever in maintenance together; a "rebooter" ends each node's
// maintenance shortly after it starts. Every node gets through; never more
// than 3 at once.
func TestBudgetHoldsWithTwoManagersAndFiftyNodes(t *testing.T) {
	const nodes, budget = 50, 3
	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{})
	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{})
	testutil.Create(t, env.Client, rollingProfile("rolling", "rolling", budget))

	w := testutil.WatchMaintenance(t, env.Clientset, "pool=rolling", finishReboot) // the simulated reboot
	for i := range nodes {
		testutil.Create(t, env.Client, testutil.Node(fmt.Sprintf("rolling-%02d", i),
			testutil.WithLabels(map[string]string{"pool": "rolling"}),
			func(n *corev1.Node) { n.Annotations = map[string]string{"reboot-needed": "true"} }))
	}
	testutil.Eventually(t, 2*time.Minute, 200*time.Millisecond, func() error {
		if done := w.Through(); done < nodes {
			return fmt.Errorf("%d of %d nodes through maintenance (most at once so far: %d)", done, nodes, w.MostAtOnce())
		}
		return nil
	})
	maxSeen := w.MostAtOnce()
	if maxSeen > budget {
		t.Fatalf("%d nodes were in maintenance at once; the budget is %d", maxSeen, budget)
	}
	if maxSeen < 2 {
		t.Errorf("at most %d node in maintenance at once: the budget of %d was not used, the test proves little", maxSeen, budget)
	}
	t.Logf("50 nodes through maintenance, at most %d at once (budget %d)", maxSeen, budget)
	// The trigger ran on every node.
	n := testutil.GetNode(t, env.Client, "rolling-07")
	if n.Labels["maintained-by"] != "rolling" {
		t.Errorf("the transition's trigger did not run: labels %v", n.Labels)
	}
}

// TestANodeOnItsWayInUsesTheBudget: a node let in whose drain is still
// under way holds the budget's one slot; the next node's budget check
// counts it, in the engine's record and in what `pitstop explain` and the
// dashboard show, instead of counting only the nodes already in
// maintenance (none) and passing while every slot is taken.
func TestANodeOnItsWayInUsesTheBudget(t *testing.T) {
	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{})
	testutil.Kubelet(t, env.Clientset)
	p := restoringProfile("on-its-way")
	testutil.Create(t, env.Client, p)
	ns := testutil.Namespace(t, env.Client, "on-its-way")
	wants := func(n *corev1.Node) { n.Annotations = map[string]string{"reboot-needed": "true"} }
	testutil.Create(t, env.Client, testutil.Node("on-its-way-0", testutil.WithLabels(map[string]string{"pool": "on-its-way"}), wants))
	testutil.ManagedPods(t, env.Client, ns, "on-its-way-0", "web", 2)
	budget := testutil.PDB(t, env.Client, ns, "web", 2, 0) // the drain waits
	testutil.Eventually(t, 20*time.Second, 100*time.Millisecond, func() error {
		nm := &pitstopv1alpha1.NodeMaintenance{}
		return env.Client.Get(t.Context(), client.ObjectKey{Name: "profile-on-its-way-0"}, nm)
	})
	testutil.Create(t, env.Client, testutil.Node("on-its-way-1", testutil.WithLabels(map[string]string{"pool": "on-its-way"}), wants))

	const taken = "1 of 1 maintenance slots taken in profile on-its-way"
	testutil.Eventually(t, 20*time.Second, 100*time.Millisecond, func() error {
		rec, err := engine.ReadRecord(testutil.GetNode(t, env.Client, "on-its-way-1"))
		if err != nil {
			return err
		}
		pr := rec.Profiles["on-its-way"]
		if pr.Current != pitstopv1alpha1.StateMaintenanceRequired {
			return fmt.Errorf("state %s", pr.Current)
		}
		if passed, ok := pr.Checks["budget"]; !ok || passed {
			return fmt.Errorf("recorded checks %v, want budget=false while on-its-way-0 holds the slot", pr.Checks)
		}
		return nil
	})
	evals, err := fleet.NewEvaluator(env.Client, check.Deps{}).Node(t.Context(), testutil.GetNode(t, env.Client, "on-its-way-1"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(evals) != 1 || len(evals[0].Decision.Evaluations) != 1 || len(evals[0].Decision.Evaluations[0].Checks) != 1 {
		t.Fatalf("evaluations %+v, want one transition with one check", evals)
	}
	if c := evals[0].Decision.Evaluations[0].Checks[0]; c.Passed || c.Reason != taken {
		t.Errorf("explain shows the budget check %+v, want failed: %q", c, taken)
	}

	// Once the first node is through, the second is let in.
	testutil.SetAllowed(t, env.Client, budget, 2, 2)
	testutil.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		if got := testutil.GetNode(t, env.Client, "on-its-way-0").Labels[pitstopv1alpha1.LabelState]; got != string(pitstopv1alpha1.StateInMaintenance) {
			return fmt.Errorf("on-its-way-0 is %s", got)
		}
		return nil
	})
	finishReboot(t.Context(), "on-its-way-0")
	testutil.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		nm := &pitstopv1alpha1.NodeMaintenance{}
		return env.Client.Get(t.Context(), client.ObjectKey{Name: "profile-on-its-way-1"}, nm)
	})
}

// countingReader counts the reads that reach the API server.
type countingReader struct {
	client.Reader
	reads *atomic.Int32
}

func (c countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.reads.Add(1)
	return c.Reader.Get(ctx, key, obj, opts...)
}

// TestSlotStalenessAsksTheAPIServerOnlyWhenTheCacheCannotTell: a slot
// whose holder the cache shows in maintenance is in use, without a request
// (the sweep and every lost admission race look at all of a budget's
// holders); a holder the cache shows out of maintenance, or gone, is
// confirmed with the API server, and a cache that lags behind the node's
// move into maintenance does not free its slot.
func TestSlotStalenessAsksTheAPIServerOnlyWhenTheCacheCannotTell(t *testing.T) {
	record := func(state pitstopv1alpha1.MaintenanceState) string {
		r := engine.Record{Profiles: map[string]engine.ProfileRecord{"p": {Current: state}}}
		return r.Encode()
	}
	node := func(name string, state pitstopv1alpha1.MaintenanceState) *corev1.Node {
		return testutil.Node(name, func(n *corev1.Node) {
			n.Annotations = map[string]string{pitstopv1alpha1.AnnotationMaintenanceData: record(state)}
		})
	}
	in, out := node("slot-in", pitstopv1alpha1.StateInMaintenance), node("slot-out", pitstopv1alpha1.StateOperational)
	testutil.Create(t, env.Client, in, out)
	lagging := out.DeepCopy() // the cache has not seen slot-late's move in
	lagging.Name = "slot-late"
	testutil.Create(t, env.Client, node("slot-late", pitstopv1alpha1.StateInMaintenance))

	reads := &atomic.Int32{}
	cache := staleNodes{Client: env.Client, nodes: map[string]*corev1.Node{"slot-late": lagging}}
	r := profile.NewBareReconciler(cache, countingReader{Reader: env.Client, reads: reads}).WithSlots(&budget.Slots{Client: env.Client, Namespace: "unused"})
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "slot", ResourceVersion: "1"},
		Spec:       coordinationv1.LeaseSpec{AcquireTime: &metav1.MicroTime{Time: time.Now().Add(-time.Hour)}},
	}
	// This replica saw the slot as it is an hour ago: past the grace.
	if r.SlotStale(t.Context(), time.Now().Add(-time.Hour))("slot-out", lease) || reads.Load() > 0 {
		t.Fatal("a slot first seen now is stale, or its holder was read within the grace")
	}
	stale := r.SlotStale(t.Context(), time.Now())
	for _, tc := range []struct {
		holder    string
		stale     bool
		apiServer bool
	}{
		{"slot-in", false, false},
		{"slot-out", true, true},
		{"slot-gone", true, true},
		{"slot-late", false, true},
	} {
		reads.Store(0)
		if got := stale(tc.holder, lease); got != tc.stale {
			t.Errorf("holder %s: stale %v, want %v", tc.holder, got, tc.stale)
		}
		if asked := reads.Load() > 0; asked != tc.apiServer {
			t.Errorf("holder %s: asked the API server %v (%d reads), want %v", tc.holder, asked, reads.Load(), tc.apiServer)
		}
	}
}

// TestALostRaceForASlotIsRecordedAsAFullBudget: the budget check, counted
// from a cache that has not seen the last slot taken, passes; the slot's
// create then fails, as another node holds it. The node waits, and its
// record says the budget check failed, as the next evaluation will once
// the cache catches up, rather than passed for a moment (a write of the
// node now and another one then).
func TestALostRaceForASlotIsRecordedAsAFullBudget(t *testing.T) {
	ns := testutil.Namespace(t, env.Client, "lost-race")
	p := rollingProfile("lost-race", "lost-race", 1)
	testutil.Create(t, env.Client, p)
	if _, ok, err := (&budget.Slots{Client: env.Client, Namespace: ns}).Acquire(t.Context(), budget.Key{Name: p.Name}, 1, "winner", time.Now(), nil); err != nil || !ok {
		t.Fatalf("the winner's slot: %v %v", ok, err)
	}
	node := testutil.Node("lost-race-0", testutil.WithLabels(map[string]string{"pool": "lost-race"}),
		func(n *corev1.Node) { n.Annotations = map[string]string{"reboot-needed": "true"} })
	testutil.Create(t, env.Client, node)
	behind := &budget.Slots{Client: env.Client, Cache: noLeases{Reader: env.Client}, Namespace: ns}
	r := profile.NewBareReconciler(env.Client, env.Client).WithSlots(behind)
	for range 2 { // operational → maintenance-required, then the race
		if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: node.Name}}); err != nil {
			t.Fatal(err)
		}
	}
	rec, err := engine.ReadRecord(testutil.GetNode(t, env.Client, node.Name))
	if err != nil {
		t.Fatal(err)
	}
	pr := rec.Profiles[p.Name]
	if pr.Current != pitstopv1alpha1.StateMaintenanceRequired {
		t.Fatalf("state %s, want %s", pr.Current, pitstopv1alpha1.StateMaintenanceRequired)
	}
	if passed, ok := pr.Checks["budget"]; !ok || passed {
		t.Errorf("recorded checks %v, want budget=false", pr.Checks)
	}
	blocked := r.Decisions(node.Name)[p.Name].Blocking()
	if !slices.Contains(blocked, "all 1 slots of budget budget are taken") {
		t.Errorf("the node's evaluation says it waits for %q", blocked)
	}
}

// TestASlotGivenBackLetsTheNextNodeInBeforeTheCacheSeesIt: a node leaving
// maintenance gives its slot up at once, and the node waiting for it is
// let in although the cache still shows the slot held by the node that
// left. With the waiting node first in line, the slot is handed to it in
// one write (the same Lease changes holder); with nobody in line (the
// waiting node's last evaluation failed), the slot is given back and the
// waiting node woken to take it.
func TestASlotGivenBackLetsTheNextNodeInBeforeTheCacheSeesIt(t *testing.T) {
	for _, inLine := range []bool{true, false} {
		t.Run(fmt.Sprintf("in line=%t", inLine), func(t *testing.T) {
			name := fmt.Sprintf("handover-%t", inLine)
			ns := testutil.Namespace(t, env.Client, name)
			p := rollingProfile(name, name, 1)
			testutil.Create(t, env.Client, p)
			var nodes []*corev1.Node
			for _, suffix := range []string{"leaving", "waiting"} {
				n := testutil.Node(name+"-"+suffix, testutil.WithLabels(map[string]string{"pool": name}),
					func(n *corev1.Node) { n.Annotations = map[string]string{"reboot-needed": "true"} })
				testutil.Create(t, env.Client, n)
				nodes = append(nodes, n)
			}
			leaving, waiting := nodes[0], nodes[1]
			cache := &leaseSnapshot{}
			clock := clocktesting.NewFakeClock(time.Now())
			r := profile.NewBareReconciler(env.Client, env.Client).WithSlots(&budget.Slots{Client: env.Client, Cache: cache, Namespace: ns}).WithClock(clock)
			reconcile, state := drive(t, r, p.Name)

			reconcile(leaving, 2) // maintenance-required, then in maintenance with the slot
			if got := state(leaving); got != pitstopv1alpha1.StateInMaintenance {
				t.Fatalf("%s is %s, want %s", leaving.Name, got, pitstopv1alpha1.StateInMaintenance)
			}
			// From here on the cache shows the slot held by the leaving node.
			if err := env.Client.List(t.Context(), &cache.list, client.InNamespace(ns)); err != nil || len(cache.list.Items) != 1 {
				t.Fatalf("slot Leases: %v (%d)", err, len(cache.list.Items))
			}
			slot := cache.list.Items[0]
			reconcile(waiting, 2) // maintenance-required, then waiting for the slot
			if got := state(waiting); got != pitstopv1alpha1.StateMaintenanceRequired {
				t.Fatalf("%s is %s, want %s", waiting.Name, got, pitstopv1alpha1.StateMaintenanceRequired)
			}
			if woken := r.Woken(); len(woken) != 0 {
				t.Fatalf("woken before the slot was given back: %v", woken)
			}
			if !inLine {
				r.OutOfLine(waiting.Name)
			}

			done := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"reboot-needed":null}}}`))
			if err := env.Client.Patch(t.Context(), testutil.GetNode(t, env.Client, leaving.Name), done); err != nil {
				t.Fatal(err)
			}
			reconcile(leaving, 1) // out of maintenance; the slot is given up
			if got := state(leaving); got != pitstopv1alpha1.StateOperational {
				t.Fatalf("%s is %s, want %s", leaving.Name, got, pitstopv1alpha1.StateOperational)
			}
			if woken := r.Woken(); !slices.Equal(woken, []string{waiting.Name}) {
				t.Fatalf("woken when the slot was given up: %v, want [%s]", woken, waiting.Name)
			}
			reconcile(waiting, 1)
			if got := state(waiting); got != pitstopv1alpha1.StateInMaintenance {
				t.Errorf("%s is %s, want %s: the cache still showing the slot given up kept it out", waiting.Name, got, pitstopv1alpha1.StateInMaintenance)
			}
			holders, err := (&budget.Slots{Client: env.Client, Namespace: ns}).Holders(t.Context(), budget.Key{Name: p.Name})
			if err != nil || !slices.Equal(holders, []string{waiting.Name}) {
				t.Errorf("slot holders %v (%v), want [%s]", holders, err, waiting.Name)
			}
			now := &coordinationv1.Lease{}
			if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(&slot), now); err != nil {
				t.Fatal(err)
			}
			if handed := now.UID == slot.UID; handed != inLine {
				t.Errorf("the slot Lease was handed over (the same object): %t, want %t", handed, inLine)
			}
		})
	}
}

// TestASlotHandedOverIsConfirmedWhenItsNodeGoesIn: a slot handed to the
// node first in line counts as taken at the hand-over. When that node is
// evaluated only after the sweep's grace has passed, the sweep, until the
// node shows it needs the slot, would judge it stale: a sweep judging it
// between the node's admission and the write that takes the node in
// would give the slot back and let a third node in, one over the budget.
// The admission confirms the slot first (its renewTime), in a write that
// changes its version, so that such a sweep's delete, made only if the
// slot is unchanged since it judged it, fails.
func TestASlotHandedOverIsConfirmedWhenItsNodeGoesIn(t *testing.T) {
	const name = "confirm"
	ns := testutil.Namespace(t, env.Client, name)
	p := rollingProfile(name, name, 1)
	testutil.Create(t, env.Client, p)
	var nodes []*corev1.Node
	for _, suffix := range []string{"leaving", "next"} {
		n := testutil.Node(name+"-"+suffix, testutil.WithLabels(map[string]string{"pool": name}),
			func(n *corev1.Node) { n.Annotations = map[string]string{"reboot-needed": "true"} })
		testutil.Create(t, env.Client, n)
		nodes = append(nodes, n)
	}
	leaving, next := nodes[0], nodes[1]
	clock := clocktesting.NewFakeClock(time.Now())
	r := profile.NewBareReconciler(env.Client, env.Client).WithSlots(&budget.Slots{Client: env.Client, Cache: env.Client, Namespace: ns}).WithClock(clock)
	reconcile, state := drive(t, r, p.Name)
	slot := func() *coordinationv1.Lease {
		t.Helper()
		list := &coordinationv1.LeaseList{}
		if err := env.Client.List(t.Context(), list, client.InNamespace(ns)); err != nil || len(list.Items) != 1 {
			t.Fatalf("slot Leases: %v (%d)", err, len(list.Items))
		}
		return &list.Items[0]
	}

	reconcile(leaving, 2) // in maintenance with the slot
	reconcile(next, 2)    // in line for it
	done := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"reboot-needed":null}}}`))
	if err := env.Client.Patch(t.Context(), testutil.GetNode(t, env.Client, leaving.Name), done); err != nil {
		t.Fatal(err)
	}
	reconcile(leaving, 1) // out of maintenance: the slot is handed to next
	handed := slot()
	if got := budget.HolderOf(handed); got != next.Name {
		t.Fatalf("the slot is held by %q after the hand-over, want %s", got, next.Name)
	}

	// next is evaluated after the grace: until it goes in, the sweep
	// judges its slot stale.
	clock.Step(time.Minute)
	if !r.SlotStale(t.Context(), clock.Now())(next.Name, handed) {
		t.Fatal("the slot handed to a node not yet in maintenance is not stale after the grace: this test no longer shows the hazard")
	}
	reconcile(next, 1)
	if got := state(next); got != pitstopv1alpha1.StateInMaintenance {
		t.Fatalf("%s is %s, want %s", next.Name, got, pitstopv1alpha1.StateInMaintenance)
	}
	confirmed := slot()
	if renewed := confirmed.Spec.RenewTime; renewed == nil || !renewed.Time.Equal(clock.Now().Truncate(time.Microsecond)) {
		t.Errorf("the slot's renewTime is %v, want the admission's time %v", renewed, clock.Now())
	}
	if confirmed.ResourceVersion == handed.ResourceVersion {
		t.Fatal("the admission did not write the slot")
	}
	// A sweep that judged the slot stale as handed over cannot delete it.
	err := env.Client.Delete(t.Context(), handed.DeepCopy(), client.Preconditions{ResourceVersion: &handed.ResourceVersion})
	if !apierrors.IsConflict(err) {
		t.Errorf("deleting the slot as it was before the admission: %v, want a conflict", err)
	}
	// Confirmed, it is spared for the grace even by a node not in
	// maintenance: the admission's write shows in the slot itself.
	if r.SlotStale(t.Context(), clock.Now().Add(10*time.Second))("someone-else", confirmed) {
		t.Error("a slot confirmed 10 s ago is stale")
	}
	if !r.SlotStale(t.Context(), clock.Now().Add(time.Minute))("someone-else", confirmed) {
		t.Error("a slot confirmed a minute ago, of a holder that is not a node, is not stale")
	}
}

// drive returns, for a test that drives r itself, a function that
// evaluates a node a number of times and one that reads its state in
// the profile named.
func drive(t *testing.T, r *profile.Reconciler, profileName string) (reconcile func(n *corev1.Node, times int), state func(n *corev1.Node) pitstopv1alpha1.MaintenanceState) {
	reconcile = func(n *corev1.Node, times int) {
		t.Helper()
		for range times {
			if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: n.Name}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	state = func(n *corev1.Node) pitstopv1alpha1.MaintenanceState {
		t.Helper()
		rec, err := engine.ReadRecord(testutil.GetNode(t, env.Client, n.Name))
		if err != nil {
			t.Fatal(err)
		}
		return rec.Profiles[profileName].Current
	}
	return reconcile, state
}

// TestAFreedSlotGoesToTheNodeFirstInLine: two nodes wait for the one slot.
// A slot freed by the sweep (its holder went away) goes to the one that
// has waited longer even when the other is evaluated first, which says why
// it waits and does not race for the slot. Once the first is through, it
// hands its slot straight to the other.
func TestAFreedSlotGoesToTheNodeFirstInLine(t *testing.T) {
	ns := testutil.Namespace(t, env.Client, "line")
	p := rollingProfile("line", "line", 1)
	testutil.Create(t, env.Client, p)
	// Named against their order, so that the order is the time waited.
	holder, first, later := "line-holder", "line-z-first", "line-a-later"
	for _, name := range []string{holder, first, later} {
		testutil.Create(t, env.Client, testutil.Node(name, testutil.WithLabels(map[string]string{"pool": "line"}),
			func(n *corev1.Node) { n.Annotations = map[string]string{"reboot-needed": "true"} }))
	}
	cache := &leaseSnapshot{}
	r := profile.NewBareReconciler(env.Client, env.Client).WithSlots(&budget.Slots{Client: env.Client, Cache: cache, Namespace: ns})
	reconcile := func(name string, times int) {
		t.Helper()
		for range times {
			if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: name}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	state := func(name string) pitstopv1alpha1.MaintenanceState {
		t.Helper()
		rec, err := engine.ReadRecord(testutil.GetNode(t, env.Client, name))
		if err != nil {
			t.Fatal(err)
		}
		return rec.Profiles[p.Name].Current
	}
	holders := func() []string {
		t.Helper()
		h, err := (&budget.Slots{Client: env.Client, Namespace: ns}).Holders(t.Context(), budget.Key{Name: p.Name})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	seeSlots := func() {
		t.Helper()
		cache.list = coordinationv1.LeaseList{}
		if err := env.Client.List(t.Context(), &cache.list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
	}
	rebooted := func(name string) {
		t.Helper()
		done := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"reboot-needed":null}}}`))
		if err := env.Client.Patch(t.Context(), testutil.GetNode(t, env.Client, name), done); err != nil {
			t.Fatal(err)
		}
	}

	reconcile(holder, 2)
	seeSlots()
	reconcile(first, 2)
	time.Sleep(10 * time.Millisecond) // the record's times are to the millisecond
	reconcile(later, 2)
	for _, name := range []string{first, later} {
		if got := state(name); got != pitstopv1alpha1.StateMaintenanceRequired {
			t.Fatalf("%s is %s, want %s", name, got, pitstopv1alpha1.StateMaintenanceRequired)
		}
	}

	// The holder's node goes away in maintenance, and the sweep gives its
	// slot back.
	if err := env.Client.Delete(t.Context(), testutil.GetNode(t, env.Client, holder)); err != nil {
		t.Fatal(err)
	}
	if err := (&budget.Slots{Client: env.Client, Namespace: ns}).Release(t.Context(), budget.Key{Name: p.Name}, holder); err != nil {
		t.Fatal(err)
	}
	seeSlots()
	// What `pitstop explain` and the dashboard show, from the records.
	ev := fleet.NewEvaluator(env.Client, check.Deps{})
	for name, want := range map[string]string{first: "", later: "1 of the 1 slots of budget budget are free, and 1 nodes have waited longer for them"} {
		evals, err := ev.Node(t.Context(), testutil.GetNode(t, env.Client, name), time.Now())
		if err != nil || len(evals) != 1 || len(evals[0].Decision.Evaluations) != 1 {
			t.Fatalf("evaluating %s: %v %+v", name, err, evals)
		}
		if got := evals[0].Decision.Evaluations[0]; !got.Passed || got.Blocked != want {
			t.Errorf("%s: explained as passed %v, blocked %q; want passed, blocked %q", name, got.Passed, got.Blocked, want)
		}
	}
	reconcile(later, 1)
	if got := state(later); got != pitstopv1alpha1.StateMaintenanceRequired {
		t.Fatalf("%s, evaluated first, is %s: it took the slot of the node that waited longer", later, got)
	}
	if h := holders(); len(h) != 0 {
		t.Fatalf("slot holders %v: %s raced for the slot", h, later)
	}
	d := r.Decisions(later)[p.Name]
	if len(d.Evaluations) != 1 || d.Evaluations[0].Blocked != "1 of the 1 slots of budget budget are free, and 1 nodes have waited longer for them" {
		t.Errorf("%s's evaluation does not say it waits for the node ahead of it: %+v", later, d.Evaluations)
	}
	reconcile(first, 1)
	if got := state(first); got != pitstopv1alpha1.StateInMaintenance {
		t.Fatalf("%s is %s, want %s", first, got, pitstopv1alpha1.StateInMaintenance)
	}
	if h := holders(); !slices.Equal(h, []string{first}) {
		t.Fatalf("slot holders %v, want [%s]", h, first)
	}

	seeSlots()
	r.Woken() // those the giving way woke
	rebooted(first)
	reconcile(first, 1)
	if woken := r.Woken(); !slices.Equal(woken, []string{later}) {
		t.Errorf("woken when %s left: %v, want [%s]", first, woken, later)
	}
	if h := holders(); !slices.Equal(h, []string{later}) {
		t.Errorf("slot holders %v once %s left, want [%s]: the slot was not handed to the next in line", h, first, later)
	}
	reconcile(later, 1)
	if got := state(later); got != pitstopv1alpha1.StateInMaintenance {
		t.Errorf("%s is %s once the node ahead of it was through, want %s", later, got, pitstopv1alpha1.StateInMaintenance)
	}
}

// leaseSnapshot is a cache of slot Leases that shows what was put in it.
type leaseSnapshot struct {
	client.Reader
	list coordinationv1.LeaseList
}

func (c *leaseSnapshot) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	o := (&client.ListOptions{}).ApplyOptions(opts)
	out := list.(*coordinationv1.LeaseList)
	for _, l := range c.list.Items {
		if o.LabelSelector == nil || o.LabelSelector.Matches(labels.Set(l.Labels)) {
			out.Items = append(out.Items, l)
		}
	}
	return nil
}

// noLeases is a cache that has seen no slot Lease taken.
type noLeases struct{ client.Reader }

func (noLeases) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

// TestTheSweepGivesBackTheSlotsOfADeletedProfilesBudget: a slot of a
// budget no profile has any more (its profile was deleted, and the slot's
// release was missed) is given back by the sweep once its holder is out of
// maintenance; one whose holder is still under maintenance stays.
func TestTheSweepGivesBackTheSlotsOfADeletedProfilesBudget(t *testing.T) {
	testutil.Create(t, env.Client, testutil.Node("swept-held-0"))
	held := &pitstopv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: maintenance.ForProfile("swept-held-0")},
		Spec:       pitstopv1alpha1.NodeMaintenanceSpec{NodeName: "swept-held-0"},
	}
	testutil.Create(t, env.Client, held)
	// Later tests' budgets shared by every profile would count it.
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), held) })
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "pitstop-system"}}
	if err := env.Client.Create(t.Context(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	slots := &budget.Slots{Client: env.Client, Namespace: ns.Name}
	gone := budget.Key{Name: "swept-gone-profile"}
	for _, holder := range []string{"swept-out-0", "swept-held-0"} {
		// Taken a minute ago: past the grace of a transition being written.
		if _, ok, err := slots.Acquire(t.Context(), gone, 2, holder, time.Now().Add(-time.Minute), nil); err != nil || !ok {
			t.Fatalf("taking a slot for %s: %v, %v", holder, ok, err)
		}
	}
	// The manager sweeps at start and every 5 s; a slot is stale once it
	// has seen it unchanged for the 15 s grace, however old the slot's own
	// times say it is.
	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{})
	testutil.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		if held := slotsHeldBy(t, "swept-out-0"); held != 0 {
			return fmt.Errorf("swept-out-0, not under maintenance, still holds %d slots of a deleted profile's budget", held)
		}
		return nil
	})
	if held := slotsHeldBy(t, "swept-held-0"); held != 1 {
		t.Errorf("swept-held-0, under maintenance, holds %d slots, want 1", held)
	}
}
