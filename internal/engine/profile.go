package engine

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

// CompiledTransition is a transition with its check expression compiled.
type CompiledTransition struct {
	Expression *Expression
	Triggers   []string
	Next       pitstopv1alpha1.MaintenanceState
}

// Profile is a MaintenanceProfile compiled: every expression parsed and
// every name resolved. Only a profile that compiles is ever run.
type Profile struct {
	Name        string
	Generation  int64
	Transitions map[pitstopv1alpha1.MaintenanceState][]CompiledTransition
	// Enter are the triggers each state runs once a node has entered it.
	Enter map[pitstopv1alpha1.MaintenanceState][]string
}

// stateEntry is a state with its field name and its spec's place.
type stateEntry struct {
	State pitstopv1alpha1.MaintenanceState
	Field string
	Spec  func(*pitstopv1alpha1.StatesSpec) *pitstopv1alpha1.StateSpec
}

// States lists the states with their field names, in order.
var States = []stateEntry{
	{pitstopv1alpha1.StateOperational, "operational", func(s *pitstopv1alpha1.StatesSpec) *pitstopv1alpha1.StateSpec { return &s.Operational }},
	{pitstopv1alpha1.StateMaintenanceRequired, "maintenanceRequired", func(s *pitstopv1alpha1.StatesSpec) *pitstopv1alpha1.StateSpec { return &s.MaintenanceRequired }},
	{pitstopv1alpha1.StateInMaintenance, "inMaintenance", func(s *pitstopv1alpha1.StatesSpec) *pitstopv1alpha1.StateSpec { return &s.InMaintenance }},
}

// Compile checks and compiles a profile's transitions. Every problem is
// reported with its field path, for example
// spec.states.maintenanceRequired.transitions[0].check: 1:11: undeclared
// reference to 'windw'. A check whose name expressions cannot refer to is
// refused at its name, and left out of the transitions' expressions.
// Plugin configurations are checked by the plugins.
func Compile(p *pitstopv1alpha1.MaintenanceProfile) (*Profile, error) {
	var errs field.ErrorList
	checks := make([]string, 0, len(p.Spec.Checks))
	for i, c := range p.Spec.Checks {
		if !isCheckName(c.Name) {
			errs = append(errs, field.Invalid(field.NewPath("spec", "checks").Index(i).Child("name"), c.Name,
				"not a name expressions can refer to: a check name is letters, digits and _, and no word of CEL, their language (such as in, true, null, int, map or type)"))
			continue
		}
		checks = append(checks, c.Name)
	}
	triggers := map[string]bool{}
	for _, t := range p.Spec.Triggers {
		triggers[t.Name] = true
	}
	out := &Profile{Name: p.Name, Generation: p.Generation, Transitions: map[pitstopv1alpha1.MaintenanceState][]CompiledTransition{},
		Enter: map[pitstopv1alpha1.MaintenanceState][]string{}}
	states := p.Spec.States
	for _, st := range States {
		enter := st.Spec(&states).Enter
		for j, name := range enter {
			if !triggers[name] {
				errs = append(errs, field.Invalid(field.NewPath("spec", "states", st.Field, "enter").Index(j), name, "no trigger of that name in spec.triggers"))
			}
		}
		if len(enter) > 0 {
			out.Enter[st.State] = enter
		}
		path := field.NewPath("spec", "states", st.Field, "transitions")
		for i, t := range st.Spec(&states).Transitions {
			expr, err := CompileExpression(t.Check, checks)
			if err != nil {
				errs = append(errs, field.Invalid(path.Index(i).Child("check"), t.Check, err.Error()))
				continue
			}
			for j, name := range t.Triggers {
				if !triggers[name] {
					errs = append(errs, field.Invalid(path.Index(i).Child("triggers").Index(j), name, "no trigger of that name in spec.triggers"))
				}
			}
			out.Transitions[st.State] = append(out.Transitions[st.State], CompiledTransition{Expression: expr, Triggers: t.Triggers, Next: t.Next})
		}
	}
	if len(errs) == 0 {
		errs = undrainedReturns(p)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("MaintenanceProfile %s: %w", p.Name, errors.Join(toErrors(errs)...))
	}
	return out, nil
}

