package fleet

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/engine"
	"github.com/pitstop-dev/pitstop/internal/plugin/check"
)

// decidedProfile: a node needing a reboot goes into maintenance when
// approved, and out when it no longer needs one.
func decidedProfile(t *testing.T) *Compiled {
	t.Helper()
	c, err := Compile(&pitstopv1alpha1.MaintenanceProfile{
		ObjectMeta: metav1.ObjectMeta{Name: "reboot"},
		Spec: pitstopv1alpha1.MaintenanceProfileSpec{
			Checks: []pitstopv1alpha1.CheckInstance{
				{Name: "wanted", HasAnnotation: &pitstopv1alpha1.KeyValueCheck{Key: "reboot-needed"}},
				{Name: "approved", HasLabel: &pitstopv1alpha1.KeyValueCheck{Key: "approved"}},
			},
			States: pitstopv1alpha1.StatesSpec{
				Operational:         pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "wanted", Next: pitstopv1alpha1.StateMaintenanceRequired}}},
				MaintenanceRequired: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "wanted && approved", Next: pitstopv1alpha1.StateInMaintenance}}},
				InMaintenance:       pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "!wanted", Next: pitstopv1alpha1.StateOperational}}},
			},
		},
	}, check.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestARecordedDecisionSaysWhatTheRecordKnows: a replica that has not
