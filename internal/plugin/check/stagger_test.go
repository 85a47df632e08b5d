package check

import (
	"testing"
	"time"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

func TestStagger(t *testing.T) {
	stagger := func(d time.Duration, parallel int32) pitstopv1alpha1.CheckInstance {
		return pitstopv1alpha1.CheckInstance{Stagger: &pitstopv1alpha1.StaggerCheck{Duration: duration(d), Parallel: parallel}}
	}
	base := cluster(node("n1"), node("n2")).with("os", required, "n1").with("os", inMaint, "n2")
	entered := func(ago ...time.Duration) Cluster {
		e := entriesCluster{fakeCluster: base, entries: map[string][]time.Time{"fw": {noon.Add(-time.Minute)}}}
		for _, a := range ago {
			e.entries["os"] = append(e.entries["os"], noon.Add(-a))
		}
		return e
	}
	waiting := func(cl Cluster) Context {
		return Context{Node: base.nodeOf("n1"), Profile: "os", State: required, Since: noon.Add(-time.Hour), Cluster: cl, Now: noon}
	}
	runCases(t, map[string]evalCase{
		"passes when the cluster knows no entry times": {
			inst: stagger(30*time.Minute, 1), ctx: waiting(base),
			want: Result{Passed: true, Reason: "no entry times known"},
		},
		"passes when no node of the profile entered within the duration": {
			inst: stagger(30*time.Minute, 1), ctx: waiting(entered(31 * time.Minute)),
			want: Result{Passed: true, Reason: "0 of 1 stagger slots taken in the last 30m"},
		},
		"fails while a node entered within the duration, until its slot frees": {
			inst: stagger(30*time.Minute, 1), ctx: waiting(entered(10 * time.Minute)),
			want: Result{
				Reason:     "1 of 1 stagger slots taken in the last 30m; one frees at 2026-06-10 12:20 UTC (in 20m)",
				NextChange: noon.Add(20 * time.Minute),
			},
		},
		"frees a slot exactly duration after the entry": {
			inst: stagger(30*time.Minute, 1), ctx: waiting(entered(30 * time.Minute)),
			want: Result{Passed: true, Reason: "0 of 1 stagger slots taken in the last 30m"},
		},
		"counts an entry in the future, as from a replica with a clock ahead": {
			inst: stagger(30*time.Minute, 1), ctx: waiting(entered(-time.Minute)),
			want: Result{
				Reason:     "1 of 1 stagger slots taken in the last 30m; one frees at 2026-06-10 12:31 UTC (in 31m)",
				NextChange: noon.Add(31 * time.Minute),
			},
		},
		"lets parallel nodes through per duration": {
			inst: stagger(30*time.Minute, 2), ctx: waiting(entered(10 * time.Minute)),
			want: Result{Passed: true, Reason: "1 of 2 stagger slots taken in the last 30m"},
		},
		"with more entries than slots, frees one when enough entries have left": {
			inst: stagger(30*time.Minute, 2), ctx: waiting(entered(5*time.Minute, 25*time.Minute, 15*time.Minute)),
			want: Result{
				Reason:     "3 of 2 stagger slots taken in the last 30m; one frees at 2026-06-10 12:15 UTC (in 15m)",
				NextChange: noon.Add(15 * time.Minute),
			},
		},
		"treats a parallel of zero as one": {
			inst: stagger(time.Hour, 0), ctx: waiting(entered(10 * time.Minute)),
			want: Result{
				Reason:     "1 of 1 stagger slots taken in the last 1h; one frees at 2026-06-10 12:50 UTC (in 50m)",
				NextChange: noon.Add(50 * time.Minute),
			},
		},
		"does not count the node's own entry when it is in maintenance": {
			inst: stagger(30*time.Minute, 1),
			ctx: Context{Node: base.nodeOf("n2"), Profile: "os", State: inMaint, Since: noon.Add(-10 * time.Minute),
				Cluster: entered(10 * time.Minute), Now: noon},
			want: Result{Passed: true, Reason: "0 of 1 stagger slots taken in the last 30m"},
		},
		"counts another node that entered at the same instant as the node": {
			inst: stagger(30*time.Minute, 1),
			ctx: Context{Node: base.nodeOf("n2"), Profile: "os", State: inMaint, Since: noon.Add(-10 * time.Minute),
				Cluster: entered(10*time.Minute, 10*time.Minute), Now: noon},
			want: Result{
				Reason:     "1 of 1 stagger slots taken in the last 30m; one frees at 2026-06-10 12:20 UTC (in 20m)",
				NextChange: noon.Add(20 * time.Minute),
			},
		},
	})
}
