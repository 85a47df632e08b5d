package profile

import (
	"slices"
	"testing"
	"time"
)

func TestRetryAfterDoublesUpToFiveMinutes(t *testing.T) {
	for attempt, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 9: 256 * time.Second, 10: 5 * time.Minute, 100: 5 * time.Minute} {
		if got := retryAfter(attempt); got != want {
			t.Errorf("retryAfter(%d) = %s, want %s", attempt, got, want)
		}
	}
}

// TestWaitersWakeTheLongestWaitingFirst: a freed budget wakes the two nodes
// that have waited longest on it, never the node that freed it, and
// nothing waiting on another budget.
func TestWaitersWakeTheLongestWaitingFirst(t *testing.T) {
	w := newWaiters()
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	w.set("late", []string{"budget/a/"}, t0.Add(3*time.Minute))
	w.set("first", []string{"budget/a/"}, t0)
	w.set("second", []string{"budget/a/", "profile/p"}, t0.Add(time.Minute))
	w.set("other", []string{"budget/b/"}, t0.Add(-time.Hour))
	w.set("gone", []string{"budget/a/"}, t0.Add(-time.Hour))
	w.set("gone", nil, time.Time{}) // no longer waiting
	w.notify("budget/a/", "first")
	var woken []string
	for len(w.wake) > 0 {
		woken = append(woken, (<-w.wake).Object.GetName())
	}
	if want := []string{"second", "late"}; !slices.Equal(woken, want) {
		t.Errorf("woke %v, want %v", woken, want)
	}
	// A second slot freed before they are evaluated wakes the next ones.
	w.set("later", []string{"budget/a/"}, t0.Add(4*time.Minute))
	if got := w.oldest("budget/a/", ""); !slices.Equal(got, []string{"first", "later"}) {
		t.Errorf("second wake-up woke %v, want [first later]", got)
	}
}
