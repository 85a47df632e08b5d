package check

import (
	"context"
	"fmt"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/timewindow"
)

// timeWindow passes inside a weekly window (timewindow.Window), and says
// until when it is open or when it opens.
type timeWindow struct {
	window *timewindow.Window
	desc   string
}

func newTimeWindow(cfg *pitstopv1alpha1.TimeWindowCheck) (Check, error) {
	w, err := timewindow.New(cfg.Start, cfg.End, cfg.Weekdays, cfg.Exclude, cfg.TimeZone)
	if err != nil {
		return nil, err
	}
	days := "daily"
	if n := len(w.Weekdays()); n > 0 && n < 7 {
		days = w.Weekdays().String()
	}
	return &timeWindow{window: w, desc: fmt.Sprintf("window %s %s–%s %s", days, cfg.Start, cfg.End, w.Location())}, nil
}

// Evaluate implements Check.
func (w *timeWindow) Evaluate(_ context.Context, c Context) (Result, error) {
	s, loc := w.window.At(c.Now), w.window.Location()
	switch {
	case s.Open && s.Change.IsZero():
		return Result{Passed: true, Reason: w.desc + " is open and does not close within four years"}, nil
	case s.Open:
		return Result{
			Passed:     true,
			Reason:     fmt.Sprintf("%s is open until %s (in %s)", w.desc, weekClock(s.Change, c.Now, loc), humanDuration(s.Change.Sub(c.Now))),
			NextChange: s.Change,
		}, nil
	}
	shut := w.desc + " is shut"
	if s.Excluded != nil {
		shut += " on " + s.Excluded.Noon().Format("Jan 2") + " (excluded)"
	}
	if s.Change.IsZero() {
		return Result{Reason: shut + " and does not open within four years"}, nil
	}
	return Result{
		Reason:     fmt.Sprintf("%s; opens %s (in %s)", shut, weekClock(s.Change, c.Now, loc), humanDuration(s.Change.Sub(c.Now))),
		NextChange: s.Change,
	}, nil
}
