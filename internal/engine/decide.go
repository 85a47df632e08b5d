package engine

import (
	"fmt"
	"strings"
	"time"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/plugin/check"
)

// CheckEvaluation is one check's answer inside a transition's evaluation,
// kept for people (the dashboard, `pitstop explain`).
type CheckEvaluation struct {
	Name   string `json:"name"`
	Passed bool   `json:"passed"`
	Reason string `json:"reason,omitempty"`
	Error  string `json:"error,omitempty"`
	// NextChange is when the answer can change by itself, if it can.
	NextChange *time.Time `json:"nextChange,omitempty"`
}

// NewCheckEvaluation is a check's answer for people: its result, or the
// error that kept it from being evaluated.
func NewCheckEvaluation(name string, r check.Result, err error) CheckEvaluation {
	if err != nil {
		return CheckEvaluation{Name: name, Error: err.Error()}
	}
	ce := CheckEvaluation{Name: name, Passed: r.Passed, Reason: r.Reason}
	if !r.NextChange.IsZero() {
		ce.NextChange = &r.NextChange
	}
	return ce
}

// TransitionEvaluation is the evaluation of one transition of the current
// state.
type TransitionEvaluation struct {
	Index  int                              `json:"index"`
	Check  string                           `json:"check"`
	Next   pitstopv1alpha1.MaintenanceState `json:"next"`
	Passed bool                             `json:"passed"`
	Checks []CheckEvaluation                `json:"checks,omitempty"`
	// Blocked says why a passing transition is not taken.
	Blocked string `json:"blocked,omitempty"`
}

// Input is what Decide needs for one node in one profile.
type Input struct {
	// State is the node's current state in the profile.
	State pitstopv1alpha1.MaintenanceState
	// Transitions are the current state's transitions, compiled.
	Transitions []CompiledTransition
	// Results and Errors are the answers of the checks the transitions use.
	Results map[string]check.Result
	Errors  map[string]error
	// HeldElsewhere names another profile holding the node in maintenance,
	// or is empty. At most one profile holds a node in maintenance.
	HeldElsewhere string
}

// Decision is what the node should do now.
type Decision struct {
	// Take is the index of the transition to take, or -1 to stay.
	Take int `json:"take"`
	// Evaluations explain every transition of the current state, in order.
	Evaluations []TransitionEvaluation `json:"evaluations"`
	// NextChange is the earliest time a check's answer can change by
	// itself; zero when only a change in the cluster can.
	NextChange time.Time `json:"nextChange"`
	// Entering says what the enter triggers of the node's state, not all
	// done since it entered, wait for; the state's transitions are not
	// evaluated until they are (Evaluations is empty).
	Entering string `json:"entering,omitempty"`
}

// EnteringDecision is the decision about a node whose state's enter
// triggers are not done: it stays, and why says what they wait for.
func EnteringDecision(state pitstopv1alpha1.MaintenanceState, triggers []string, why string) Decision {
	text := fmt.Sprintf("entering %s: its enter triggers (%s) run before its transitions", state, strings.Join(triggers, ", "))
	if why != "" {
		text = fmt.Sprintf("entering %s: %s", state, why)
	}
	return Decision{Take: -1, Entering: text}
}

// Decide evaluates the current state's transitions in order; the first one
// whose check passes, and that does not lead into maintenance while
// another profile holds the node there, is taken. A check that could not be
// evaluated fails its transition.
func Decide(in Input) Decision {
	d := Decision{Take: -1}
	for _, r := range in.Results {
		if !r.NextChange.IsZero() && (d.NextChange.IsZero() || r.NextChange.Before(d.NextChange)) {
			d.NextChange = r.NextChange
		}
	}
	for i, t := range in.Transitions {
		ev := TransitionEvaluation{Index: i, Check: t.Expression.String(), Next: t.Next}
		passed := map[string]bool{}
		failedToEvaluate := false
		for _, name := range t.Expression.Names() {
			ce := NewCheckEvaluation(name, in.Results[name], in.Errors[name])
			if ce.Error != "" {
				failedToEvaluate = true
			} else {
				passed[name] = ce.Passed
			}
			ev.Checks = append(ev.Checks, ce)
		}
		ok, err := t.Expression.Eval(passed)
		ev.Passed = ok && err == nil && !failedToEvaluate
		switch {
		case err != nil:
			ev.Blocked = fmt.Sprintf("evaluating %q: %v", t.Expression.String(), err)
		case failedToEvaluate && ok:
			ev.Blocked = "a check could not be evaluated"
		case ev.Passed && t.Next == pitstopv1alpha1.StateInMaintenance && in.HeldElsewhere != "":
			ev.Blocked = fmt.Sprintf("the node is in maintenance for profile %s", in.HeldElsewhere)
		}
		if ev.Passed && ev.Blocked == "" && d.Take < 0 {
			d.Take = i
		}
		d.Evaluations = append(d.Evaluations, ev)
	}
	return d
}

// Blocking lists what keeps the node where it is, for people: each
// transition's reason not to be taken, and each check that failed with its
// reason, once each.
func (d Decision) Blocking() []string {
	var out []string
	seen := map[string]bool{}
	add := func(s string) {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	add(d.Entering)
	for _, t := range d.Evaluations {
		add(t.Blocked)
		for _, c := range t.Checks {
			switch {
			case c.Error != "":
				add(c.Name + ": " + c.Error)
			case !c.Passed:
				add(c.Name + ": " + c.Reason)
			}
		}
	}
	return out
}
