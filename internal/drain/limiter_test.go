package drain

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestLimiterBoundsInFlightAndRate runs many acquirers at once and checks
// that no more than InFlight ever hold a slot, and that no more than the
// burst plus the rate's share of the elapsed time have started.
func TestLimiterBoundsInFlightAndRate(t *testing.T) {
	l := NewLimiter(LimiterOptions{InFlight: 3, Rate: 100, Burst: 5})
	var inFlight, most, started atomic.Int32
	begin := time.Now()
	var wg sync.WaitGroup
	for range 40 {
		wg.Go(func() {
			release, err := l.Acquire(t.Context())
			if err != nil {
				t.Error(err)
				return
			}
			started.Add(1)
			if allowed := 5 + int32(time.Since(begin).Seconds()*100) + 1; started.Load() > allowed {
				t.Errorf("%d started after %s, more than burst 5 + 100/s allow", started.Load(), time.Since(begin))
			}
			n := inFlight.Add(1)
			for {
				m := most.Load()
				if n <= m || most.CompareAndSwap(m, n) {
					break
				}
			}
			time.Sleep(2 * time.Millisecond)
			inFlight.Add(-1)
			release()
		})
	}
	wg.Wait()
	if most.Load() > 3 {
		t.Errorf("%d in flight at once, want at most 3", most.Load())
	}
	if took := time.Since(begin); took < 300*time.Millisecond {
		t.Errorf("40 requests at 100/s with a burst of 5 took %s, want at least 0.35 s", took)
	}
}

func TestLimiterAcquireGivesUpWithItsContext(t *testing.T) {
	l := NewLimiter(LimiterOptions{InFlight: 1, Rate: 1, Burst: 1})
	release, err := l.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if _, err := l.Acquire(ctx); err == nil {
		t.Fatal("a second Acquire with the only slot taken succeeded")
	}
	release()
	// The slot is back, but the bucket's one token is spent: the wait for
	// the next outlasts a short context, and gives the slot back.
	ctx2, cancel2 := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel2()
	if _, err := l.Acquire(ctx2); err == nil {
		t.Fatal("Acquire past the rate succeeded within 20 ms at 1/s")
	}
	if len(l.slots) != 0 {
		t.Errorf("%d slots held after failed acquires, want 0", len(l.slots))
	}
}

// TestLimiterCountsWhatItHolds: InFlight counts the slots taken and not yet
// given back.
func TestLimiterCountsWhatItHolds(t *testing.T) {
	l := NewLimiter(LimiterOptions{InFlight: 3, Rate: 1000, Burst: 3})
	var releases []func()
	for range 2 {
		release, err := l.Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, release)
	}
	if n := l.InFlight(); n != 2 {
		t.Errorf("%d in flight with two slots taken, want 2", n)
	}
	releases[0]()
	if n := l.InFlight(); n != 1 {
		t.Errorf("%d in flight once one was given back, want 1", n)
	}
	releases[1]()
	if n := l.InFlight(); n != 0 {
		t.Errorf("%d in flight once all were given back, want 0", n)
	}
}
