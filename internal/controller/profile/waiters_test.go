package profile

import (
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
		w.set(node, []string{"budget/b/"}, t0.Add(time.Duration([]int{2, 1, 3}[i])*time.Second))
	}
	w.handOver("budget/b/", "leaving", t0)
	var woken []string
	for range 2 {
		select {
		case e := <-w.wake:
			woken = append(woken, e.Object.GetName())
		default:
		}
	}
	if !slices.Equal(woken, []string{"first", "second"}) {
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
