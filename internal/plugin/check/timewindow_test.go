package check

import (
	"testing"
	"time"
	_ "time/tzdata" // The tests must not depend on the host's zoneinfo.

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

func TestTimeWindow(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	window := func(start, end, tz string, days []pitstopv1alpha1.Weekday, exclude ...string) pitstopv1alpha1.CheckInstance {
		return pitstopv1alpha1.CheckInstance{TimeWindow: &pitstopv1alpha1.TimeWindowCheck{
			Start: start, End: end, TimeZone: tz, Weekdays: days, Exclude: exclude,
		}}
	}
	n := node("n1")
	at := func(now time.Time) Context { return Context{Node: &n, Now: now} }
	fri := []pitstopv1alpha1.Weekday{"Fri"}
	sat := []pitstopv1alpha1.Weekday{"Sat"}
	inBerlin := func(month time.Month, day, hour, minute int) time.Time {
		return time.Date(2026, month, day, hour, minute, 0, 0, berlin)
	}
	utc := func(year int, month time.Month, day, hour, minute int) time.Time {
		return time.Date(year, month, day, hour, minute, 0, 0, time.UTC)
	}

	runCases(t, map[string]evalCase{
		"is shut before the window opens on its weekday": {
			inst: window("22:00", "04:00", "Europe/Berlin", fri),
			ctx:  at(inBerlin(time.June, 12, 18, 48)), // Friday
			want: Result{
				Reason:     "window Fri 22:00–04:00 Europe/Berlin is shut; opens Fri 22:00 (in 3h12m)",
				NextChange: inBerlin(time.June, 12, 22, 0),
			},
		},
		"opens exactly at its start": {
			inst: window("22:00", "04:00", "Europe/Berlin", fri),
			ctx:  at(inBerlin(time.June, 12, 22, 0)),
			want: Result{
				Passed:     true,
				Reason:     "window Fri 22:00–04:00 Europe/Berlin is open until Sat 04:00 (in 6h)",
				NextChange: inBerlin(time.June, 13, 4, 0),
			},
		},
		"a window crossing midnight stays open on the next day": {
			inst: window("22:00", "04:00", "Europe/Berlin", fri),
			ctx:  at(inBerlin(time.June, 13, 1, 0)), // Saturday
			want: Result{
				Passed:     true,
				Reason:     "window Fri 22:00–04:00 Europe/Berlin is open until Sat 04:00 (in 3h)",
				NextChange: inBerlin(time.June, 13, 4, 0),
			},
		},
		"closes exactly at its end, and dates an opening six days away or more": {
			inst: window("22:00", "04:00", "Europe/Berlin", fri),
			ctx:  at(inBerlin(time.June, 13, 4, 0)),
			want: Result{
				Reason:     "window Fri 22:00–04:00 Europe/Berlin is shut; opens Fri Jun 19 22:00 (in 6d18h)",
				NextChange: inBerlin(time.June, 19, 22, 0),
			},
		},
		"does not open on a day that is not its start day": {
			inst: window("22:00", "04:00", "Europe/Berlin", fri),
			ctx:  at(inBerlin(time.June, 13, 22, 30)), // Saturday
			want: Result{
				Reason:     "window Fri 22:00–04:00 Europe/Berlin is shut; opens Fri 22:00 (in 5d23h)",
				NextChange: inBerlin(time.June, 19, 22, 0),
			},
		},
		"is open every day without weekdays, in UTC without a time zone": {
			inst: window("09:00", "17:00", "", nil),
			ctx:  at(noon),
			want: Result{Passed: true, Reason: "window daily 09:00–17:00 UTC is open until Wed 17:00 (in 5h)", NextChange: utc(2026, time.June, 10, 17, 0)},
		},
		"lists its weekdays from Monday": {
			inst: window("09:00", "17:00", "", []pitstopv1alpha1.Weekday{"Fri", "Mon"}),
			ctx:  at(noon), // Wednesday
			want: Result{Reason: "window Mon,Fri 09:00–17:00 UTC is shut; opens Fri 09:00 (in 1d21h)", NextChange: utc(2026, time.June, 12, 9, 0)},
		},
		"with start equal to end is open a whole day": {
			inst: window("08:00", "08:00", "", []pitstopv1alpha1.Weekday{"Mon"}),
			ctx:  at(utc(2026, time.June, 15, 20, 0)), // Monday
			want: Result{Passed: true, Reason: "window Mon 08:00–08:00 UTC is open until Tue 08:00 (in 12h)", NextChange: utc(2026, time.June, 16, 8, 0)},
		},
		"joins windows that touch, and closes where the chain breaks": {
			inst: window("08:00", "08:00", "", nil, "2026-06-14"),
			ctx:  at(noon),
			want: Result{Passed: true, Reason: "window daily 08:00–08:00 UTC is open until Sun 08:00 (in 3d20h)", NextChange: utc(2026, time.June, 14, 8, 0)},
		},
		"stays open when nothing ever closes it": {
			inst: window("00:00", "00:00", "", nil),
			ctx:  at(noon),
			want: Result{Passed: true, Reason: "window daily 00:00–00:00 UTC is open and does not close within four years"},
		},
		"is shut on a yearly excluded date": {
			inst: window("22:00", "04:00", "", nil, "Dec 24"),
			ctx:  at(utc(2026, time.December, 24, 23, 0)),
			want: Result{Reason: "window daily 22:00–04:00 UTC is shut on Dec 24 (excluded); opens Fri 22:00 (in 23h)", NextChange: utc(2026, time.December, 25, 22, 0)},
		},
		"excludes by the day a window starts on, so the previous night's window closes normally": {
			inst: window("22:00", "04:00", "", nil, "Dec 24"),
			ctx:  at(utc(2026, time.December, 24, 2, 0)),
			want: Result{Passed: true, Reason: "window daily 22:00–04:00 UTC is open until Thu 04:00 (in 2h)", NextChange: utc(2026, time.December, 24, 4, 0)},
		},
		"applies a yearly exclusion every year": {
			inst: window("22:00", "04:00", "", nil, "Dec 24"),
			ctx:  at(utc(2031, time.December, 24, 23, 0)),
			want: Result{Reason: "window daily 22:00–04:00 UTC is shut on Dec 24 (excluded); opens Thu 22:00 (in 23h)", NextChange: utc(2031, time.December, 25, 22, 0)},
		},
		"applies a dated exclusion only on that date": {
			inst: window("22:00", "04:00", "", nil, "2026-12-24"),
			ctx:  at(utc(2027, time.December, 24, 23, 0)),
			want: Result{Passed: true, Reason: "window daily 22:00–04:00 UTC is open until Sat 04:00 (in 5h)", NextChange: utc(2027, time.December, 25, 4, 0)},
		},
		"skips excluded dates when looking for the next opening": {
			inst: window("22:00", "04:00", "Europe/Berlin", fri, "2026-06-12", "Jun 19"),
			ctx:  at(inBerlin(time.June, 12, 23, 0)),
			want: Result{
				Reason:     "window Fri 22:00–04:00 Europe/Berlin is shut on Jun 12 (excluded); opens Fri Jun 26 22:00 (in 13d23h)",
				NextChange: inBerlin(time.June, 26, 22, 0),
			},
		},
		"shuts a window on a yearly Feb 29 in leap years": {
			inst: window("10:00", "11:00", "", []pitstopv1alpha1.Weekday{"Tue"}, "Feb 29"),
			ctx:  at(utc(2028, time.February, 29, 10, 30)),
			want: Result{Reason: "window Tue 10:00–11:00 UTC is shut on Feb 29 (excluded); opens Tue Mar 7 10:00 (in 6d23h)", NextChange: utc(2028, time.March, 7, 10, 0)},
		},
		"looks years ahead for where a chain of windows breaks": {
			inst: window("00:00", "00:00", "", nil, "Feb 29"),
			ctx:  at(noon),
			want: Result{Passed: true, Reason: "window daily 00:00–00:00 UTC is open until Tue Feb 29 00:00 (in 628d12h)", NextChange: utc(2028, time.February, 29, 0, 0)},
		},

		// Daylight saving: Europe/Berlin moves from CET (+1) to CEST (+2) at
		// 02:00 on Sunday 2026-03-29 and back at 03:00 on Sunday 2026-10-25.
		"closes at the wall-clock end on the night clocks go forward, an hour sooner": {
			inst: window("22:00", "04:00", "Europe/Berlin", sat),
			ctx:  at(inBerlin(time.March, 28, 23, 0)), // 22:00 UTC
			want: Result{
				Passed:     true,
				Reason:     "window Sat 22:00–04:00 Europe/Berlin is open until Sun 04:00 (in 4h)",
				NextChange: utc(2026, time.March, 29, 2, 0),
			},
		},
		"closes at the wall-clock end on the night clocks go back, an hour later": {
			inst: window("22:00", "04:00", "Europe/Berlin", sat),
			ctx:  at(inBerlin(time.October, 24, 23, 0)), // 21:00 UTC
			want: Result{
				Passed:     true,
				Reason:     "window Sat 22:00–04:00 Europe/Berlin is open until Sun 04:00 (in 6h)",
				NextChange: utc(2026, time.October, 25, 3, 0),
			},
		},
		"opens at the wall-clock start after clocks went forward, 22 real hours later": {
			inst: window("12:00", "13:00", "Europe/Berlin", nil),
			ctx:  at(inBerlin(time.March, 28, 13, 0)),
			want: Result{
				Reason:     "window daily 12:00–13:00 Europe/Berlin is shut; opens Sun 12:00 (in 22h)",
				NextChange: utc(2026, time.March, 29, 10, 0),
			},
		},
		"opens at the wall-clock start after clocks went back, 24 real hours later": {
			inst: window("12:00", "13:00", "Europe/Berlin", nil),
			ctx:  at(inBerlin(time.October, 24, 12, 0).Add(time.Hour)), // Saturday 13:00 CEST
			want: Result{
				Reason:     "window daily 12:00–13:00 Europe/Berlin is shut; opens Sun 12:00 (in 1d)",
				NextChange: utc(2026, time.October, 25, 11, 0),
			},
		},
		"opens a start skipped by clocks going forward as late as the skipped hour": {
			inst: window("02:30", "04:00", "Europe/Berlin", nil),
			ctx:  at(inBerlin(time.March, 29, 1, 0)), // 00:00 UTC
			want: Result{
				Reason:     "window daily 02:30–04:00 Europe/Berlin is shut; opens Sun 03:30 (in 1h30m)",
				NextChange: utc(2026, time.March, 29, 1, 30),
			},
		},
		"opens a start repeated by clocks going back at its second occurrence": {
			inst: window("02:30", "04:00", "Europe/Berlin", nil),
			ctx:  at(utc(2026, time.October, 25, 0, 45)), // 02:45 CEST, the first 02:45
			want: Result{
				Reason:     "window daily 02:30–04:00 Europe/Berlin is shut; opens Sun 02:30 (in 45m)",
				NextChange: utc(2026, time.October, 25, 1, 30),
			},
		},
		"does not open on the day clocks going forward leave nothing of it": {
			inst: window("02:30", "03:00", "Europe/Berlin", nil),
			ctx:  at(inBerlin(time.March, 29, 0, 30)),
			want: Result{
				Reason:     "window daily 02:30–03:00 Europe/Berlin is shut; opens Mon 02:30 (in 1d1h)",
				NextChange: inBerlin(time.March, 30, 2, 30),
			},
		},
	})
}
