package check

import (
	"fmt"
	"time"
)

// humanDuration writes d for a reason, to the minute, rounded up so a wait
// that has not elapsed never reads as "0m": "45m", "3h12m", "2d3h".
func humanDuration(d time.Duration) string {
	if d <= 0 {
		return "0m"
	}
	minutes := int64((d + time.Minute - 1) / time.Minute)
	days, hours, mins := minutes/(24*60), minutes/60%24, minutes%60
	switch {
	case days > 0 && hours > 0:
		return fmt.Sprintf("%dd%dh", days, hours)
	case days > 0:
		return fmt.Sprintf("%dd", days)
	case hours > 0 && mins > 0:
		return fmt.Sprintf("%dh%dm", hours, mins)
	case hours > 0:
		return fmt.Sprintf("%dh", hours)
	default:
		return fmt.Sprintf("%dm", mins)
	}
}

// weekClock writes t in loc as a weekday and a clock, "Sat 04:00", with
// the date added when t is not within the week after now, so the weekday
// alone cannot be misread: "Thu Dec 24 22:00".
func weekClock(t, now time.Time, loc *time.Location) string {
	t = t.In(loc)
	if t.Sub(now) >= 6*24*time.Hour || t.Before(now.Add(-24*time.Hour)) {
		return t.Format("Mon Jan 2 15:04")
	}
	return t.Format("Mon 15:04")
}

// instant writes an absolute time in UTC, "2026-12-24 22:00 UTC".
func instant(t time.Time) string {
	return t.UTC().Format("2006-01-02 15:04 MST")
}
