package v1alpha1_test

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

func profile(name string, edit func(*pitstopv1alpha1.MaintenanceProfile)) *pitstopv1alpha1.MaintenanceProfile {
	p := &pitstopv1alpha1.MaintenanceProfile{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: pitstopv1alpha1.MaintenanceProfileSpec{
			Checks: []pitstopv1alpha1.CheckInstance{
				{Name: "reboot_needed", HasAnnotation: &pitstopv1alpha1.KeyValueCheck{Key: "reboot-needed"}},
				{Name: "window", TimeWindow: &pitstopv1alpha1.TimeWindowCheck{Start: "22:00", End: "04:00", TimeZone: "Europe/Berlin"}},
				{Name: "budget", MaxMaintenance: &pitstopv1alpha1.MaxMaintenanceCheck{Max: 2}},
			},
			Triggers: []pitstopv1alpha1.TriggerInstance{
				{Name: "drain", Drain: &pitstopv1alpha1.DrainTrigger{}},
				{Name: "mark", AlterLabel: &pitstopv1alpha1.AlterTrigger{Key: "maintained", Value: ptr.To("yes")}},
			},
			States: pitstopv1alpha1.StatesSpec{
				Operational: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "reboot_needed", Next: pitstopv1alpha1.StateMaintenanceRequired}}},
				MaintenanceRequired: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{
					{Check: "window && budget", Triggers: []string{"drain"}, Next: pitstopv1alpha1.StateInMaintenance},
				}},
			},
		},
	}
	if edit != nil {
		edit(p)
	}
	return p
}

// healthGate is a prometheusInstant check named healthy, as edit sets it.
func healthGate(edit func(*pitstopv1alpha1.PrometheusInstantCheck)) pitstopv1alpha1.CheckInstance {
	c := &pitstopv1alpha1.PrometheusInstantCheck{URL: "https://prometheus.monitoring.svc:9090", Query: "up", Operator: ">=", Threshold: "1"}
	edit(c)
	return pitstopv1alpha1.CheckInstance{Name: "healthy", PrometheusInstant: c}
}

// TestMaintenanceProfileSchema checks what the API server itself refuses in
// a MaintenanceProfile, each refusal naming the field.
func TestMaintenanceProfileSchema(t *testing.T) {
	if err := env.Client.Create(t.Context(), profile("valid", nil)); err != nil {
		t.Fatalf("a valid profile was refused: %v", err)
	}
	for name, auth := range map[string]func(*pitstopv1alpha1.PrometheusInstantCheck){
		"valid-bearer-token": func(c *pitstopv1alpha1.PrometheusInstantCheck) {
			c.BearerToken = &pitstopv1alpha1.SecretKeyRef{Name: "prom-auth", Key: "token"}
		},
		"valid-basic-auth": func(c *pitstopv1alpha1.PrometheusInstantCheck) {
			c.BasicAuth = &pitstopv1alpha1.BasicAuth{Username: "pitstop", Password: pitstopv1alpha1.SecretKeyRef{Name: "prom-auth", Key: "password"}}
		},
	} {
		p := profile(name, func(p *pitstopv1alpha1.MaintenanceProfile) { p.Spec.Checks = append(p.Spec.Checks, healthGate(auth)) })
		if err := env.Client.Create(t.Context(), p); err != nil {
			t.Fatalf("a profile with %s was refused: %v", name, err)
		}
	}
	for _, tc := range []struct {
		name  string
		edit  func(*pitstopv1alpha1.MaintenanceProfile)
		field string
	}{
		{"check name with a dash", func(p *pitstopv1alpha1.MaintenanceProfile) { p.Spec.Checks[0].Name = "reboot-needed" }, "spec.checks[0].name"},
		{"check with two plugins", func(p *pitstopv1alpha1.MaintenanceProfile) {
			p.Spec.Checks[0].HasLabel = &pitstopv1alpha1.KeyValueCheck{Key: "x"}
		}, "exactly one plugin must be set"},
		{"check with no plugin", func(p *pitstopv1alpha1.MaintenanceProfile) { p.Spec.Checks[0].HasAnnotation = nil }, "exactly one plugin must be set"},
		{"window start not hh:mm", func(p *pitstopv1alpha1.MaintenanceProfile) { p.Spec.Checks[1].TimeWindow.Start = "25:00" }, "spec.checks[1].timeWindow.start"},
		{"zero budget", func(p *pitstopv1alpha1.MaintenanceProfile) { p.Spec.Checks[2].MaxMaintenance.Max = 0 }, "spec.checks[2].maxMaintenance.max"},
		{"unknown next state", func(p *pitstopv1alpha1.MaintenanceProfile) {
			p.Spec.States.Operational.Transitions[0].Next = "rebooting"
		}, "spec.states.operational.transitions[0].next"},
		{"label trigger without value", func(p *pitstopv1alpha1.MaintenanceProfile) { p.Spec.Triggers[1].AlterLabel.Value = nil }, "value is required unless remove is true"},
		{"freeze ending before it starts", func(p *pitstopv1alpha1.MaintenanceProfile) {
			now := time.Date(2026, 12, 20, 0, 0, 0, 0, time.UTC)
			p.Spec.Checks = append(p.Spec.Checks, pitstopv1alpha1.CheckInstance{Name: "xmas", Freeze: &pitstopv1alpha1.FreezeCheck{
				Periods: []pitstopv1alpha1.FreezePeriod{{Start: metav1.NewTime(now), End: metav1.NewTime(now.Add(-time.Hour))}},
			}})
		}, "end must be after start"},
		{"prometheus check with a bearer token and basic auth", func(p *pitstopv1alpha1.MaintenanceProfile) {
			p.Spec.Checks = append(p.Spec.Checks, healthGate(func(c *pitstopv1alpha1.PrometheusInstantCheck) {
				c.BearerToken = &pitstopv1alpha1.SecretKeyRef{Name: "prom-auth", Key: "token"}
				c.BasicAuth = &pitstopv1alpha1.BasicAuth{Username: "pitstop", Password: pitstopv1alpha1.SecretKeyRef{Name: "prom-auth", Key: "password"}}
			}))
		}, "spec.checks[3].prometheusInstant: Invalid value: set at most one of bearerToken and basicAuth"},
		{"basic auth username with a colon", func(p *pitstopv1alpha1.MaintenanceProfile) {
			p.Spec.Checks = append(p.Spec.Checks, healthGate(func(c *pitstopv1alpha1.PrometheusInstantCheck) {
				c.BasicAuth = &pitstopv1alpha1.BasicAuth{Username: "pit:stop", Password: pitstopv1alpha1.SecretKeyRef{Name: "prom-auth", Key: "password"}}
			}))
		}, "spec.checks[3].prometheusInstant.basicAuth.username"},
		{"bearer token without a key", func(p *pitstopv1alpha1.MaintenanceProfile) {
			p.Spec.Checks = append(p.Spec.Checks, healthGate(func(c *pitstopv1alpha1.PrometheusInstantCheck) {
				c.BearerToken = &pitstopv1alpha1.SecretKeyRef{Name: "prom-auth"}
			}))
		}, "spec.checks[3].prometheusInstant.bearerToken.key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := env.Client.Create(t.Context(), profile(strings.ReplaceAll(tc.name, " ", "-"), tc.edit))
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("got %v, want a refusal naming %s", err, tc.field)
			}
		})
	}
}
