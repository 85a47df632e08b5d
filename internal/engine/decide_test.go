package engine

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/plugin/check"
)

var (
	operational = pitstopv1alpha1.StateOperational
	required    = pitstopv1alpha1.StateMaintenanceRequired
	inMaint     = pitstopv1alpha1.StateInMaintenance
)

func transitions(t *testing.T, names []string, ts ...pitstopv1alpha1.Transition) []CompiledTransition {
	t.Helper()
	var out []CompiledTransition
	for _, tr := range ts {
		e, err := CompileExpression(tr.Check, names)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, CompiledTransition{Expression: e, Triggers: tr.Triggers, Next: tr.Next})
	}
	return out
}

func TestDecide(t *testing.T) {
	names := []string{"window", "budget", "healthy", "done"}
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	pass := func(reason string) check.Result { return check.Result{Passed: true, Reason: reason} }
	fail := func(reason string, next time.Time) check.Result {
		return check.Result{Passed: false, Reason: reason, NextChange: next}
	}
	for _, tc := range []struct {
		name      string
		ts        []pitstopv1alpha1.Transition
		results   map[string]check.Result
		errs      map[string]error
		held      string
		take      int
		blocked   string
		nextCheck time.Time
	}{
		{
			name:    "takes the first transition whose check passes",
			ts:      []pitstopv1alpha1.Transition{{Check: "done", Next: operational}, {Check: "window && budget", Next: inMaint}},
			results: map[string]check.Result{"window": pass("open"), "budget": pass("1 of 2 taken")},
			take:    1,
		},
		{
			name:      "stays when no check passes, and says when a window opens",
			ts:        []pitstopv1alpha1.Transition{{Check: "window && budget", Next: inMaint}},
			results:   map[string]check.Result{"window": fail("opens at 22:00", at.Add(12*time.Hour)), "budget": pass("")},
			take:      -1,
			nextCheck: at.Add(12 * time.Hour),
		},
		{
			name:    "an empty check passes",
			ts:      []pitstopv1alpha1.Transition{{Next: required}},
			results: map[string]check.Result{},
			take:    0,
		},
		{
			name:    "a check that could not be evaluated fails its transition",
			ts:      []pitstopv1alpha1.Transition{{Check: "!healthy", Next: inMaint}},
			errs:    map[string]error{"healthy": errors.New("prometheus: connection refused")},
			take:    -1,
			blocked: "could not be evaluated",
		},
		{
			name:    "never into maintenance while another profile holds the node there",
			ts:      []pitstopv1alpha1.Transition{{Check: "window", Next: inMaint}, {Check: "done", Next: operational}},
			results: map[string]check.Result{"window": pass(""), "done": pass("")},
			held:    "os-update",
			take:    1,
			blocked: "in maintenance for profile os-update",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(Input{State: required, Transitions: transitions(t, names, tc.ts...), Results: tc.results, Errors: tc.errs, HeldElsewhere: tc.held})
			if d.Take != tc.take {
				t.Errorf("Take = %d, want %d (evaluations %+v)", d.Take, tc.take, d.Evaluations)
			}
			if len(d.Evaluations) != len(tc.ts) {
				t.Fatalf("%d evaluations for %d transitions", len(d.Evaluations), len(tc.ts))
			}
			if tc.blocked != "" && !strings.Contains(d.Evaluations[0].Blocked, tc.blocked) {
				t.Errorf("blocked = %q, want it to say %q", d.Evaluations[0].Blocked, tc.blocked)
			}
			if !d.NextChange.Equal(tc.nextCheck) {
				t.Errorf("NextChange = %v, want %v", d.NextChange, tc.nextCheck)
			}
		})
	}
}

func TestDecideKeepsEveryCheckResult(t *testing.T) {
	ts := transitions(t, []string{"window", "budget"}, pitstopv1alpha1.Transition{Check: "window && budget", Next: inMaint})
	d := Decide(Input{State: required, Transitions: ts, Results: map[string]check.Result{
		"window": {Passed: true, Reason: "open until 04:00"},
		"budget": {Passed: false, Reason: "2 of 2 slots taken"},
	}})
	got := d.Evaluations[0].Checks
	if len(got) != 2 || got[0].Name != "budget" || got[0].Passed || got[0].Reason != "2 of 2 slots taken" || got[1].Name != "window" || !got[1].Passed {
		t.Errorf("check evaluations = %+v", got)
	}
}

func TestCompile(t *testing.T) {
	p := &pitstopv1alpha1.MaintenanceProfile{
		ObjectMeta: metav1.ObjectMeta{Name: "os-update"},
		Spec: pitstopv1alpha1.MaintenanceProfileSpec{
			Checks:   []pitstopv1alpha1.CheckInstance{{Name: "window"}, {Name: "reboot_needed"}},
			Triggers: []pitstopv1alpha1.TriggerInstance{{Name: "drain"}, {Name: "mark", AlterLabel: &pitstopv1alpha1.AlterTrigger{Key: "k", Value: ptr.To("v")}}},
			States: pitstopv1alpha1.StatesSpec{
				Operational:         pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "reboot_needed", Next: required}}},
				MaintenanceRequired: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "window", Triggers: []string{"drain", "mark"}, Next: inMaint}}},
				InMaintenance:       pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Next: operational}}},
			},
		},
	}
	compiled, err := Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(compiled.Transitions[required]) != 1 || compiled.Transitions[required][0].Next != inMaint {
		t.Errorf("compiled transitions = %+v", compiled.Transitions)
	}

	bad := p.DeepCopy()
	bad.Spec.States.MaintenanceRequired.Transitions[0].Check = "windw && reboot_needed"
	bad.Spec.States.MaintenanceRequired.Transitions[0].Triggers = []string{"drian"}
	bad.Spec.States.Operational.Transitions[0].Check = "reboot_needed &&"
	_, err = Compile(bad)
	for _, want := range []string{
		"MaintenanceProfile os-update",
		"spec.states.maintenanceRequired.transitions[0].check",
		"undeclared reference to 'windw'",
		"spec.states.operational.transitions[0].check",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Compile error %v does not contain %q", err, want)
		}
	}
	bad2 := p.DeepCopy()
	bad2.Spec.States.MaintenanceRequired.Transitions[0].Triggers = []string{"drain", "drian"}
	if _, err := Compile(bad2); err == nil || !strings.Contains(err.Error(), `spec.states.maintenanceRequired.transitions[0].triggers[1]: Invalid value: "drian": no trigger of that name`) {
		t.Errorf("unknown trigger: got %v", err)
	}
}
