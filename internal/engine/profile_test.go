package engine

import (
	"errors"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

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
				MaintenanceRequired: pitstopv1alpha1.StateSpec{Enter: []string{"mark"}, Transitions: []pitstopv1alpha1.Transition{
					{Check: "!needed", Next: operational},
					{Check: "budget || urgent", Next: inMaint},
				}},
				InMaintenance: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "", Next: operational}}},
			},
			Triggers: []pitstopv1alpha1.TriggerInstance{{Name: "mark", AlterLabel: &pitstopv1alpha1.AlterTrigger{Key: "mark", Remove: true}}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		state    pitstopv1alpha1.MaintenanceState
		checks   map[string]bool
		entering bool
		want     bool
	}{
		{"passes while the state's enter triggers run", required, map[string]bool{"needed": true, "budget": false}, true, true},
		{"an entering record of a state without enter triggers is judged by its checks", operational, map[string]bool{"needed": false}, true, false},
		{"fails when the only transition's check failed", operational, map[string]bool{"needed": false}, false, false},
		{"passes when the only transition's check passed", operational, map[string]bool{"needed": true}, false, true},
		{"fails when no check was recorded", operational, nil, false, false},
		{"fails when every transition's check failed (a budget slot not taken)", required, map[string]bool{"needed": true, "budget": false, "urgent": false}, false, false},
		{"passes when a later transition's check passed", required, map[string]bool{"needed": true, "budget": false, "urgent": true}, false, true},
		{"passes when the first transition's check passed", required, map[string]bool{"needed": false, "budget": false}, false, true},
		{"passes a transition without a check", inMaint, nil, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := p.Passes(ProfileRecord{Current: tc.state, Checks: tc.checks, Entering: tc.entering}); got != tc.want {
				t.Errorf("Passes = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCompileRefusesCheckNamesExpressionsCannotUse(t *testing.T) {
	for _, tc := range []struct {
		name, check, expression string
		// wantErr is the start of the error after the profile's name; empty
		// when the profile compiles.
		wantErr string
		// wantTransitionErr says the transition's expression is refused too.
		wantTransitionErr bool
	}{
		{"a type's name, which would fail every expression declaring it, is refused at the check alone",
			"map", "other", `spec.checks[0].name: Invalid value: "map": not a name expressions can refer to`, false},
		{"a reserved word is refused at the check", "in", "other", `spec.checks[0].name: Invalid value: "in"`, false},
		{"a literal is refused at the check", "true", "other", `spec.checks[0].name: Invalid value: "true"`, false},
		{"an expression using the refused check is refused as using an undeclared name",
			"int", "int && other", `spec.checks[0].name: Invalid value: "int"`, true},
		{"the name of a function is a name like any other", "size", "size && other", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile(&pitstopv1alpha1.MaintenanceProfile{
				ObjectMeta: metav1.ObjectMeta{Name: "p"},
				Spec: pitstopv1alpha1.MaintenanceProfileSpec{
					Checks: []pitstopv1alpha1.CheckInstance{{Name: tc.check}, {Name: "other"}},
					States: pitstopv1alpha1.StatesSpec{
						Operational: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: tc.expression, Next: required}}},
					},
				},
			})
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Compile: %v", err)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), "MaintenanceProfile p: "+tc.wantErr) {
				t.Fatalf("Compile: got %v, want an error starting with %q", err, tc.wantErr)
			}
			if got := strings.Contains(err.Error(), "spec.states.operational.transitions[0].check"); got != tc.wantTransitionErr {
				t.Errorf("Compile: %v; the transition refused: %v, want %v", err, got, tc.wantTransitionErr)
			}
		})
	}
}