// undrainedReturns refuses a profile in which a node drained by a drain
// trigger could reach operational again without a restore trigger on the
// way: it would stay cordoned, and its drain's NodeMaintenance would stay
// behind, while the profile counts it operational. A state is drained when
// a transition into it drains the node (a drain trigger not followed by a
// restore, in the transition's triggers and then the state's enter
// triggers), or when a transition without a restore leaves a drained state
// for it.
func undrainedReturns(p *pitstopv1alpha1.MaintenanceProfile) field.ErrorList {
	kinds := map[string]string{}
	for _, t := range p.Spec.Triggers {
		switch {
		case t.Drain != nil, t.Cordon != nil:
			kinds[t.Name] = "drain"
		case t.Restore != nil:
			kinds[t.Name] = "restore"
		}
	}
	// A transition's triggers all run again at each evaluation until each
	// is done: a restore after a drain in one list would have the drain
	// start over, and the transition never be taken.
	var errs field.ErrorList
	for _, st := range States {
		path := field.NewPath("spec", "states", st.Field, "transitions")
		for i, t := range st.Spec(&p.Spec.States).Transitions {
			drain := ""
			for j, name := range t.Triggers {
				switch {
				case kinds[name] == "drain":
					drain = name
				case kinds[name] == "restore" && drain != "":
					errs = append(errs, field.Invalid(path.Index(i).Child("triggers").Index(j), name,
						fmt.Sprintf("restores the node trigger %s drained in the same transition, which would drain again and never be done; restore on the way out of the state, or list both in the state's enter triggers, which run one after the other", drain)))
				}
			}
		}
	}
	if len(errs) > 0 {
		return errs
	}
	// drainedBy says, for each drained state, where its drain was started.
	drainedBy := map[pitstopv1alpha1.MaintenanceState]string{}
	states := p.Spec.States
	for changed := true; changed; {
		changed, errs = false, nil
		for _, st := range States {
			path := field.NewPath("spec", "states", st.Field, "transitions")
			for i, t := range st.Spec(&states).Transitions {
				if t.Next == st.State {
					continue
				}
				from, drained := drainedBy[st.State]
				run := func(names []string, at *field.Path) {
					for j, name := range names {
						switch kinds[name] {
						case "drain":
							from, drained = fmt.Sprintf("trigger %s (%s)", name, at.Index(j)), true
						case "restore":
							drained = false
						}
					}
				}
				run(t.Triggers, path.Index(i).Child("triggers"))
				into := stateOf(t.Next)
				run(into.Spec(&states).Enter, field.NewPath("spec", "states", into.Field, "enter"))
				if !drained {
					continue
				}
				if t.Next == pitstopv1alpha1.StateOperational {
					errs = append(errs, field.Invalid(path.Index(i).Child("triggers"), t.Triggers,
						fmt.Sprintf("a node cordoned by %s (a drain or a cordon) returns to operational here without a restore trigger after it, and would stay cordoned; add a restore trigger to this transition or to operational's enter triggers", from)))
				}
				if _, done := drainedBy[t.Next]; !done {
					drainedBy[t.Next], changed = from, true
				}
			}
		}
	}
	return errs
}

// stateOf is the entry of States for state s (every state the API
// accepts has one).
func stateOf(s pitstopv1alpha1.MaintenanceState) stateEntry {
	for _, st := range States {
		if st.State == s {
			return st
		}
	}
	return stateEntry{State: s, Field: string(s), Spec: func(*pitstopv1alpha1.StatesSpec) *pitstopv1alpha1.StateSpec { return &pitstopv1alpha1.StateSpec{} }}
}

// Passes says whether a transition of the record's state passes on the
// check results the record keeps from the node's last evaluation: whether
// the node was moving on (its triggers running, say, or its state's enter
// triggers) rather than waiting
// for a check. A budget slot that could not be taken is recorded as its
// check failing, so a node waiting for a slot does not pass.
func (p *Profile) Passes(pr ProfileRecord) bool {
	if p.Entering(pr) {
		return true // its enter triggers are running
	}
	for _, t := range p.Transitions[pr.Current] {
		if ok, err := t.Expression.Eval(pr.Checks); err == nil && ok {
			return true
		}
	}
	return false
}

// Entering says whether the node has entered its state in the record and
// the state's enter triggers are not done yet: its transitions wait for
// them.
func (p *Profile) Entering(pr ProfileRecord) bool {
	return pr.Entering && len(p.EnterLeft(pr)) > 0
}

// EnterLeft are the enter triggers of the record's state not done yet.
func (p *Profile) EnterLeft(pr ProfileRecord) []string {
	enter := p.Enter[pr.Current]
	return enter[min(pr.EnterDone, len(enter)):]
}

func toErrors(list field.ErrorList) []error {
	out := make([]error, 0, len(list))
	for _, e := range list {
		out = append(out, e)
	}
	return out
}
