package admission

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestAHandedOverSlotWakesItsWaitersOnce: a node giving its slot back wakes
// the longest-waiting nodes at once, and the cache's later sight of the
// same hand-over is known for handedOverFor, unless nobody was woken.
func TestAHandedOverSlotWakesItsWaitersOnce(t *testing.T) {
	w := newWaiters()
	t0 := time.Now()
	for i, node := range []string{"second", "first", "third"} {
		since := t0.Add(time.Duration([]int{2, 1, 3}[i]) * time.Second)
		w.set(node, []string{"budget/b/"}, nil, since)
	}
	w.handOver("budget/b/", "leaving", t0)
	if woken := woken(w); !slices.Equal(woken, []string{"first", "second"}) {
		t.Errorf("woken %v, want the two longest waiting [first second]", woken)
	}
	// A slot given back while nobody waits (those woken are still being
	// evaluated) leaves the cache's sight of it to wake them.
	w.handOver("budget/c/", "leaving", t0)
	if w.handedOver("budget/c/", "leaving", t0) {
		t.Error("a hand-over that woke nobody keeps the cache from waking the waiters")
	}
	for _, tc := range []struct {
		key, node string
		at        time.Time
		want      bool
	}{
		{"budget/b/", "leaving", t0.Add(time.Second), true},
		{"budget/b/", "other", t0.Add(time.Second), false},
		{"budget/c/", "leaving", t0.Add(time.Second), false},
		{"budget/b/", "leaving", t0.Add(handedOverFor), false},
	} {
		if got := w.handedOver(tc.key, tc.node, tc.at); got != tc.want {
			t.Errorf("handedOver(%s, %s, +%s) = %v, want %v", tc.key, tc.node, tc.at.Sub(t0), got, tc.want)
		}
	}
}

// TestWaitersWakeTheLongestWaitingFirst: a freed budget wakes the two nodes
// that have waited longest on it, never the node that freed it, and
// nothing waiting on another budget.
func TestWaitersWakeTheLongestWaitingFirst(t *testing.T) {
	w := newWaiters()
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	w.set("late", []string{"budget/a/"}, nil, t0.Add(3*time.Minute))
	w.set("first", []string{"budget/a/"}, nil, t0)
	w.set("second", []string{"budget/a/", "profile/p"}, nil, t0.Add(time.Minute))
	w.set("other", []string{"budget/b/"}, nil, t0.Add(-time.Hour))
	w.set("gone", []string{"budget/a/"}, nil, t0.Add(-time.Hour))
	w.set("gone", nil, nil, time.Time{}) // no longer waiting
	w.notify("budget/a/", "first")
	if got, want := woken(w), []string{"second", "late"}; !slices.Equal(got, want) {
		t.Errorf("woke %v, want %v", got, want)
	}
	// A second slot freed before they are evaluated wakes the next ones.
	w.set("later", []string{"budget/a/"}, nil, t0.Add(4*time.Minute))
	if got := w.oldest("budget/a/", ""); !slices.Equal(got, []string{"first", "later"}) {
		t.Errorf("second wake-up woke %v, want [first later]", got)
	}
}

