package check

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

func TestNew(t *testing.T) {
	type inst = pitstopv1alpha1.CheckInstance
	window := func(mutate func(*pitstopv1alpha1.TimeWindowCheck)) inst {
		w := &pitstopv1alpha1.TimeWindowCheck{Start: "22:00", End: "04:00", TimeZone: "Europe/Berlin", Weekdays: []pitstopv1alpha1.Weekday{"Fri"}, Exclude: []string{"Dec 24", "2026-12-31"}}
		mutate(w)
		return inst{TimeWindow: w}
	}
	prom := func(mutate func(*pitstopv1alpha1.PrometheusInstantCheck)) inst {
		p := &pitstopv1alpha1.PrometheusInstantCheck{URL: "http://prometheus:9090", Query: "up", Operator: ">=", Threshold: "1"}
		mutate(p)
		return inst{PrometheusInstant: p}
	}
	keep := func(*pitstopv1alpha1.TimeWindowCheck) {}
	start := metav1.NewTime(time.Date(2026, time.December, 20, 0, 0, 0, 0, time.UTC))
	end := metav1.NewTime(start.Add(24 * time.Hour))
	cases := map[string]struct {
		inst    inst
		noDeps  bool
		wantErr string
	}{
		"builds hasLabel":      {inst: inst{HasLabel: &pitstopv1alpha1.KeyValueCheck{Key: "k"}}},
		"builds hasAnnotation": {inst: inst{HasAnnotation: &pitstopv1alpha1.KeyValueCheck{Key: "k"}}},
		"builds anyLabel":      {inst: inst{AnyLabel: &pitstopv1alpha1.KeyValueCheck{Key: "k"}}},
		"builds condition":     {inst: inst{Condition: &pitstopv1alpha1.ConditionCheck{Type: "Ready", Status: "True"}}},
		"builds maxMaintenance": {
			inst: inst{MaxMaintenance: &pitstopv1alpha1.MaxMaintenanceCheck{Max: 1, GroupBy: "topology.kubernetes.io/zone"}},
		},
		"builds stagger":     {inst: inst{Stagger: &pitstopv1alpha1.StaggerCheck{Duration: duration(time.Hour), Parallel: 2}}},
		"builds timeWindow":  {inst: window(keep)},
		"builds wait":        {inst: inst{Wait: &pitstopv1alpha1.WaitCheck{Duration: duration(time.Hour)}}},
		"builds waitExclude": {inst: inst{WaitExclude: &pitstopv1alpha1.WaitExcludeCheck{Duration: duration(time.Hour), Exclude: []pitstopv1alpha1.Weekday{"Sat"}}}},
		"builds clusterSemver": {
			inst: inst{ClusterSemver: &pitstopv1alpha1.ClusterSemverCheck{Key: "k", ProfileScoped: true}},
		},
		"builds affinity":          {inst: inst{Affinity: &pitstopv1alpha1.AffinityCheck{MinOperational: 2}}},
		"builds nodeCount":         {inst: inst{NodeCount: &pitstopv1alpha1.NodeCountCheck{Count: 3}}},
		"builds prometheusInstant": {inst: prom(func(*pitstopv1alpha1.PrometheusInstantCheck) {})},
		"builds freeze":            {inst: inst{Freeze: &pitstopv1alpha1.FreezeCheck{Periods: []pitstopv1alpha1.FreezePeriod{{Start: start, End: end}}}}},

		"refuses an instance without a plugin": {inst: inst{Name: "empty"}, wantErr: "exactly one plugin must be set, found none"},
		"refuses an instance with two plugins": {
			inst:    inst{HasLabel: &pitstopv1alpha1.KeyValueCheck{Key: "k"}, Wait: &pitstopv1alpha1.WaitCheck{Duration: duration(time.Hour)}},
			wantErr: "exactly one plugin must be set, found 2: hasLabel, wait",
		},
		"refuses an empty label key": {inst: inst{HasLabel: &pitstopv1alpha1.KeyValueCheck{}}, wantErr: "hasLabel.key: must not be empty"},
		"refuses an unknown condition status": {
			inst:    inst{Condition: &pitstopv1alpha1.ConditionCheck{Type: "Ready", Status: "Maybe"}},
			wantErr: `condition.status: "Maybe" is not one of True, False, Unknown`,
		},
		"refuses a max of zero": {
			inst:    inst{MaxMaintenance: &pitstopv1alpha1.MaxMaintenanceCheck{}},
			wantErr: "maxMaintenance.max: must be at least 1, got 0",
		},
		"refuses a stagger without a duration": {
			inst:    inst{Stagger: &pitstopv1alpha1.StaggerCheck{Parallel: 1}},
			wantErr: "stagger.duration: must be positive, got 0s",
		},
		"refuses a negative parallel": {
			inst:    inst{Stagger: &pitstopv1alpha1.StaggerCheck{Duration: duration(time.Hour), Parallel: -1}},
			wantErr: "stagger.parallel: must be at least 1, got -1",
		},
		"refuses an unknown time zone": {
			inst:    window(func(w *pitstopv1alpha1.TimeWindowCheck) { w.TimeZone = "Mars/Olympus" }),
			wantErr: `timeWindow.timeZone: unknown time zone "Mars/Olympus"`,
		},
		"refuses a start that is not a time of day": {
			inst:    window(func(w *pitstopv1alpha1.TimeWindowCheck) { w.Start = "24:00" }),
			wantErr: `timeWindow.start: "24:00" is not a time of day "hh:mm"`,
		},
		"refuses an end without its leading zero": {
			inst:    window(func(w *pitstopv1alpha1.TimeWindowCheck) { w.End = "4:00" }),
			wantErr: `timeWindow.end: "4:00" is not a time of day "hh:mm"`,
		},
		"refuses an unknown weekday": {
			inst:    window(func(w *pitstopv1alpha1.TimeWindowCheck) { w.Weekdays = []pitstopv1alpha1.Weekday{"Fri", "Monday"} }),
			wantErr: `timeWindow.weekdays[1]: unknown weekday "Monday", want one of Mon, Tue, Wed, Thu, Fri, Sat, Sun`,
		},
		"refuses a day of the year that does not exist": {
			inst:    window(func(w *pitstopv1alpha1.TimeWindowCheck) { w.Exclude = []string{"Dec 24", "Dec 32"} }),
			wantErr: `timeWindow.exclude[1]: "Dec 32" is neither a day of the year ("Dec 24") nor a date ("2026-12-24")`,
		},
		"refuses a date that does not exist": {
			inst:    window(func(w *pitstopv1alpha1.TimeWindowCheck) { w.Exclude = []string{"2026-02-30"} }),
			wantErr: `timeWindow.exclude[0]: "2026-02-30" is neither a day of the year ("Dec 24") nor a date ("2026-12-24")`,
		},
		"refuses a negative wait": {
			inst:    inst{Wait: &pitstopv1alpha1.WaitCheck{Duration: duration(-time.Minute)}},
			wantErr: "wait.duration: must be positive, got -1m0s",
		},
		"refuses a wait excluding every weekday": {
			inst: inst{WaitExclude: &pitstopv1alpha1.WaitExcludeCheck{Duration: duration(time.Hour),
				Exclude: []pitstopv1alpha1.Weekday{"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"}}},
			wantErr: "waitExclude.exclude: every weekday is excluded, so the wait would never end",
		},
		"refuses an unknown time zone for waitExclude": {
			inst: inst{WaitExclude: &pitstopv1alpha1.WaitExcludeCheck{Duration: duration(time.Hour),
				Exclude: []pitstopv1alpha1.Weekday{"Sun"}, TimeZone: "Europe/Atlantis"}},
			wantErr: `waitExclude.timeZone: unknown time zone "Europe/Atlantis"`,
		},
		"refuses an empty semver key": {
			inst:    inst{ClusterSemver: &pitstopv1alpha1.ClusterSemverCheck{}},
			wantErr: "clusterSemver.key: must not be empty",
		},
		"refuses a negative minOperational": {
			inst:    inst{Affinity: &pitstopv1alpha1.AffinityCheck{MinOperational: -1}},
			wantErr: "affinity.minOperational: must not be negative, got -1",
		},
		"refuses a negative node count": {
			inst:    inst{NodeCount: &pitstopv1alpha1.NodeCountCheck{Count: -1}},
			wantErr: "nodeCount.count: must not be negative, got -1",
		},
		"refuses a threshold that is not a number": {
			inst:    prom(func(p *pitstopv1alpha1.PrometheusInstantCheck) { p.Threshold = "high" }),
			wantErr: `prometheusInstant.threshold: "high" is not a number`,
		},
		"refuses a NaN threshold, which nothing equals": {
			inst:    prom(func(p *pitstopv1alpha1.PrometheusInstantCheck) { p.Threshold = "NaN" }),
			wantErr: `prometheusInstant.threshold: "NaN" is not a number`,
		},
		"refuses an expression that is not a boolean": {
			inst: prom(func(p *pitstopv1alpha1.PrometheusInstantCheck) {
				p.Operator, p.Threshold, p.Expr = "", "", "value * 2.0"
			}),
			wantErr: `prometheusInstant.expr: the expression is a double, not a boolean`,
		},
		"refuses an expression naming something but value": {
			inst:    prom(func(p *pitstopv1alpha1.PrometheusInstantCheck) { p.Operator, p.Threshold, p.Expr = "", "", "valu > 1" }),
			wantErr: `prometheusInstant.expr: 1:1: undeclared reference to 'valu'`,
		},
		"refuses an expression beside an operator": {
			inst:    prom(func(p *pitstopv1alpha1.PrometheusInstantCheck) { p.Expr = "value > 1" }),
			wantErr: `prometheusInstant.expr: set either expr, or operator and threshold`,
		},
		"refuses an unknown operator": {
			inst:    prom(func(p *pitstopv1alpha1.PrometheusInstantCheck) { p.Operator = "=~" }),
			wantErr: `prometheusInstant.operator: "=~" is not one of <, <=, ==, !=, >=, >`,
		},
		"refuses a URL that is not http": {
			inst:    prom(func(p *pitstopv1alpha1.PrometheusInstantCheck) { p.URL = "prometheus:9090" }),
			wantErr: `prometheusInstant.url: "prometheus:9090" is not an http(s) URL`,
		},
		"refuses an empty query": {
			inst:    prom(func(p *pitstopv1alpha1.PrometheusInstantCheck) { p.Query = "" }),
			wantErr: "prometheusInstant.query: must not be empty",
		},
		"builds prometheusInstant with a bearer token": {inst: prom(withBearer("prom-auth", "token"))},
		"builds prometheusInstant with basic auth":     {inst: prom(withBasicAuth("pitstop", "prom-auth", "password"))},
		"refuses both a bearer token and basic auth": {
			inst: prom(func(p *pitstopv1alpha1.PrometheusInstantCheck) {
				withBearer("prom-auth", "token")(p)
				withBasicAuth("pitstop", "prom-auth", "password")(p)
			}),
			wantErr: "prometheusInstant.bearerToken: set at most one of bearerToken and basicAuth",
		},
		"refuses a basic auth username with a colon": {
			inst:    prom(withBasicAuth("pit:stop", "prom-auth", "password")),
			wantErr: "prometheusInstant.basicAuth.username: must not be empty or hold a colon",
		},
		"refuses prometheusInstant without a Prometheus client": {
			inst:    prom(func(*pitstopv1alpha1.PrometheusInstantCheck) {}),
			noDeps:  true,
			wantErr: "prometheusInstant: no Prometheus client configured",
		},
		"refuses a freeze without periods": {
			inst:    inst{Freeze: &pitstopv1alpha1.FreezeCheck{}},
			wantErr: "freeze.periods: must not be empty",
		},
		"refuses a freeze period that ends before it starts": {
			inst:    inst{Freeze: &pitstopv1alpha1.FreezeCheck{Periods: []pitstopv1alpha1.FreezePeriod{{Start: start, End: end}, {Start: end, End: start}}}},
			wantErr: "freeze.periods[1]: end 2026-12-20 00:00 UTC must be after start 2026-12-21 00:00 UTC",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			deps := Deps{Prometheus: fixedPrometheus{}}
			if tc.noDeps {
				deps = Deps{}
			}
			c, err := New(tc.inst, deps)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("New: %v", err)
			case tc.wantErr == "" && c == nil:
				t.Fatal("New returned no check and no error")
			case tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr):
				t.Fatalf("got error %v, want %q", err, tc.wantErr)
			}
		})
	}
}
