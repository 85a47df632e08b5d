package fleet

import (
	"slices"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/budget"
	"github.com/pitstop-dev/pitstop/internal/engine"
	"github.com/pitstop-dev/pitstop/internal/plugin/check"
)

// Decided is the engine's last evaluation of a node in one profile: the
// decision, the state it was made in (entered at since), and when.
type Decided struct {
	state    pitstopv1alpha1.MaintenanceState
	since    time.Time
	At       time.Time
	Decision engine.Decision
}

// Decisions keeps each node's last evaluation per profile, as the engine
// made it: for the node's notifications (what blocks it) and for the
// dashboard, which serves them rather than run the checks again.
type Decisions struct {
	mu     sync.Mutex
	byNode map[string]map[string]Decided
}

// NewDecisions keeps no decision yet.
func NewDecisions() *Decisions { return &Decisions{byNode: map[string]map[string]Decided{}} }

// Remember keeps the decision made for a node in state pr. The engine
// goes on writing why its transition waits into d after this call: the
// evaluations are copied, so that what the dashboard reads meanwhile
// never changes under it.
func (ds *Decisions) Remember(node, profile string, pr engine.ProfileRecord, d engine.Decision, now time.Time) {
	d.Evaluations = slices.Clone(d.Evaluations)
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if ds.byNode[node] == nil {
		ds.byNode[node] = map[string]Decided{}
	}
	ds.byNode[node][profile] = Decided{state: pr.Current, since: pr.Since.Time, At: now, Decision: d}
}

// Forget drops the decisions about a node that is gone.
func (ds *Decisions) Forget(node string) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	delete(ds.byNode, node)
}

// ForgetProfile drops the last evaluation of a profile the node left.
func (ds *Decisions) ForgetProfile(node, profile string) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	delete(ds.byNode[node], profile)
}

// Of returns the last evaluation of each profile for a node.
func (ds *Decisions) Of(node string) map[string]engine.Decision {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	out := map[string]engine.Decision{}
	for k, v := range ds.byNode[node] {
		out[k] = v.Decision
	}
	return out
}

// Last is the engine's last decision for the node in profile, made in the
// state the node is in (pr); false when this replica has made none since
// it started (it is on standby, say) or the node has moved on since.
func (ds *Decisions) Last(node, profile string, pr engine.ProfileRecord) (Decided, bool) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	d, ok := ds.byNode[node][profile]
	// A decision made while the state's enter triggers ran is stale once
	// the record says they are done.
	if !ok || d.state != pr.Current || !d.since.Equal(pr.Since.Time) || d.Decision.Entering != "" && !pr.Entering {
		return Decided{}, false
	}
	return d, true
}

// ServedEvaluator returns an Evaluator that reads through reader (the
// manager's cache) and runs no check: a node's evaluations are the
// engine's last decisions about it (decisions), with the engine's compiled
// profiles and records. It is what the dashboard serves, so that no
// request costs a check (a prometheusInstant check, a query to
// Prometheus); the engine evaluates a node whenever it or what its checks
// read changes, and when a check's answer is due to change by itself.
// Where this replica has no decision about a node (it is on standby, or
// has not reached the node since it started), the decision is rebuilt
// from the results the engine recorded on the node (recordedDecision).
// The fleet view still answers timeWindow and freeze checks for now: they
// read the clock and nothing else.
func ServedEvaluator(reader client.Reader, profiles *Registry, records *Records, decisions *Decisions) *Evaluator {
	return &Evaluator{reader: reader, profiles: profiles, records: records, slots: &budget.Slots{Cache: reader}, decided: decisions}
}

// Reasons given for the check results of a recordedDecision.
const (
	recordedPass = "passed on the engine's last evaluation (its reason is known to the replica that made it)"
	recordedFail = "failed on the engine's last evaluation (its reason is known to the replica that made it)"
	notRecorded  = "not evaluated yet"
	// recordedBlocked is why a transition whose checks passed, as
	// recorded, is not taken: the record does not say.
	recordedBlocked = "its checks passed on the engine's last evaluation; what it waits for (a trigger, a budget slot) is known to the replica that made it"
)

// recordedDecision rebuilds the decision about the node in profile c from
// the record alone: each check of the current state's transitions passed
// or failed as the engine last recorded it on the node, without a reason.
func recordedDecision(c *Compiled, record engine.Record, profile string, now time.Time) engine.Decision {
	pr := record.Profiles[profile]
	if c.Engine.Entering(pr) {
		return engine.EnteringDecision(pr.Current, c.Engine.EnterLeft(pr), WaitingToRetry(pr, now))
	}
	in := engine.Input{State: pr.Current, Transitions: c.Engine.Transitions[pr.Current], Results: map[string]check.Result{}, Errors: map[string]error{}}
	if held := record.HeldBy(); held != "" && held != profile {
		in.HeldElsewhere = held
	}
	for _, t := range in.Transitions {
		for _, n := range t.Expression.Names() {
			passed, ok := pr.Checks[n]
			switch {
			case !ok:
				in.Results[n] = check.Result{Reason: notRecorded}
			case passed:
				in.Results[n] = check.Result{Passed: true, Reason: recordedPass}
			default:
				in.Results[n] = check.Result{Reason: recordedFail}
			}
		}
	}
	d := engine.Decide(in)
	if d.Take >= 0 {
		d.Evaluations[d.Take].Blocked = WaitingToRetry(pr, now)
		if d.Evaluations[d.Take].Blocked == "" {
			d.Evaluations[d.Take].Blocked = recordedBlocked
		}
	}
	return d
}
