package nodemaintenance

import (
	"fmt"
	"testing"
	"time"
)

func TestProgressWritesSlowWithTheDrainsUnderWay(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		// others are the other NodeMaintenances' last writes, ago.
		others []time.Duration
		// last is this one's last write, ago.
		last time.Duration
		want time.Duration
	}{
		{name: "one drain: a write a second", last: 300 * time.Millisecond, want: 700 * time.Millisecond},
		{name: "one drain, due", last: time.Second, want: 0},
		{name: "nine others: still a second", others: repeat(9, time.Second), last: 300 * time.Millisecond, want: 700 * time.Millisecond},
		{name: "49 others: five seconds", others: repeat(49, 2*time.Second), last: time.Second, want: 4 * time.Second},
		{name: "a hundred others: ten seconds", others: repeat(99, 2*time.Second), last: time.Second, want: 9 * time.Second},
		{name: "two hundred others: capped", others: repeat(200, 2*time.Second), last: time.Second, want: 14 * time.Second},
		{name: "others that stopped writing do not count", others: repeat(100, time.Minute), last: 300 * time.Millisecond, want: 700 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newWritePacer()
			for i, ago := range tc.others {
				p.record(fmt.Sprintf("other-%d", i), now.Add(-ago))
			}
			p.record("nm", now.Add(-tc.last))
			if got := p.wait("nm", now); got != tc.want {
				t.Errorf("wait = %s, want %s", got, tc.want)
			}
		})
	}
	t.Run("never written: at once", func(t *testing.T) {
		p := newWritePacer()
		for i := range 100 {
			p.record(fmt.Sprintf("other-%d", i), now)
		}
		if got := p.wait("nm", now); got != 0 {
			t.Errorf("wait = %s, want 0", got)
		}
	})
	t.Run("forgotten: at once", func(t *testing.T) {
		p := newWritePacer()
		p.record("nm", now)
		p.forget("nm")
		if got := p.wait("nm", now); got != 0 {
			t.Errorf("wait = %s, want 0", got)
		}
	})
}

func repeat(n int, d time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d
	}
	return out
}
