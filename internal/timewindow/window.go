// Package timewindow is the calendar arithmetic of maintenance windows, on
// the wall clock of a time zone: a weekly window with excluded dates, the
// days, clocks and weekdays of the API. It is pure (no I/O, no clock of its
// own): the timeWindow check and notification schedules build on it.
package timewindow

import (
	"fmt"
	"time"
)

// SearchDays bounds how far ahead a window looks for its next opening or
// closing: four years and a week, so a window shut by a yearly "Feb 29"
// exclusion or open every day but one is still found.
const SearchDays = 4*366 + 7

// Window is a weekly window, read on the wall clock of its time zone. Each
// day the window may start on (a weekday listed, or any day when none is,
// and not an excluded date) has one window from start to end; an end at or
// before start is on the next day, so Fri 22:00–04:00 is Friday's window
// and closes on Saturday, and start == end is a window of a whole day.
// Windows that touch (every day 08:00–08:00) are one opening, so a State's
// Change is when the window really closes.
//
// Wall times are turned into instants by time.Date: a start or end that a
// daylight saving change skips happens as late as the skipped hour
// (02:30 on the last Sunday of March in Europe/Berlin is 03:30 CEST), one
// it repeats is its second occurrence (02:30 CET on the last Sunday of
// October). A window that this makes empty does not open that day.
type Window struct {
	start, end int // minutes after midnight
	weekdays   Weekdays
	yearly     map[monthDay]bool
	dates      map[Date]bool
	loc        *time.Location
}

// monthDay is an exclusion that recurs every year, "Dec 24".
type monthDay struct {
	month time.Month
	day   int
}

// New builds a window from start to end ("hh:mm") on weekdays (none: every
// day) in the time zone tz (empty: UTC), but not on the dates of exclude:
// days of the year ("Dec 24") or dates ("2026-12-24"). Errors name the
// field of the API that is wrong.
func New[S ~string](start, end string, weekdays []S, exclude []string, tz string) (*Window, error) {
	w := &Window{yearly: map[monthDay]bool{}, dates: map[Date]bool{}}
	var err error
	if w.start, err = ParseClock("start", start); err != nil {
		return nil, err
	}
	if w.end, err = ParseClock("end", end); err != nil {
		return nil, err
	}
	if w.weekdays, err = ParseWeekdays("weekdays", weekdays); err != nil {
		return nil, err
	}
	for i, s := range exclude {
		if t, err := time.Parse("Jan 2", s); err == nil {
			w.yearly[monthDay{t.Month(), t.Day()}] = true
		} else if t, err := time.Parse(time.DateOnly, s); err == nil {
			w.dates[DateOf(t)] = true
		} else {
			return nil, fmt.Errorf("exclude[%d]: %q is neither a day of the year (\"Dec 24\") nor a date (\"2026-12-24\")", i, s)
		}
	}
	if w.loc, err = LoadLocation("timeZone", tz); err != nil {
		return nil, err
	}
	return w, nil
}

// Location is the window's time zone.
func (w *Window) Location() *time.Location { return w.loc }

// Weekdays are the days the window starts on; every day when empty.
func (w *Window) Weekdays() Weekdays { return w.weekdays }

// State is a window's answer at an instant.
type State struct {
	Open bool
	// Change is when the window next closes (Open) or opens; zero when
	// that is not within SearchDays.
	Change time.Time
	// Excluded is the excluded date whose window would hold the instant,
	// when the window is shut for that alone.
	Excluded *Date
}

// At says whether the window is open at now, and until when.
func (w *Window) At(now time.Time) State {
	today := DateOf(now.In(w.loc))
	// Only yesterday's window (crossing midnight) and today's can be open.
	for _, d := range []Date{today.Add(-1), today} {
		if open, end, ok := w.window(d); ok && !now.Before(open) && now.Before(end) {
			return State{Open: true, Change: w.closes(d, end)}
		}
	}
	var s State
	if d, ok := w.excludedAt(today, now); ok {
		s.Excluded = &d
	}
	for i, d := 0, today; i < SearchDays; i, d = i+1, d.Add(1) {
		if open, _, ok := w.window(d); ok && open.After(now) {
			s.Change = open
			break
		}
	}
	return s
}

// closes is when a window that opened on d and ends at end really closes:
// later when the next day's window starts as it ends. Zero when not
// within SearchDays.
func (w *Window) closes(d Date, end time.Time) time.Time {
	for i := 1; i < SearchDays; i++ {
		open, next, ok := w.window(d.Add(i))
		if !ok || open.After(end) {
			return end
		}
		end = next
	}
	return time.Time{}
}

// excludedAt finds the excluded date whose window would hold now.
func (w *Window) excludedAt(today Date, now time.Time) (Date, bool) {
	for _, d := range []Date{today.Add(-1), today} {
		if open, end, ok := w.span(d); ok && w.startsOn(d) && w.excluded(d) && !now.Before(open) && now.Before(end) {
			return d, true
		}
	}
	return Date{}, false
}

// window is the window that starts on d, if d has one.
func (w *Window) window(d Date) (open, end time.Time, ok bool) {
	if !w.startsOn(d) || w.excluded(d) {
		return time.Time{}, time.Time{}, false
	}
	return w.span(d)
}

// span is when a window starting on d would be open, whatever the day;
// ok is false when daylight saving leaves nothing of it.
func (w *Window) span(d Date) (open, end time.Time, ok bool) {
	endDay := d
	if w.end <= w.start {
		endDay = d.Add(1)
	}
	open, end = d.At(w.start, w.loc), endDay.At(w.end, w.loc)
	return open, end, end.After(open)
}

func (w *Window) startsOn(d Date) bool {
	return len(w.weekdays) == 0 || w.weekdays[d.Weekday()]
}

func (w *Window) excluded(d Date) bool {
	return w.yearly[monthDay{d.Month, d.Day}] || w.dates[d]
}
