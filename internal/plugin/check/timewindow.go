package check

import (
	"context"
	"fmt"
	"time"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

// searchDays bounds how far ahead a time window looks for its next opening
// or closing: four years and a week, so a window shut by a yearly "Feb 29"
// exclusion or open every day but one is still found.
const searchDays = 4*366 + 7

// timeWindow passes inside a weekly window, read on the wall clock of its
// time zone. Each day the window may start on (a weekday listed, or any
// day when none is, and not an excluded date) has one window from start
// to end; an end at or before start is on the next day, so Fri 22:00–04:00
// is Friday's window and closes on Saturday, and start == end is a window
// of a whole day. Windows that touch (every day 08:00–08:00) are one
// opening, so NextChange is when the window really closes.
//
// Wall times are turned into instants by time.Date: a start or end that a
// daylight saving change skips happens as late as the skipped hour
// (02:30 on the last Sunday of March in Europe/Berlin is 03:30 CEST), one
// it repeats is its second occurrence (02:30 CET on the last Sunday of
// October). A window that this makes empty does not open that day.
type timeWindow struct {
	start, end int // minutes after midnight
	weekdays   map[time.Weekday]bool
	yearly     map[monthDay]bool
	dates      map[date]bool
	loc        *time.Location
	desc       string
}

// monthDay is an exclusion that recurs every year, "Dec 24".
type monthDay struct {
	month time.Month
	day   int
}

// date is a calendar day, in no particular time zone.
type date struct {
	year  int
	month time.Month
	day   int
}

func dateOf(t time.Time) date {
	y, m, d := t.Date()
	return date{y, m, d}
}

// add moves the date by n days.
func (d date) add(n int) date {
	return dateOf(time.Date(d.year, d.month, d.day+n, 12, 0, 0, 0, time.UTC))
}

// noon is the date as an instant that no time zone moves to another day.
func (d date) noon() time.Time {
	return time.Date(d.year, d.month, d.day, 12, 0, 0, 0, time.UTC)
}

func (d date) weekday() time.Weekday {
	return d.noon().Weekday()
}

// at is the instant the wall clock in loc shows minute on the date.
func (d date) at(minute int, loc *time.Location) time.Time {
	return time.Date(d.year, d.month, d.day, minute/60, minute%60, 0, 0, loc)
}

func newTimeWindow(cfg *pitstopv1alpha1.TimeWindowCheck) (Check, error) {
	w := &timeWindow{yearly: map[monthDay]bool{}, dates: map[date]bool{}}
	var err error
	if w.start, err = ParseClock("start", cfg.Start); err != nil {
		return nil, err
	}
	if w.end, err = ParseClock("end", cfg.End); err != nil {
		return nil, err
	}
	if w.weekdays, err = ParseWeekdays("weekdays", cfg.Weekdays); err != nil {
		return nil, err
	}
	for i, s := range cfg.Exclude {
		if t, err := time.Parse("Jan 2", s); err == nil {
			w.yearly[monthDay{t.Month(), t.Day()}] = true
		} else if t, err := time.Parse(time.DateOnly, s); err == nil {
			w.dates[dateOf(t)] = true
		} else {
			return nil, fmt.Errorf("exclude[%d]: %q is neither a day of the year (\"Dec 24\") nor a date (\"2026-12-24\")", i, s)
		}
	}
	if w.loc, err = LoadLocation("timeZone", cfg.TimeZone); err != nil {
		return nil, err
	}
	days := "daily"
	if len(w.weekdays) > 0 && len(w.weekdays) < 7 {
		days = weekdayList(w.weekdays)
	}
	w.desc = fmt.Sprintf("window %s %s–%s %s", days, cfg.Start, cfg.End, w.loc)
	return w, nil
}

// ParseClock reads "hh:mm" as minutes after midnight.
func ParseClock(field, s string) (int, error) {
	t, err := time.Parse("15:04", s)
	if err != nil || len(s) != len("15:04") {
		return 0, fmt.Errorf("%s: %q is not a time of day \"hh:mm\"", field, s)
	}
	return t.Hour()*60 + t.Minute(), nil
}

// Evaluate implements Check.
func (w *timeWindow) Evaluate(_ context.Context, c Context) (Result, error) {
	today := dateOf(c.Now.In(w.loc))
	// Only yesterday's window (crossing midnight) and today's can be open.
	for _, d := range []date{today.add(-1), today} {
		if open, end, ok := w.window(d); ok && !c.Now.Before(open) && c.Now.Before(end) {
			return w.openUntil(d, end, c.Now), nil
		}
	}
	shut := w.desc + " is shut"
	if d, ok := w.excludedAt(today, c.Now); ok {
		shut += " on " + d.noon().Format("Jan 2") + " (excluded)"
	}
	for i, d := 0, today; i < searchDays; i, d = i+1, d.add(1) {
		if open, _, ok := w.window(d); ok && open.After(c.Now) {
			return Result{
				Reason:     fmt.Sprintf("%s; opens %s (in %s)", shut, weekClock(open, c.Now, w.loc), humanDuration(open.Sub(c.Now))),
				NextChange: open,
			}, nil
		}
	}
	return Result{Reason: shut + " and does not open within four years"}, nil
}

// openUntil answers for a window that opened on d and ends at end, or
// later when the next day's window starts as it ends.
func (w *timeWindow) openUntil(d date, end time.Time, now time.Time) Result {
	for i := 1; i < searchDays; i++ {
		open, next, ok := w.window(d.add(i))
		if !ok || open.After(end) {
			return Result{
				Passed:     true,
				Reason:     fmt.Sprintf("%s is open until %s (in %s)", w.desc, weekClock(end, now, w.loc), humanDuration(end.Sub(now))),
				NextChange: end,
			}
		}
		end = next
	}
	return Result{Passed: true, Reason: w.desc + " is open and does not close within four years"}
}

// excludedAt finds the excluded date whose window would hold now.
func (w *timeWindow) excludedAt(today date, now time.Time) (date, bool) {
	for _, d := range []date{today.add(-1), today} {
		if open, end, ok := w.span(d); ok && w.startsOn(d) && w.excluded(d) && !now.Before(open) && now.Before(end) {
			return d, true
		}
	}
	return date{}, false
}

// window is the window that starts on d, if d has one.
func (w *timeWindow) window(d date) (open, end time.Time, ok bool) {
	if !w.startsOn(d) || w.excluded(d) {
		return time.Time{}, time.Time{}, false
	}
	return w.span(d)
}

// span is when a window starting on d would be open, whatever the day;
// ok is false when daylight saving leaves nothing of it.
func (w *timeWindow) span(d date) (open, end time.Time, ok bool) {
	endDay := d
	if w.end <= w.start {
		endDay = d.add(1)
	}
	open, end = d.at(w.start, w.loc), endDay.at(w.end, w.loc)
	return open, end, end.After(open)
}

func (w *timeWindow) startsOn(d date) bool {
	return len(w.weekdays) == 0 || w.weekdays[d.weekday()]
}

func (w *timeWindow) excluded(d date) bool {
	return w.yearly[monthDay{d.month, d.day}] || w.dates[d]
}
