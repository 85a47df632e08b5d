package check

import (
	"context"
	"errors"
	"fmt"
	"time"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

// freeze fails while any of its periods [start, end) holds. Periods that
// overlap or touch hold as one, so NextChange is when the freeze really
// ends; when none holds it is when the next one starts.
type freeze struct {
	periods []pitstopv1alpha1.FreezePeriod
}

func newFreeze(cfg *pitstopv1alpha1.FreezeCheck) (Check, error) {
	if len(cfg.Periods) == 0 {
		return nil, errors.New("periods: must not be empty")
	}
	for i, p := range cfg.Periods {
		if !p.End.After(p.Start.Time) {
			return nil, fmt.Errorf("periods[%d]: end %s must be after start %s", i, instant(p.End.Time), instant(p.Start.Time))
		}
	}
	return &freeze{periods: cfg.Periods}, nil
}

// Evaluate implements Check.
func (f *freeze) Evaluate(_ context.Context, c Context) (Result, error) {
	active := -1
	var end, next time.Time
	nextReason := ""
	for i, p := range f.periods {
		switch {
		case f.holds(i, c.Now) && (active < 0 || p.End.After(end)):
			active, end = i, p.End.Time
		case p.Start.After(c.Now) && (next.IsZero() || p.Start.Time.Before(next)):
			next, nextReason = p.Start.Time, p.Reason
		}
	}
	if active < 0 {
		if next.IsZero() {
			return Result{Passed: true, Reason: "no freeze holds or is planned"}, nil
		}
		return Result{Passed: true, Reason: fmt.Sprintf("no freeze holds; the next%s starts %s", quoted(nextReason), instant(next)), NextChange: next}, nil
	}
	// Extend through periods that start before the freeze ends.
	for extended := true; extended; {
		extended = false
		for _, p := range f.periods {
			if !p.Start.After(end) && p.End.After(end) {
				end, extended = p.End.Time, true
			}
		}
	}
	return Result{
		Reason:     fmt.Sprintf("freeze%s holds until %s (in %s)", quoted(f.periods[active].Reason), instant(end), humanDuration(end.Sub(c.Now))),
		NextChange: end,
	}, nil
}

func (f *freeze) holds(i int, now time.Time) bool {
	p := f.periods[i]
	return !now.Before(p.Start.Time) && now.Before(p.End.Time)
}

// quoted writes a period's reason into a sentence, or nothing without one.
func quoted(reason string) string {
	if reason == "" {
		return ""
	}
	return fmt.Sprintf(" %q", reason)
}
