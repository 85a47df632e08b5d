//go:build linux

package bench

import (
	"fmt"
	"testing"
	"time"
)

// TestListSchedule: the overhead-free schedule the fleet benchmark compares
// its makespan with gives each node, in the order of admission, the slot
// that comes free first.
func TestListSchedule(t *testing.T) {
	t0 := time.Now()
	s := time.Second
	for _, tc := range []struct {
		name   string
		drains []time.Duration // in the order of admission
		budget int
		want   time.Duration
	}{
		{"equal drains run in rounds", []time.Duration{s, s, s, s}, 2, 2 * (s + 10*s)},
		{"a long drain holds its slot; the other slot takes the rest", []time.Duration{20 * s, s, s, s}, 2, 3 * (s + 10*s)},
		{"the end waits for the last node admitted", []time.Duration{s, 2 * s, 3 * s}, 2, s + 10*s + 3*s + 10*s},
		{"one slot runs them one after the other", []time.Duration{s, 2 * s}, 1, 3*s + 20*s},
	} {
		t.Run(tc.name, func(t *testing.T) {
			timelines := map[string]*timeline{}
			for i, d := range tc.drains {
				created := t0.Add(time.Duration(i) * time.Millisecond) // admitted in this order
				timelines[fmt.Sprint("node-", i)] = &timeline{created: created, drained: created.Add(d)}
			}
			timelines["never admitted"] = &timeline{}
			if got := listSchedule(timelines, tc.budget, 10*s); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}
