package manager

import (
	"errors"
	"testing"
	"time"
)

func TestEvictionBoundsAreCheckedNamingTheFlag(t *testing.T) {
	for _, tc := range []struct {
		name string
		tune func(*Options)
		flag string // empty: valid
	}{
		{"the defaults", func(*Options) {}, ""},
		{"no eviction in flight", func(o *Options) { o.NodeMaintenance.Evictions.InFlight = 0 }, "evictions-in-flight"},
		{"a rate of nothing a second", func(o *Options) { o.NodeMaintenance.Evictions.Rate = 0 }, "eviction-rate"},
		{"a negative burst", func(o *Options) { o.NodeMaintenance.Evictions.Burst = -1 }, "eviction-burst"},
		{"a negative settle period", func(o *Options) { o.NodeMaintenance.BudgetSettle = -time.Second }, "pdb-status-settle"},
		{"no settle period: budgets trusted at once after a gap", func(o *Options) { o.NodeMaintenance.BudgetSettle = 0 }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			tc.tune(&o)
			err := o.Validate()
			var fe *FlagError
			switch {
			case tc.flag == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.flag != "" && (!errors.As(err, &fe) || fe.Flag != tc.flag):
				t.Errorf("got %v, want an error naming --%s", err, tc.flag)
			}
		})
	}
}