// TestTheLineForABudget: the nodes that wait only for a budget stand in
// line for it: a node counts those in line that have waited longer,
// including those woken to take a slot, however long ago they were
// evaluated; a node let in, or whose evaluation failed, leaves the line; a
// freed slot wakes those in line first.
func TestTheLineForABudget(t *testing.T) {
	w := newWaiters()
	t0 := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	const key = "budget/a/"
	w.set("windowClosed", []string{key}, nil, t0.Add(-time.Hour)) // waits for its window too
	w.set("failing", []string{key}, []string{key}, t0.Add(-time.Hour))
	w.outOfLine("failing") // its evaluation failed
	w.set("first", []string{key}, []string{key}, t0)
	w.set("second", []string{key}, []string{key}, t0.Add(time.Minute))
	w.set("third", []string{key}, []string{key}, t0.Add(2*time.Minute))
	w.set("tied", []string{key}, []string{key}, t0.Add(2*time.Minute))
	ahead := func(node string, since time.Time) int { return w.ahead(key, node, since) }
	for _, tc := range []struct {
		node  string
		since time.Time
		want  int
	}{
		{"first", t0, 0},
		{"second", t0.Add(time.Minute), 1},
		{"tied", t0.Add(2 * time.Minute), 3}, // third's name comes first
		{"third", t0.Add(2 * time.Minute), 2},
		{"newcomer", t0.Add(3 * time.Minute), 4},
	} {
		if got := ahead(tc.node, tc.since); got != tc.want {
			t.Errorf("%s: %d ahead in line, want %d", tc.node, got, tc.want)
		}
	}
	if got := w.ahead("budget/b/", "second", t0.Add(time.Minute)); got != 0 {
		t.Errorf("%d ahead on another budget, want 0", got)
	}
	// A freed slot wakes the two first in line, not the nodes out of it;
	// woken, they still hold their places.
	if got := w.oldest(key, ""); !slices.Equal(got, []string{"first", "second"}) {
		t.Errorf("woke %v, want [first second]", got)
	}
	if got := ahead("third", t0.Add(2*time.Minute)); got != 2 {
		t.Errorf("third: %d ahead once first and second were woken, want 2", got)
	}
	w.admitted(key, "first")
	if got := ahead("third", t0.Add(2*time.Minute)); got != 1 {
		t.Errorf("third: %d ahead once first was let in, want 1", got)
	}
	// Evaluated again and still waiting for the window only: not in line.
	w.set("second", []string{key}, nil, t0.Add(time.Minute))
	if got := ahead("third", t0.Add(2*time.Minute)); got != 0 {
		t.Errorf("third: %d ahead once second waits for more than the budget, want 0", got)
	}
	// The next wake-up: those in line, then the others.
	if got := w.oldest(key, ""); !slices.Equal(got, []string{"third", "tied"}) {
		t.Errorf("woke %v, want [third tied]", got)
	}
	if got := w.oldest(key, ""); !slices.Equal(got, []string{"failing", "windowClosed"}) {
		t.Errorf("woke %v, want [failing windowClosed]", got)
	}
}

// TestANodeGivingWayWakesTheFrontOfTheLine: a node that leaves the free
// slots to the nodes ahead of it wakes those of them not woken yet, first
// in line first, and none behind them.
func TestANodeGivingWayWakesTheFrontOfTheLine(t *testing.T) {
	w := newWaiters()
	t0 := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	const key = "budget/a/"
	w.set("windowClosed", []string{key}, nil, t0.Add(-time.Hour))
	w.set("failing", []string{key}, []string{key}, t0.Add(-time.Hour))
	w.outOfLine("failing")
	w.set("first", []string{key}, []string{key}, t0)
	w.set("second", []string{key}, []string{key}, t0.Add(time.Minute))
	w.set("third", []string{key}, []string{key}, t0.Add(2*time.Minute))
	w.wakeFront(key, 2)
	if got := woken(w); !slices.Equal(got, []string{"first", "second"}) {
		t.Errorf("woke %v, want [first second]", got)
	}
	// Still queued: not woken twice.
	w.wakeFront(key, 2)
	if got := woken(w); len(got) != 0 {
		t.Errorf("woke %v again before they were evaluated", got)
	}
	// first was evaluated and still waits: woken again when a slot looks
	// free to a node behind it.
	w.set("first", []string{key}, []string{key}, t0)
	w.wakeFront(key, 1)
	if got := woken(w); !slices.Equal(got, []string{"first"}) {
		t.Errorf("woke %v, want [first]", got)
	}
}

