package check

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

func TestFreeze(t *testing.T) {
	day := func(month time.Month, d int) metav1.Time {
		return metav1.NewTime(time.Date(2026, month, d, 0, 0, 0, 0, time.UTC))
	}
	yearEnd := pitstopv1alpha1.FreezePeriod{Start: day(time.December, 20), End: day(time.December, 27), Reason: "year-end freeze"}
	release := pitstopv1alpha1.FreezePeriod{Start: day(time.December, 26), End: day(time.December, 29), Reason: "release"}
	january := pitstopv1alpha1.FreezePeriod{Start: day(time.December, 29), End: day(time.December, 31)}
	summer := pitstopv1alpha1.FreezePeriod{Start: day(time.July, 1), End: day(time.July, 2), Reason: "summit"}
	freeze := func(periods ...pitstopv1alpha1.FreezePeriod) pitstopv1alpha1.CheckInstance {
		return pitstopv1alpha1.CheckInstance{Freeze: &pitstopv1alpha1.FreezeCheck{Periods: periods}}
	}
	n := node("n1")
	at := func(now metav1.Time) Context { return Context{Node: &n, Now: now.Time} }
	runCases(t, map[string]evalCase{
		"fails inside a period, naming it, until it ends": {
			inst: freeze(yearEnd, summer), ctx: at(day(time.December, 24)),
			want: Result{Reason: `freeze "year-end freeze" holds until 2026-12-27 00:00 UTC (in 3d)`, NextChange: yearEnd.End.Time},
		},
		"holds from its start on": {
			inst: freeze(yearEnd), ctx: at(yearEnd.Start),
			want: Result{Reason: `freeze "year-end freeze" holds until 2026-12-27 00:00 UTC (in 7d)`, NextChange: yearEnd.End.Time},
		},
		"passes at the end of a period": {
			inst: freeze(yearEnd), ctx: at(yearEnd.End),
			want: Result{Passed: true, Reason: "no freeze holds or is planned"},
		},
		"passes before a period and changes when it starts": {
			inst: freeze(yearEnd, summer), ctx: at(day(time.June, 10)),
			want: Result{Passed: true, Reason: `no freeze holds; the next "summit" starts 2026-07-01 00:00 UTC`, NextChange: summer.Start.Time},
		},
		"holds through periods that overlap or touch, until the last ends": {
			inst: freeze(january, release, yearEnd), ctx: at(day(time.December, 24)),
			want: Result{Reason: `freeze "year-end freeze" holds until 2026-12-31 00:00 UTC (in 7d)`, NextChange: january.End.Time},
		},
		"names the period that holds longest when several hold": {
			inst: freeze(yearEnd, release), ctx: at(day(time.December, 26)),
			want: Result{Reason: `freeze "release" holds until 2026-12-29 00:00 UTC (in 3d)`, NextChange: release.End.Time},
		},
		"writes a period without a reason plainly": {
			inst: freeze(january), ctx: at(day(time.December, 30)),
			want: Result{Reason: "freeze holds until 2026-12-31 00:00 UTC (in 1d)", NextChange: january.End.Time},
		},
	})
}
