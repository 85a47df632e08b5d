package check

import (
	"testing"
	"time"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

func TestWait(t *testing.T) {
	n := node("n1")
	wait := pitstopv1alpha1.CheckInstance{Wait: &pitstopv1alpha1.WaitCheck{Duration: duration(time.Hour)}}
	since := func(s time.Time) Context { return Context{Node: &n, State: required, Since: s, Now: noon} }
	runCases(t, map[string]evalCase{
		"passes once the node has been in its state for the duration": {
			inst: wait, ctx: since(noon.Add(-time.Hour)),
			want: Result{Passed: true, Reason: "maintenance-required for 1h, at least 1h"},
		},
		"fails before, and changes when the duration has passed": {
			inst: wait, ctx: since(noon.Add(-10 * time.Minute)),
			want: Result{
				Reason:     "maintenance-required for 10m of 1h; passes at 2026-06-10 12:50 UTC (in 50m)",
				NextChange: noon.Add(50 * time.Minute),
			},
		},
		"fails when nobody recorded when the node entered its state": {
			inst: wait, ctx: since(time.Time{}),
			want: Result{Reason: "when the node entered maintenance-required is unknown"},
		},
	})
}

func TestWaitExclude(t *testing.T) {
	n := node("n1")
	waitExclude := func(d time.Duration, tz string, exclude ...pitstopv1alpha1.Weekday) pitstopv1alpha1.CheckInstance {
		return pitstopv1alpha1.CheckInstance{WaitExclude: &pitstopv1alpha1.WaitExcludeCheck{Duration: duration(d), Exclude: exclude, TimeZone: tz}}
	}
	between := func(since, now time.Time) Context {
		return Context{Node: &n, State: required, Since: since, Now: now}
	}
	utc := func(day, hour int) time.Time { return time.Date(2026, time.June, day, hour, 0, 0, 0, time.UTC) }
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	// June 2026: Fri 12, Sat 13, Sun 14, Mon 15, Tue 16.
	runCases(t, map[string]evalCase{
		"does not count the excluded weekend": {
			inst: waitExclude(48*time.Hour, "", "Sat", "Sun"), ctx: between(utc(12, 12), utc(15, 12)),
			want: Result{
				Reason:     "maintenance-required for 1d of 2d, not counting Sat,Sun (UTC); passes at 2026-06-16 12:00 UTC (in 1d)",
				NextChange: utc(16, 12),
			},
		},
		"passes once the counted time reaches the duration": {
			inst: waitExclude(48*time.Hour, "", "Sat", "Sun"), ctx: between(utc(12, 12), utc(16, 12)),
			want: Result{Passed: true, Reason: "maintenance-required for at least 2d, not counting Sat,Sun (UTC)"},
		},
		"moves a wait that would end on an excluded day past it": {
			inst: waitExclude(48*time.Hour, "", "Sat", "Sun"), ctx: between(utc(11, 12), utc(11, 13)),
			want: Result{
				Reason:     "maintenance-required for 1h of 2d, not counting Sat,Sun (UTC); passes at 2026-06-15 12:00 UTC (in 3d23h)",
				NextChange: utc(15, 12),
			},
		},
		"counts nothing on the excluded day it is evaluated on": {
			inst: waitExclude(time.Hour, "", "Sat", "Sun"), ctx: between(utc(13, 10), utc(14, 20)),
			want: Result{
				Reason:     "maintenance-required for 0m of 1h, not counting Sat,Sun (UTC); passes at 2026-06-15 01:00 UTC (in 5h)",
				NextChange: utc(15, 1),
			},
		},
		"ends at the midnight that starts an excluded day when the time runs out there": {
			inst: waitExclude(4*time.Hour, "", "Sat"), ctx: between(utc(12, 20), utc(12, 21)),
			want: Result{
				Reason:     "maintenance-required for 1h of 4h, not counting Sat (UTC); passes at 2026-06-13 00:00 UTC (in 3h)",
				NextChange: utc(13, 0),
			},
		},
		"passes at that midnight": {
			inst: waitExclude(4*time.Hour, "", "Sat"), ctx: between(utc(12, 20), utc(13, 0)),
			want: Result{Passed: true, Reason: "maintenance-required for at least 4h, not counting Sat (UTC)"},
		},
		"reads weekdays in its time zone, where an excluded Sunday with a clock change lasts 23 hours": {
			inst: waitExclude(24*time.Hour, "Europe/Berlin", "Sun"),
			ctx:  between(time.Date(2026, time.March, 28, 12, 0, 0, 0, berlin), time.Date(2026, time.March, 28, 13, 0, 0, 0, berlin)),
			want: Result{
				Reason:     "maintenance-required for 1h of 1d, not counting Sun (Europe/Berlin); passes at 2026-03-30 10:00 UTC (in 1d22h)",
				NextChange: time.Date(2026, time.March, 30, 12, 0, 0, 0, berlin),
			},
		},
		"counts from Since when it is ahead of the clock": {
			inst: waitExclude(time.Hour, "", "Sat"), ctx: between(utc(12, 13), utc(12, 12)),
			want: Result{
				Reason:     "maintenance-required for 0m of 1h, not counting Sat (UTC); passes at 2026-06-12 14:00 UTC (in 2h)",
				NextChange: utc(12, 14),
			},
		},
		"fails when nobody recorded when the node entered its state": {
			inst: waitExclude(time.Hour, "", "Sun"), ctx: between(time.Time{}, noon),
			want: Result{Reason: "when the node entered maintenance-required is unknown"},
		},
	})
}