// TestASlotHandedOverGoesToOneNodeAtATime: two slots given up at once are
// claimed for the first two nodes in line; a node a slot is being handed
// to does not take another, and a node already asking for a slot is not
// claimed. The claim ends with the hand-over (the node is woken to go in),
// with its failure (woken to ask itself), or after claimFor.
func TestASlotHandedOverGoesToOneNodeAtATime(t *testing.T) {
	w := newWaiters()
	const key = "budget/b/"
	t0 := time.Now()
	for i, node := range []string{"first", "second", "third", "fourth"} {
		since := t0.Add(time.Duration(i) * time.Second)
		w.set(node, []string{key}, []string{key}, since)
	}
	now := t0.Add(11 * time.Second)
	if !w.admitting(key, "third", now) {
		t.Fatal("third, unclaimed, may not ask for a slot")
	}
	var claimed []string
	for _, leaving := range []string{"leaving-1", "leaving-2"} {
		claimed = append(claimed, w.claimFront(key, leaving, now))
	}
	if !slices.Equal(claimed, []string{"first", "second"}) {
		t.Errorf("claimed %v for two slots given up at once, want [first second]", claimed)
	}
	// first's own evaluation, told a slot is being handed to it, puts it
	// back in line meanwhile: it is not claimed a second time.
	w.set("first", []string{key}, []string{key}, t0)
	if got := w.claimFront(key, "leaving-3", now); got != "fourth" {
		t.Errorf("claimed %q next, want fourth (first and second are claimed, third asks for a slot itself)", got)
	}
	for _, node := range []string{"first", "second", "fourth"} {
		if w.admitting(key, node, now) {
			t.Errorf("%s took a slot of its own while one is being handed to it", node)
		}
	}
	w.gave(key, "leaving-1", "first", now)
	w.unclaim(key, "second")
	if woken := woken(w); !slices.Equal(woken, []string{"first", "second"}) {
		t.Errorf("woken %v, want [first second]: the one handed its slot, and the one whose hand-over failed", woken)
	}
	if !w.admitting(key, "first", now) || !w.admitting(key, "second", now) {
		t.Error("a node's claim outlived its hand-over")
	}
	if w.admitting(key, "fourth", now.Add(claimFor-time.Millisecond)) || !w.admitting(key, "fourth", now.Add(claimFor)) {
		t.Error("a claim whose hand-over never ended does not last exactly claimFor")
	}
	if !w.handedOver(key, "leaving-1", now) || w.handedOver(key, "leaving-2", now) {
		t.Error("only the hand-over that happened keeps the cache's sight of it from waking more nodes")
	}
}

// woken names the nodes woken so far, in order, and forgets them.
func woken(w *waiters) []string { return w.take() }

// TestNoWakeUpIsLost: however many nodes are woken before the controller
// takes them, each is handed on once, in the order woken, and one woken
// twice meanwhile is handed on once.
func TestNoWakeUpIsLost(t *testing.T) {
	w := newWaiters()
	var want []string
	for i := range 5000 {
		want = append(want, fmt.Sprintf("node-%04d", i))
	}
	for _, node := range want {
		w.send(node)
	}
	w.send(want[0])
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { w.pump(ctx); close(done) }()
	var got []string
	for len(got) < len(want) {
		select {
		case e := <-w.wake:
			got = append(got, e.Object.GetName())
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d woken nodes handed on", len(got), len(want))
		}
	}
	select {
	case e := <-w.wake:
		t.Errorf("%s handed on twice", e.Object.GetName())
	case <-time.After(100 * time.Millisecond):
	}
	if !slices.Equal(got, want) {
		t.Errorf("handed on out of order: first %v", got[:5])
	}
	// Woken after the pump drained the rest: handed on too.
	w.send("late")
	select {
	case e := <-w.wake:
		if e.Object.GetName() != "late" {
			t.Errorf("handed on %s, want late", e.Object.GetName())
		}
	case <-time.After(10 * time.Second):
		t.Error("a node woken once the pump was idle was never handed on")
	}
	cancel()
	<-done
}

// TestAnExpiringSlotWakesTheFrontOfItsLine: a slot that expires by itself
// wakes the first two in its line when it does, and no one else; the
// earliest expiry reported wins.
func TestAnExpiringSlotWakesTheFrontOfItsLine(t *testing.T) {
	w := newWaiters()
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	const key = "budget/stagger/"
	for i := range 100 {
		w.set(fmt.Sprintf("node-%03d", i), []string{key}, []string{key}, t0.Add(time.Duration(i)*time.Second))
	}
	w.set("other", []string{"budget/b/"}, []string{"budget/b/"}, t0.Add(-time.Hour))
	w.expires(key, t0.Add(time.Hour))
	w.expires(key, t0.Add(time.Minute)) // reported by a node evaluated later
	w.expires(key, t0.Add(2*time.Minute))
	if wait := w.wakeDue(t0.Add(50 * time.Second)); wait != 10*time.Second {
		t.Errorf("next expiry in %s, want 10s", wait)
	}
	if got := woken(w); len(got) != 0 {
		t.Errorf("woke %v before the slot expired", got)
	}
	if wait := w.wakeDue(t0.Add(time.Minute)); wait != time.Hour {
		t.Errorf("after the expiry, the next in %s, want none (1h)", wait)
	}
	if got := woken(w); !slices.Equal(got, []string{"node-000", "node-001"}) {
		t.Errorf("the slot's expiry woke %v, want [node-000 node-001]", got)
	}
}
