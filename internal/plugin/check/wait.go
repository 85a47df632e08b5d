package check

import (
	"context"
	"errors"
	"fmt"
	"time"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/timewindow"
)

// wait passes once the node has been in its current state (since Since)
// for duration. A zero Since means nobody recorded when the node entered
// its state; the check then fails rather than pass at once, because a wait
// is a safety delay.
type wait struct {
	duration time.Duration
}

func newWait(cfg *pitstopv1alpha1.WaitCheck) (Check, error) {
	if err := positive("duration", cfg.Duration.Duration); err != nil {
		return nil, err
	}
	return &wait{duration: cfg.Duration.Duration}, nil
}

// Evaluate implements Check.
func (w *wait) Evaluate(_ context.Context, c Context) (Result, error) {
	if c.Since.IsZero() {
		return Result{Reason: "when the node entered " + stateName(c) + " is unknown"}, nil
	}
	waited, due := c.Now.Sub(c.Since), c.Since.Add(w.duration)
	if !c.Now.Before(due) {
		return Result{Passed: true, Reason: fmt.Sprintf("%s for %s, at least %s", stateName(c), humanDuration(waited), humanDuration(w.duration))}, nil
	}
	return Result{
		Reason:     fmt.Sprintf("%s for %s of %s; passes at %s (in %s)", stateName(c), humanDuration(waited), humanDuration(w.duration), instant(due), humanDuration(due.Sub(c.Now))),
		NextChange: due,
	}, nil
}

// stateName names the state the node waits in, "maintenance-required".
func stateName(c Context) string {
	if c.State == "" {
		return "its state"
	}
	return string(c.State)
}

// waitExclude is wait, with the time on the excluded weekdays (in the
// time zone) not counted: a 48h wait that excludes Sat and Sun and starts
// Friday 12:00 passes on Tuesday 12:00. Time is counted in real elapsed
// time, so a day with a daylight saving change counts 23h or 25h.
type waitExclude struct {
	duration time.Duration
	exclude  timewindow.Weekdays
	loc      *time.Location
	desc     string
}

func newWaitExclude(cfg *pitstopv1alpha1.WaitExcludeCheck) (Check, error) {
	if err := positive("duration", cfg.Duration.Duration); err != nil {
		return nil, err
	}
	exclude, err := timewindow.ParseWeekdays("exclude", cfg.Exclude)
	if err != nil {
		return nil, err
	}
	if len(exclude) == 7 {
		return nil, errors.New("exclude: every weekday is excluded, so the wait would never end")
	}
	loc, err := timewindow.LoadLocation("timeZone", cfg.TimeZone)
	if err != nil {
		return nil, err
	}
	desc := fmt.Sprintf("not counting %s (%s)", exclude, loc)
	return &waitExclude{duration: cfg.Duration.Duration, exclude: exclude, loc: loc, desc: desc}, nil
}

// Evaluate implements Check.
func (w *waitExclude) Evaluate(_ context.Context, c Context) (Result, error) {
	if c.Since.IsZero() {
		return Result{Reason: "when the node entered " + stateName(c) + " is unknown"}, nil
	}
	counted := w.counted(c.Since, c.Now)
	if counted >= w.duration {
		return Result{Passed: true, Reason: fmt.Sprintf("%s for at least %s, %s", stateName(c), humanDuration(w.duration), w.desc)}, nil
	}
	from := c.Now
	if c.Since.After(from) { // Since ahead of this replica's clock.
		from = c.Since
	}
	due := w.due(from, w.duration-counted)
	return Result{
		Reason: fmt.Sprintf("%s for %s of %s, %s; passes at %s (in %s)", stateName(c), humanDuration(counted),
			humanDuration(w.duration), w.desc, instant(due), humanDuration(due.Sub(c.Now))),
		NextChange: due,
	}, nil
}

// counted is the time between from and to not on an excluded day, or the
// wait's duration once it reaches it (so a long-past Since costs nothing).
func (w *waitExclude) counted(from, to time.Time) time.Duration {
	var counted time.Duration
	for t := from; t.Before(to) && counted < w.duration; {
		day := timewindow.DateOf(t.In(w.loc))
		end := day.Add(1).At(0, w.loc)
		if end.After(to) {
			end = to
		}
		if !w.exclude[day.Weekday()] {
			counted += end.Sub(t)
		}
		t = end
	}
	return counted
}

// due is when remaining counted time will have passed after from.
func (w *waitExclude) due(from time.Time, remaining time.Duration) time.Time {
	t := from
	for {
		day := timewindow.DateOf(t.In(w.loc))
		midnight := day.Add(1).At(0, w.loc)
		if !w.exclude[day.Weekday()] {
			left := midnight.Sub(t)
			if remaining <= left {
				return t.Add(remaining)
			}
			remaining -= left
		}
		t = midnight
	}
}