// FuzzCompile compiles a profile whose checks and triggers are named by
// the words of checks and triggers, with one transition out of each state
// (the one out of maintenance-required running the triggers named in
// transitionTriggers). It compiles exactly when every check name can be
// referred to, every expression compiles against those names and every
// trigger a transition runs is declared; a profile that compiles mirrors
// its spec, and a refusal names only fields of the spec.
func FuzzCompile(f *testing.F) {
	f.Add("reboot_needed window budget", "drain restore", "reboot_needed", "window && budget", "!reboot_needed", "drain")
	f.Add("a", "t", "", "", "", "")
	f.Add("window", "drain", "windw", "window &&", "window == window", "drian")
	f.Add("map window", "drain", "window", "window", "window", "drain drain")
	f.Fuzz(func(t *testing.T, checks, triggers, operational, required, inMaintenance, transitionTriggers string) {
		p := &pitstopv1alpha1.MaintenanceProfile{ObjectMeta: metav1.ObjectMeta{Name: "fuzz"}}
		var names []string
		for _, name := range strings.Fields(checks) {
			p.Spec.Checks = append(p.Spec.Checks, pitstopv1alpha1.CheckInstance{Name: name})
			if isCheckName(name) {
				names = append(names, name)
			}
		}
		for _, name := range strings.Fields(triggers) {
			p.Spec.Triggers = append(p.Spec.Triggers, pitstopv1alpha1.TriggerInstance{Name: name})
		}
		p.Spec.States.Operational.Transitions = []pitstopv1alpha1.Transition{{Check: operational, Next: pitstopv1alpha1.StateMaintenanceRequired}}
		p.Spec.States.MaintenanceRequired.Transitions = []pitstopv1alpha1.Transition{{Check: required, Triggers: strings.Fields(transitionTriggers), Next: pitstopv1alpha1.StateInMaintenance}}
		p.Spec.States.InMaintenance.Transitions = []pitstopv1alpha1.Transition{{Check: inMaintenance, Next: pitstopv1alpha1.StateOperational}}

		wantOK := len(names) == len(p.Spec.Checks)
		for _, st := range States {
			for _, tr := range st.Spec(&p.Spec.States).Transitions {
				if _, err := CompileExpression(tr.Check, names); err != nil {
					wantOK = false
				}
				for _, name := range tr.Triggers {
					if !slices.ContainsFunc(p.Spec.Triggers, func(t pitstopv1alpha1.TriggerInstance) bool { return t.Name == name }) {
						wantOK = false
					}
				}
			}
		}

		compiled, err := Compile(p)
		if (compiled == nil) == (err == nil) {
			t.Fatalf("Compile returned %v and %v: want a profile or an error", compiled, err)
		}
		if err != nil {
			if wantOK {
				t.Fatalf("Compile refused a profile whose names and expressions are all valid: %v", err)
			}
			if !strings.HasPrefix(err.Error(), "MaintenanceProfile fuzz: ") {
				t.Errorf("the error does not name the profile: %v", err)
			}
			var fieldErr *field.Error
			list, ok := errors.Unwrap(err).(interface{ Unwrap() []error })
			if !ok {
				t.Fatalf("%v does not wrap a list of errors", err)
			}
			for _, e := range list.Unwrap() {
				if !errors.As(e, &fieldErr) || !strings.HasPrefix(fieldErr.Field, "spec.checks[") && !strings.HasPrefix(fieldErr.Field, "spec.states.") {
					t.Errorf("%v is not an error at a check's name or a transition", e)
				}
			}
			return
		}
		if !wantOK {
			t.Fatalf("Compile accepted a profile with a name or expression that does not compile")
		}
		for _, st := range States {
			spec := st.Spec(&p.Spec.States).Transitions
			got := compiled.Transitions[st.State]
			if len(got) != len(spec) {
				t.Fatalf("%s: %d transitions compiled, %d in the spec", st.Field, len(got), len(spec))
			}
			for i, tr := range got {
				if tr.Expression.String() != spec[i].Check || tr.Next != spec[i].Next || !slices.Equal(tr.Triggers, spec[i].Triggers) {
					t.Errorf("%s.transitions[%d] compiled as %+v, from %+v", st.Field, i, tr, spec[i])
				}
				for _, n := range tr.Expression.Names() {
					if !slices.Contains(names, n) {
						t.Errorf("%s.transitions[%d] uses %q, which is no check", st.Field, i, n)
					}
				}
			}
		}
	})
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
		}, "spec.states.inMaintenance.transitions[1].triggers: Invalid value: [\"mark\"]: a node cordoned by trigger drain (spec.states.maintenanceRequired.transitions[0].triggers[0]) (a drain or a cordon) returns to operational here without a restore trigger"},
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
		{"a cordon straight back to operational", pitstopv1alpha1.StatesSpec{
			Operational:         pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{tr(required, "cordon")}},
			MaintenanceRequired: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{tr(operational)}},
		}, "a node cordoned by trigger cordon (spec.states.operational.transitions[0].triggers[0]) (a drain or a cordon) returns to operational here without a restore trigger"},
		{"drain entering in-maintenance, restore entering operational", pitstopv1alpha1.StatesSpec{
			Operational:         pitstopv1alpha1.StateSpec{Enter: []string{"restore"}, Transitions: []pitstopv1alpha1.Transition{tr(required)}},
			MaintenanceRequired: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{tr(inMaint, "mark")}},
			InMaintenance:       pitstopv1alpha1.StateSpec{Enter: []string{"drain"}, Transitions: []pitstopv1alpha1.Transition{tr(operational), tr(operational, "mark")}},
		}, ""},
		{"drain entering in-maintenance, restore in one way out only", pitstopv1alpha1.StatesSpec{
			Operational:         pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{tr(required)}},
			MaintenanceRequired: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{tr(inMaint)}},
			InMaintenance:       pitstopv1alpha1.StateSpec{Enter: []string{"mark", "drain"}, Transitions: []pitstopv1alpha1.Transition{tr(operational, "restore"), tr(operational, "mark")}},
		}, "spec.states.inMaintenance.transitions[1].triggers: Invalid value: [\"mark\"]: a node cordoned by trigger drain (spec.states.inMaintenance.enter[1]) (a drain or a cordon) returns to operational here without a restore trigger after it, and would stay cordoned; add a restore trigger to this transition or to operational's enter triggers"},
		{"operational's enter restores after a transition's drain", pitstopv1alpha1.StatesSpec{
			Operational:         pitstopv1alpha1.StateSpec{Enter: []string{"restore"}, Transitions: []pitstopv1alpha1.Transition{tr(required)}},
			MaintenanceRequired: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{tr(operational, "drain")}},
		}, ""},
		{"a drain entering operational", pitstopv1alpha1.StatesSpec{
			Operational:         pitstopv1alpha1.StateSpec{Enter: []string{"restore", "drain"}, Transitions: []pitstopv1alpha1.Transition{tr(required)}},
			MaintenanceRequired: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{tr(operational)}},
		}, "a node cordoned by trigger drain (spec.states.operational.enter[1]) (a drain or a cordon) returns to operational here"},
		{"an enter trigger that does not exist", pitstopv1alpha1.StatesSpec{
			Operational:   pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{tr(inMaint)}},
			InMaintenance: pitstopv1alpha1.StateSpec{Enter: []string{"drian"}, Transitions: []pitstopv1alpha1.Transition{tr(operational, "restore")}},
		}, `spec.states.inMaintenance.enter[0]: Invalid value: "drian": no trigger of that name in spec.triggers`},
		{"a restore after the drain in one transition", pitstopv1alpha1.StatesSpec{
			Operational:   pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{tr(inMaint, "mark")}},
			InMaintenance: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{tr(operational, "drain", "mark", "restore")}},
		}, `spec.states.inMaintenance.transitions[0].triggers[2]: Invalid value: "restore": restores the node trigger drain drained in the same transition, which would drain again and never be done`},
		{"a restore after the drain in enter triggers", pitstopv1alpha1.StatesSpec{
			Operational:   pitstopv1alpha1.StateSpec{Enter: []string{"drain", "restore"}, Transitions: []pitstopv1alpha1.Transition{tr(inMaint, "mark")}},
			InMaintenance: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{tr(operational)}},
		}, ""},
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
						{Name: "cordon", Cordon: &pitstopv1alpha1.CordonTrigger{}},
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

