package timewindow

import (
	"fmt"
	"strings"
	"time"
)

// ParseClock reads "hh:mm" as minutes after midnight; field names what is
// read in the error.
func ParseClock(field, s string) (int, error) {
	t, err := time.Parse("15:04", s)
	if err != nil || len(s) != len("15:04") {
		return 0, fmt.Errorf("%s: %q is not a time of day \"hh:mm\"", field, s)
	}
	return t.Hour()*60 + t.Minute(), nil
}

// LoadLocation resolves an IANA time zone name, UTC when empty.
func LoadLocation(field, name string) (*time.Location, error) {
	if name == "" {
		return time.UTC, nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("%s: unknown time zone %q", field, name)
	}
	return loc, nil
}

// Weekdays is a set of days of the week.
type Weekdays map[time.Weekday]bool

// ParseWeekdays reads three-letter weekday names ("Mon", "Fri").
func ParseWeekdays[S ~string](field string, days []S) (Weekdays, error) {
	set := make(Weekdays, len(days))
	for i, d := range days {
		wd, ok := weekdayNames[string(d)]
		if !ok {
			return nil, fmt.Errorf("%s[%d]: unknown weekday %q, want one of Mon, Tue, Wed, Thu, Fri, Sat, Sun", field, i, d)
		}
		set[wd] = true
	}
	return set, nil
}

var weekdayNames = map[string]time.Weekday{
	"Mon": time.Monday, "Tue": time.Tuesday, "Wed": time.Wednesday, "Thu": time.Thursday,
	"Fri": time.Friday, "Sat": time.Saturday, "Sun": time.Sunday,
}

// String writes the set as "Mon,Fri", Monday first.
func (set Weekdays) String() string {
	var names []string
	for i := range 7 {
		wd := time.Weekday((i + 1) % 7)
		if set[wd] {
			names = append(names, wd.String()[:3])
		}
	}
	return strings.Join(names, ",")
}

// Date is a calendar day, in no particular time zone.
type Date struct {
	Year  int
	Month time.Month
	Day   int
}

// DateOf is the day t falls on, in t's location.
func DateOf(t time.Time) Date {
	y, m, d := t.Date()
	return Date{y, m, d}
}

// Add moves the date by n days.
func (d Date) Add(n int) Date {
	return DateOf(time.Date(d.Year, d.Month, d.Day+n, 12, 0, 0, 0, time.UTC))
}

// Noon is the date as an instant that no time zone moves to another day.
func (d Date) Noon() time.Time {
	return time.Date(d.Year, d.Month, d.Day, 12, 0, 0, 0, time.UTC)
}

// Weekday is the day of the week of the date.
func (d Date) Weekday() time.Weekday { return d.Noon().Weekday() }

// At is the instant the wall clock in loc shows minute (after midnight)
// on the date. A wall time that a daylight saving change skips comes as
// late as the skipped hour; one it repeats is its second occurrence
// (time.Date).
func (d Date) At(minute int, loc *time.Location) time.Time {
	return time.Date(d.Year, d.Month, d.Day, minute/60, minute%60, 0, 0, loc)
}
