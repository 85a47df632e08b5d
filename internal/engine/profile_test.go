package engine

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

func TestPasses(t *testing.T) {
	p, err := Compile(&pitstopv1alpha1.MaintenanceProfile{
		ObjectMeta: metav1.ObjectMeta{Name: "os"},
		Spec: pitstopv1alpha1.MaintenanceProfileSpec{
			Checks: []pitstopv1alpha1.CheckInstance{
				{Name: "needed", HasAnnotation: &pitstopv1alpha1.KeyValueCheck{Key: "reboot-needed"}},
				{Name: "budget", MaxMaintenance: &pitstopv1alpha1.MaxMaintenanceCheck{Max: 1}},
				{Name: "urgent", HasLabel: &pitstopv1alpha1.KeyValueCheck{Key: "urgent"}},
			},
			States: pitstopv1alpha1.StatesSpec{
				Operational: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "needed", Next: required}}},
				MaintenanceRequired: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{
					{Check: "!needed", Next: operational},
					{Check: "budget || urgent", Next: inMaint},
				}},
				InMaintenance: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "", Next: operational}}},
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		state  pitstopv1alpha1.MaintenanceState
		checks map[string]bool
		want   bool
	}{
		{"fails when the only transition's check failed", operational, map[string]bool{"needed": false}, false},
		{"passes when the only transition's check passed", operational, map[string]bool{"needed": true}, true},
		{"fails when no check was recorded", operational, nil, false},
		{"fails when every transition's check failed (a budget slot not taken)", required, map[string]bool{"needed": true, "budget": false, "urgent": false}, false},
		{"passes when a later transition's check passed", required, map[string]bool{"needed": true, "budget": false, "urgent": true}, true},
		{"passes when the first transition's check passed", required, map[string]bool{"needed": false, "budget": false}, true},
		{"passes a transition without a check", inMaint, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := p.Passes(ProfileRecord{Current: tc.state, Checks: tc.checks}); got != tc.want {
				t.Errorf("Passes = %v, want %v", got, tc.want)
			}
		})
	}
}
