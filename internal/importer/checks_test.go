package importer

import (
	"reflect"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

func TestParseExpr(t *testing.T) {
	tests := []struct {
		name, expr          string
		operator, threshold string
		wantErr             bool
	}{
		{name: "reads the documented form", expr: "value <= 1", operator: "<=", threshold: "1"},
		{name: "reads it without spaces", expr: "value<1", operator: "<", threshold: "1"},
		{name: "reads every operator", expr: " value != 0.5 ", operator: "!=", threshold: "0.5"},
		{name: "reads a negative threshold", expr: "value >= -3", operator: ">=", threshold: "-3"},
		{name: "reads an exponent", expr: "value == 1e3", operator: "==", threshold: "1e3"},
		{name: "swaps a threshold on the left", expr: "1 >= value", operator: "<=", threshold: "1"},
		{name: "swaps strict operators too", expr: "0 < value", operator: ">", threshold: "0"},
		{name: "refuses arithmetic", expr: "value * 2 > 1", wantErr: true},
		{name: "refuses two comparisons", expr: "value > 0 && value < 3", wantErr: true},
		{name: "refuses a comparison with a name", expr: "value <= limit", wantErr: true},
		{name: "refuses a comparison of two numbers", expr: "1 < 2", wantErr: true},
		{name: "refuses a bare value", expr: "value", wantErr: true},
		{name: "refuses a single =", expr: "value = 1", wantErr: true},
		{name: "refuses NaN", expr: "value != NaN", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			op, th, err := parseExpr(tc.expr)
			if tc.wantErr {
				if err == nil {
					t.Errorf("parseExpr(%q) = %q, %q; want an error", tc.expr, op, th)
				}
				return
			}
			if err != nil || op != tc.operator || th != tc.threshold {
				t.Errorf("parseExpr(%q) = %q, %q, %v; want %q, %q", tc.expr, op, th, err, tc.operator, tc.threshold)
			}
		})
	}
}

