package notify

import (
	"fmt"
	"time"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/timewindow"
)

// schedule decides when a notification is due for a node in a state.
type schedule interface {
	// due says whether the notification is due now for a node that
	// entered its state at since and last got it at lastSent, and else
	// when it next will be (zero: never by itself).
	due(state pitstopv1alpha1.MaintenanceState, since, lastSent, now time.Time) (bool, time.Time)
}

func newSchedule(s pitstopv1alpha1.NotificationSchedule) (schedule, error) {
	switch {
	case s.Oneshot != nil:
		if s.Oneshot.Delay.Duration < 0 {
			return nil, fmt.Errorf("oneshot.delay: must not be negative, got %s", s.Oneshot.Delay.Duration)
		}
		return oneshot{delay: s.Oneshot.Delay.Duration}, nil
	case s.Periodic != nil:
		if s.Periodic.Interval.Duration <= 0 {
			return nil, fmt.Errorf("periodic.interval: must be positive, got %s", s.Periodic.Interval.Duration)
		}
		return periodic{interval: s.Periodic.Interval.Duration}, nil
	case s.Scheduled != nil:
		at, err := timewindow.ParseClock("scheduled.at", s.Scheduled.At)
		if err != nil {
			return nil, err
		}
		days, err := timewindow.ParseWeekdays("scheduled.weekdays", s.Scheduled.Weekdays)
		if err != nil {
			return nil, err
		}
		loc, err := timewindow.LoadLocation("scheduled.timeZone", s.Scheduled.TimeZone)
		if err != nil {
			return nil, err
		}
		return scheduled{minute: at, weekdays: days, loc: loc}, nil
	case s.DeadlineAtRisk != nil:
		return atRisk{}, nil
	}
	return nil, fmt.Errorf("oneshot, periodic, scheduled or deadlineAtRisk: one must be set")
}

// atRisk is never due by state: it is sent when a scheduled event is
// found at risk (see Notification.OnDeadlineAtRisk).
type atRisk struct{}

func (atRisk) due(pitstopv1alpha1.MaintenanceState, time.Time, time.Time, time.Time) (bool, time.Time) {
	return false, time.Time{}
}

// oneshot is sent once per entry into the state, delay after it.
type oneshot struct{ delay time.Duration }

func (o oneshot) due(_ pitstopv1alpha1.MaintenanceState, since, lastSent, now time.Time) (bool, time.Time) {
	if !lastSent.Before(since) {
		return false, time.Time{} // sent for this entry
	}
	at := since.Add(o.delay)
	if now.Before(at) {
		return false, at
	}
	return true, time.Time{}
}

// periodic is sent on entry into any state and every interval after,
// except in operational, as the maintenance-controller's is: its
// operational message says once that the node is back.
type periodic struct{ interval time.Duration }

func (p periodic) due(state pitstopv1alpha1.MaintenanceState, since, lastSent, now time.Time) (bool, time.Time) {
	operational := state == pitstopv1alpha1.StateOperational
	switch {
	case lastSent.Before(since) && operational:
		return true, time.Time{}
	case operational:
		return false, time.Time{}
	case lastSent.Before(since):
		return true, now.Add(p.interval)
	}
	next := lastSent.Add(p.interval)
	if now.Before(next) {
		return false, next
	}
	return true, now.Add(p.interval)
}

// scheduled is sent at a time of day on some weekdays to nodes that were
// in the state at that time, and, later that same day, to nodes that
// enter it, as the maintenance-controller's is: once a scheduled day.
type scheduled struct {
	minute   int
	weekdays timewindow.Weekdays // empty: every day
	loc      *time.Location
}

func (s scheduled) due(_ pitstopv1alpha1.MaintenanceState, since, lastSent, now time.Time) (bool, time.Time) {
	last := s.latest(now)
	if !last.IsZero() && lastSent.Before(last) && (!last.Before(since) || sameDay(last, now, s.loc)) {
		return true, s.next(now)
	}
	return false, s.next(now)
}

// sameDay says a and b fall on one calendar day in loc.
func sameDay(a, b time.Time, loc *time.Location) bool {
	ay, am, ad := a.In(loc).Date()
	by, bm, bd := b.In(loc).Date()
	return ay == by && am == bm && ad == bd
}

// latest is the most recent scheduled instant at or before now, within the
// last week.
func (s scheduled) latest(now time.Time) time.Time {
	for d := 0; d <= 7; d++ {
		if t, ok := s.on(now, -d); ok && !t.After(now) {
			return t
		}
	}
	return time.Time{}
}

// next is the first scheduled instant after now.
func (s scheduled) next(now time.Time) time.Time {
	for d := 0; d <= 8; d++ {
		if t, ok := s.on(now, d); ok && t.After(now) {
			return t
		}
	}
	return time.Time{}
}

// on is the scheduled instant on the day days after now's (in the
// schedule's time zone), if the schedule sends that weekday.
func (s scheduled) on(now time.Time, days int) (time.Time, bool) {
	day := now.In(s.loc).AddDate(0, 0, days)
	sends := len(s.weekdays) == 0 || s.weekdays[day.Weekday()]
	return time.Date(day.Year(), day.Month(), day.Day(), s.minute/60, s.minute%60, 0, 0, s.loc), sends
}