// evaluated a node (a standby) answers with the check results the engine
// recorded on it, without reasons, and never claims that a transition
// whose checks passed is free to be taken: something the record does not
// tell blocks it, or the node would have moved.
func TestARecordedDecisionSaysWhatTheRecordKnows(t *testing.T) {
	c := decidedProfile(t)
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	retryAt := metav1.NewMicroTime(now.Add(time.Minute))
	for _, tc := range []struct {
		name   string
		pr     engine.ProfileRecord
		others map[string]engine.ProfileRecord
		want   string // the transition: passed, blocked; each check: name, passed, reason
	}{
		{"each check as recorded, without its reason",
			engine.ProfileRecord{Current: pitstopv1alpha1.StateMaintenanceRequired, Checks: map[string]bool{"wanted": true, "approved": false}}, nil,
			"false : [approved false " + recordedFail + "] [wanted true " + recordedPass + "]"},
		{"a check the record lacks is not evaluated yet",
			engine.ProfileRecord{Current: pitstopv1alpha1.StateMaintenanceRequired, Checks: map[string]bool{"wanted": true}}, nil,
			"false : [approved false " + notRecorded + "] [wanted true " + recordedPass + "]"},
		{"a transition that passed waits for what only the evaluating replica knows",
			engine.ProfileRecord{Current: pitstopv1alpha1.StateMaintenanceRequired, Checks: map[string]bool{"wanted": true, "approved": true}}, nil,
			"true " + recordedBlocked + ": [approved true " + recordedPass + "] [wanted true " + recordedPass + "]"},
		{"a transition that passed waits for its retry, as the record says",
			engine.ProfileRecord{Current: pitstopv1alpha1.StateMaintenanceRequired, Checks: map[string]bool{"wanted": true, "approved": true}, Failures: 2, LastError: "trigger drain: boom", RetryAt: &retryAt}, nil,
			"true attempt 2 failed (trigger drain: boom); the next one is at 2026-11-22T10:01:00Z: [approved true " + recordedPass + "] [wanted true " + recordedPass + "]"},
		{"another profile holds the node in maintenance",
			engine.ProfileRecord{Current: pitstopv1alpha1.StateMaintenanceRequired, Checks: map[string]bool{"wanted": true, "approved": true}},
			map[string]engine.ProfileRecord{"kernel": {Current: pitstopv1alpha1.StateInMaintenance}},
			"true the node is in maintenance for profile kernel: [approved true " + recordedPass + "] [wanted true " + recordedPass + "]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			record := engine.Record{Profiles: map[string]engine.ProfileRecord{"reboot": tc.pr}}
			for name, pr := range tc.others {
				record.Profiles[name] = pr
			}
			d := recordedDecision(c, record, "reboot", now)
			if len(d.Evaluations) != 1 {
				t.Fatalf("%d transitions, want 1: %+v", len(d.Evaluations), d)
			}
			tr := d.Evaluations[0]
			var checks []string
			for _, ce := range tr.Checks {
				checks = append(checks, fmt.Sprintf("[%s %v %s]", ce.Name, ce.Passed, ce.Reason))
			}
			if got := fmt.Sprintf("%v %s: %s", tr.Passed, tr.Blocked, strings.Join(checks, " ")); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestTheLastDecisionIsOnlyServedForTheStateItWasMadeIn: once the node
// has moved on (or left and come back to the same state), the decision
// made before is not the node's any more.
func TestTheLastDecisionIsOnlyServedForTheStateItWasMadeIn(t *testing.T) {
	since := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	r := NewDecisions()
	made := engine.ProfileRecord{Current: pitstopv1alpha1.StateMaintenanceRequired, Since: engine.Stamp{Time: since}}
	r.Remember("n", "reboot", made, engine.Decision{Take: -1, Evaluations: []engine.TransitionEvaluation{{Check: "approved"}}}, since.Add(time.Second))
	for _, tc := range []struct {
		name string
		pr   engine.ProfileRecord
		want bool
	}{
		{"the same state, entered at the same time", made, true},
		{"another state", engine.ProfileRecord{Current: pitstopv1alpha1.StateInMaintenance, Since: engine.Stamp{Time: since.Add(time.Minute)}}, false},
		{"the same state, entered again", engine.ProfileRecord{Current: pitstopv1alpha1.StateMaintenanceRequired, Since: engine.Stamp{Time: since.Add(time.Hour)}}, false},
	} {
		if _, ok := r.Last("n", "reboot", tc.pr); ok != tc.want {
			t.Errorf("%s: served %v, want %v", tc.name, ok, tc.want)
		}
	}
	if d, _ := r.Last("n", "reboot", made); !d.At.Equal(since.Add(time.Second)) || d.Decision.Evaluations[0].Check != "approved" {
		t.Errorf("the decision served is %+v", d)
	}
	r.Forget("n")
	if _, ok := r.Last("n", "reboot", made); ok {
		t.Error("a decision about a node that is gone is still served")
	}
}

// TestADecisionWhileEnteringIsServedOnlyWhileTheRecordSaysSo: a node
// whose state's enter triggers run gets no transitions from the record
// (they are not evaluated yet), only what it waits for; the engine's
// decision made while they ran is not served once the record says they
// are done.
func TestADecisionWhileEnteringIsServedOnlyWhileTheRecordSaysSo(t *testing.T) {
	c, err := Compile(&pitstopv1alpha1.MaintenanceProfile{
		ObjectMeta: metav1.ObjectMeta{Name: "reboot"},
		Spec: pitstopv1alpha1.MaintenanceProfileSpec{
			Checks:   []pitstopv1alpha1.CheckInstance{{Name: "wanted", HasAnnotation: &pitstopv1alpha1.KeyValueCheck{Key: "reboot-needed"}}},
			Triggers: []pitstopv1alpha1.TriggerInstance{{Name: "mark", AlterLabel: &pitstopv1alpha1.AlterTrigger{Key: "mark", Remove: true}}},
			States: pitstopv1alpha1.StatesSpec{
				Operational:   pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "wanted", Next: pitstopv1alpha1.StateInMaintenance}}},
				InMaintenance: pitstopv1alpha1.StateSpec{Enter: []string{"mark"}, Transitions: []pitstopv1alpha1.Transition{{Check: "!wanted", Next: pitstopv1alpha1.StateOperational}}},
			},
		},
	}, check.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	since := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	entering := engine.ProfileRecord{Current: pitstopv1alpha1.StateInMaintenance, Since: engine.Stamp{Time: since}, Entering: true, Checks: map[string]bool{"wanted": false}}
	d := recordedDecision(c, engine.Record{Profiles: map[string]engine.ProfileRecord{"reboot": entering}}, "reboot", since.Add(time.Second))
	if d.Take != -1 || len(d.Evaluations) != 0 || d.Entering != "entering in-maintenance: its enter triggers (mark) run before its transitions" {
		t.Errorf("recorded decision while entering: %+v", d)
	}
	if got := d.Blocking(); len(got) != 1 || got[0] != d.Entering {
		t.Errorf("blocking = %q, want what the enter triggers wait for", got)
	}

	r := NewDecisions()
	r.Remember("n", "reboot", entering, engine.EnteringDecision(entering.Current, []string{"mark"}, "trigger mark: waiting"), since)
	if _, ok := r.Last("n", "reboot", entering); !ok {
		t.Error("the decision made while entering is not served while the record says so")
	}
	entered := entering
	entered.Entering = false
	if _, ok := r.Last("n", "reboot", entered); ok {
		t.Error("the decision made while entering is served after the enter triggers are done")
	}
}
