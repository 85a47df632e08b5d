package engine

import (
	"strings"
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

// TestADrainedNodeReturnsOnlyThroughARestore: a profile in which a node
// drained by a drain trigger could reach operational again without a
// restore trigger on the way is refused, naming the transition and where
// the drain started; every way back that restores is accepted.
func TestADrainedNodeReturnsOnlyThroughARestore(t *testing.T) {
	tr := func(next pitstopv1alpha1.MaintenanceState, triggers ...string) pitstopv1alpha1.Transition {
		return pitstopv1alpha1.Transition{Check: "needed", Triggers: triggers, Next: next}
	}
	for _, tc := range []struct {
		name    string
		states  pitstopv1alpha1.StatesSpec
		wantErr string // "" when the profile compiles
	}{
		{"drain in, restore out", pitstopv1alpha1.StatesSpec{
			Operational:         pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{tr(required)}},
			MaintenanceRequired: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{tr(inMaint, "drain")}},
			InMaintenance:       pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{tr(operational, "restore")}},
		}, ""},
		{"drain in, plain way out", pitstopv1alpha1.StatesSpec{
			Operational:         pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{tr(required)}},
			MaintenanceRequired: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{tr(inMaint, "drain")}},
			InMaintenance:       pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{tr(operational, "restore"), tr(operational, "mark")}},
		}, "spec.states.inMaintenance.transitions[1].triggers: Invalid value: [\"mark\"]: a node drained by trigger drain (spec.states.maintenanceRequired.transitions[0].triggers[0]) returns to operational here without a restore trigger"},
		{"drained on the way, back through required", pitstopv1alpha1.StatesSpec{
			Operational:         pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{tr(required)}},
			MaintenanceRequired: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{tr(inMaint, "drain"), tr(operational)}},
			InMaintenance:       pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{tr(required)}},
		}, "spec.states.maintenanceRequired.transitions[1].triggers"},
		{"drained on the way, restored on the way back to required", pitstopv1alpha1.StatesSpec{
			Operational:         pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{tr(required)}},
			MaintenanceRequired: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{tr(inMaint, "drain"), tr(operational)}},
			InMaintenance:       pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{tr(required, "restore")}},
		}, ""},
		{"restore before the drain in one transition", pitstopv1alpha1.StatesSpec{
			Operational:         pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{tr(inMaint, "drain")}},
			MaintenanceRequired: pitstopv1alpha1.StateSpec{},
			InMaintenance:       pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{tr(operational, "restore", "drain")}},
		}, "spec.states.inMaintenance.transitions[0].triggers"},
		{"drain straight back to operational", pitstopv1alpha1.StatesSpec{
			Operational:         pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{tr(required)}},
			MaintenanceRequired: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{tr(operational, "drain")}},
		}, "spec.states.maintenanceRequired.transitions[0].triggers"},
		{"no drain at all", pitstopv1alpha1.StatesSpec{
			Operational:   pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{tr(inMaint, "mark")}},
			InMaintenance: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{tr(operational)}},
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile(&pitstopv1alpha1.MaintenanceProfile{
				ObjectMeta: metav1.ObjectMeta{Name: "os"},
				Spec: pitstopv1alpha1.MaintenanceProfileSpec{
					Checks: []pitstopv1alpha1.CheckInstance{{Name: "needed", HasAnnotation: &pitstopv1alpha1.KeyValueCheck{Key: "reboot-needed"}}},
					Triggers: []pitstopv1alpha1.TriggerInstance{
						{Name: "drain", Drain: &pitstopv1alpha1.DrainTrigger{}},
						{Name: "restore", Restore: &pitstopv1alpha1.RestoreTrigger{}},
						{Name: "mark", AlterLabel: &pitstopv1alpha1.AlterTrigger{Key: "mark", Remove: true}},
					},
					States: tc.states,
				},
			})
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantErr != "" && err == nil:
				t.Fatalf("accepted, want an error with %q", tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Fatalf("error %q lacks %q", err, tc.wantErr)
			}
		})
	}
}