// TestCheckConversion converts one check instance per case and compares
// the check the profile gets.
func TestCheckConversion(t *testing.T) {
	duration := func(d time.Duration) pitstopv1alpha1.Duration { return pitstopv1alpha1.Duration{Duration: d} }
	tests := []struct {
		name   string
		typ    string
		config []string
		want   pitstopv1alpha1.CheckInstance
	}{
		{
			name:   "reads an empty label value as any value, as the seed does",
			typ:    "hasLabel",
			config: []string{"key: os-update", `value: ""`},
			want:   pitstopv1alpha1.CheckInstance{HasLabel: &pitstopv1alpha1.KeyValueCheck{Key: "os-update"}},
		},
		{
			name:   "keeps a label value",
			typ:    "anyLabel",
			config: []string{"key: canary", "value: done"},
			want:   pitstopv1alpha1.CheckInstance{AnyLabel: &pitstopv1alpha1.KeyValueCheck{Key: "canary", Value: ptr.To("done")}},
		},
		{
			name:   "scopes a maxMaintenance to the profile that its profile option names",
			typ:    "maxMaintenance",
			config: []string{`max: "2"`, "profile: p"},
			want:   pitstopv1alpha1.CheckInstance{MaxMaintenance: &pitstopv1alpha1.MaxMaintenanceCheck{Max: 2, ProfileScoped: true}},
		},
		{
			name:   "groups a maxMaintenance by the deprecated groupLabel",
			typ:    "maxMaintenance",
			config: []string{"max: 1", "groupLabel: topology.kubernetes.io/zone"},
			want:   pitstopv1alpha1.CheckInstance{MaxMaintenance: &pitstopv1alpha1.MaxMaintenanceCheck{Max: 1, GroupBy: "topology.kubernetes.io/zone"}},
		},
		{
			name:   "leaves stagger's parallel to the API default when not given, and groups by the Lease",
			typ:    "stagger",
			config: []string{"duration: 1h", "leaseName: Patch_L", "leaseNamespace: kube-system"},
			want:   pitstopv1alpha1.CheckInstance{Stagger: &pitstopv1alpha1.StaggerCheck{Duration: duration(time.Hour), Group: "kube-system-patch-l"}},
		},
		{
			name:   "writes times with two digits and long weekday names short, in UTC",
			typ:    "timeWindow",
			config: []string{`start: "9:05"`, `end: "17:00"`, "weekdays: [Monday, tue, SUNDAY, monday]", `exclude: ["Dec 24"]`},
			want: pitstopv1alpha1.CheckInstance{TimeWindow: &pitstopv1alpha1.TimeWindowCheck{
				Start: "09:05", End: "17:00", Weekdays: []pitstopv1alpha1.Weekday{"Mon", "Tue", "Sun"}, Exclude: []string{"Dec 24"}, TimeZone: "UTC",
			}},
		},
		{
			name:   "writes waitExclude's weekdays short, in UTC",
			typ:    "waitExclude",
			config: []string{"duration: 24h", "exclude: [saturday, Sun]"},
			want: pitstopv1alpha1.CheckInstance{WaitExclude: &pitstopv1alpha1.WaitExcludeCheck{
				Duration: duration(24 * time.Hour), Exclude: []pitstopv1alpha1.Weekday{"Sat", "Sun"}, TimeZone: "UTC",
			}},
		},
		{
			name:   "reads affinity without a config",
			typ:    "affinity",
			config: nil,
			want:   pitstopv1alpha1.CheckInstance{Affinity: &pitstopv1alpha1.AffinityCheck{}},
		},
		{
			name:   "keeps any other prometheusInstant expr as a CEL expression",
			typ:    "prometheusInstant",
			config: []string{"url: https://prometheus:9090", "query: up", "expr: value > 0 && value / 1024 < 2"},
			want: pitstopv1alpha1.CheckInstance{PrometheusInstant: &pitstopv1alpha1.PrometheusInstantCheck{
				URL: "https://prometheus:9090", Query: "up", Expr: "value > 0 && value / 1024 < 2",
			}},
		},
		{
			name:   "groups a maxMaintenance by several labels, the deprecated groupLabel last",
			typ:    "maxMaintenance",
			config: []string{"max: 1", "groupBy: [zone, rack]", "groupLabel: row"},
			want: pitstopv1alpha1.CheckInstance{MaxMaintenance: &pitstopv1alpha1.MaxMaintenanceCheck{
				Max: 1, GroupBy: "zone", GroupByLabels: []string{"rack", "row"},
			}},
		},
		{
			name:   "copies affinity's minOperational, which means what it meant in the seed",
			typ:    "affinity",
			config: []string{"minOperational: 3"},
			want:   pitstopv1alpha1.CheckInstance{Affinity: &pitstopv1alpha1.AffinityCheck{MinOperational: 3}},
		},
		{
			name:   "reads a boolean written the YAML 1.1 way",
			typ:    "clusterSemver",
			config: []string{"key: version", "profileScoped: yes"},
			want:   pitstopv1alpha1.CheckInstance{ClusterSemver: &pitstopv1alpha1.ClusterSemverCheck{Key: "version", ProfileScoped: true}},
		},
		{
			name:   "splits prometheusInstant's expr into operator and threshold",
			typ:    "prometheusInstant",
			config: []string{"url: https://prometheus:9090", "query: up", "expr: value >= 1"},
			want: pitstopv1alpha1.CheckInstance{PrometheusInstant: &pitstopv1alpha1.PrometheusInstantCheck{
				URL: "https://prometheus:9090", Query: "up", Operator: ">=", Threshold: "1",
			}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			profiles, err := Convert(oneCheck(tc.typ, tc.config...), nil)
			if err != nil {
				t.Fatalf("Convert: %v", err)
			}
			tc.want.Name = "c"
			if got := profiles[0].Spec.Checks; !reflect.DeepEqual(got, []pitstopv1alpha1.CheckInstance{tc.want}) {
				t.Errorf("checks = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestTriggerConversion(t *testing.T) {
	tests := []struct {
		name   string
		typ    string
		config []string
		want   pitstopv1alpha1.TriggerInstance
	}{
		{
			name:   "spells out the empty value the seed sets when none is given",
			typ:    "alterLabel",
			config: []string{"key: patched"},
			want:   pitstopv1alpha1.TriggerInstance{AlterLabel: &pitstopv1alpha1.AlterTrigger{Key: "patched", Value: ptr.To("")}},
		},
		{
			name:   "drops the value of a removal, which the seed ignores",
			typ:    "alterAnnotation",
			config: []string{"key: approved", "value: x", "remove: true"},
			want:   pitstopv1alpha1.TriggerInstance{AlterAnnotation: &pitstopv1alpha1.AlterTrigger{Key: "approved", Remove: true}},
		},
		{
			name:   "keeps alterFinalizer as it is",
			typ:    "alterFinalizer",
			config: []string{"key: example.com/hold", "remove: false"},
			want:   pitstopv1alpha1.TriggerInstance{AlterFinalizer: &pitstopv1alpha1.AlterFinalizerTrigger{Key: "example.com/hold"}},
		},
		{
			name:   "makes an eviction that drains a drain trigger that evicts pods no controller owns, as the seed's",
			typ:    "eviction",
			config: []string{"action: drain", "deletionTimeout: 5m"},
			want:   pitstopv1alpha1.TriggerInstance{Drain: &pitstopv1alpha1.DrainTrigger{Drain: pitstopv1alpha1.DrainSpec{UnmanagedPods: pitstopv1alpha1.UnmanagedPodsDelete}}},
		},
		{
			name:   "makes forceEviction force-delete pods stuck terminating",
			typ:    "eviction",
			config: []string{"action: drain", "forceEviction: true"},
			want:   pitstopv1alpha1.TriggerInstance{Drain: &pitstopv1alpha1.DrainTrigger{Drain: pitstopv1alpha1.DrainSpec{UnmanagedPods: pitstopv1alpha1.UnmanagedPodsDelete, ForceDeleteTerminating: true}}},
		},
		{
			name:   "makes an eviction that cordons a cordon trigger",
			typ:    "eviction",
			config: []string{"action: cordon"},
			want:   pitstopv1alpha1.TriggerInstance{Cordon: &pitstopv1alpha1.CordonTrigger{}},
		},
		{
			name:   "makes an eviction that uncordons a restore trigger that uncordons",
			typ:    "eviction",
			config: []string{"action: uncordon"},
			want:   pitstopv1alpha1.TriggerInstance{Restore: &pitstopv1alpha1.RestoreTrigger{Uncordon: true}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			profiles, err := Convert(oneTrigger(tc.typ, tc.config...), nil)
			if err != nil {
				t.Fatalf("Convert: %v", err)
			}
			tc.want.Name = "t"
			if got := profiles[0].Spec.Triggers; !reflect.DeepEqual(got, []pitstopv1alpha1.TriggerInstance{tc.want}) {
				t.Errorf("triggers = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestMaxMaintenanceProfileScope: a maxMaintenance whose profile option
// names the profile that uses it counts that profile's nodes; naming
// another profile counts that one's.
func TestMaxMaintenanceProfileScope(t *testing.T) {
	for _, tc := range []struct {
		scope string
		want  pitstopv1alpha1.MaxMaintenanceCheck
	}{
		{"p", pitstopv1alpha1.MaxMaintenanceCheck{Max: 1, ProfileScoped: true}},
		{"other", pitstopv1alpha1.MaxMaintenanceCheck{Max: 1, ProfileScoped: true, Profile: "other"}},
	} {
		profiles, err := Convert(oneCheck("maxMaintenance", "max: 1", "profile: "+tc.scope), nil)
		if err != nil {
			t.Fatalf("Convert: %v", err)
		}
		if got := *profiles[0].Spec.Checks[0].MaxMaintenance; !reflect.DeepEqual(got, tc.want) {
			t.Errorf("profile: %s gives %+v, want %+v", tc.scope, got, tc.want)
		}
	}
}