// TestEnterLeftResumesAfterTheTriggersDone: a record's enter triggers
// left start after those it records done; with none left the node is not
// entering, whatever the record's flag says (the profile lost triggers).
func TestEnterLeftResumesAfterTheTriggersDone(t *testing.T) {
	p, err := Compile(&pitstopv1alpha1.MaintenanceProfile{
		ObjectMeta: metav1.ObjectMeta{Name: "os"},
		Spec: pitstopv1alpha1.MaintenanceProfileSpec{
			Triggers: []pitstopv1alpha1.TriggerInstance{
				{Name: "drain", Drain: &pitstopv1alpha1.DrainTrigger{}},
				{Name: "restore", Restore: &pitstopv1alpha1.RestoreTrigger{}},
			},
			States: pitstopv1alpha1.StatesSpec{
				Operational: pitstopv1alpha1.StateSpec{Enter: []string{"drain", "restore"}, Transitions: []pitstopv1alpha1.Transition{{Next: inMaint}}},
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	for done, want := range [][]string{{"drain", "restore"}, {"restore"}, {}, {}} {
		pr := ProfileRecord{Current: operational, Entering: true, EnterDone: done}
		if got := p.EnterLeft(pr); !slices.Equal(got, want) {
			t.Errorf("%d done: left %v, want %v", done, got, want)
		}
		if got := p.Entering(pr); got != (len(want) > 0) {
			t.Errorf("%d done: entering %v", done, got)
		}
	}
}
