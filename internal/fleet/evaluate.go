package fleet

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/prometheus/client_golang/prometheus"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/admission"
	"github.com/pitstop-dev/pitstop/internal/budget"
	"github.com/pitstop-dev/pitstop/internal/engine"
	"github.com/pitstop-dev/pitstop/internal/plugin/check"
	"github.com/pitstop-dev/pitstop/internal/plugin/trigger"
)

// checkDuration is how long each check plugin takes to answer.
var checkDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Name:    "pitstop_check_duration_seconds",
	Help:    "Time one check evaluation took, by plugin (hasLabel, maxMaintenance, prometheusInstant, ...).",
	Buckets: prometheus.ExponentialBuckets(0.00005, 4, 10), // 50 µs to about 13 s
}, []string{"plugin"})

func init() { metrics.Registry.MustRegister(checkDuration) }

// Evaluation is a profile's answer for a node: where the node stands, and
// every transition of its state with each check's result and reason. It is
// what the dashboard's node page and `pitstop explain` show.
type Evaluation struct {
	Profile string               `json:"profile"`
	Record  engine.ProfileRecord `json:"record"`
	// Decision is empty when Error is set.
	Decision engine.Decision `json:"decision"`
	// Evaluated is when the checks of Decision ran: the engine's last
	// evaluation of the node for the dashboard, now for `pitstop explain`.
	// Absent when Recorded.
	Evaluated *time.Time `json:"evaluated,omitempty"`
	// Recorded says that Decision is rebuilt from the check results the
	// engine recorded on the node, without their reasons: the replica that
	// answers has not evaluated the node since it started (it is on
	// standby, say).
	Recorded bool `json:"recorded,omitempty"`
	// Error says why the profile cannot be evaluated (it does not compile).
	Error string `json:"error,omitempty"`
}

// Evaluator evaluates nodes the way the engine does, without changing
// anything: from the API server in the command line, where it runs the
// checks; from the manager's cache in the dashboard, where it serves the
// engine's last decisions instead (ServedEvaluator).
type Evaluator struct {
	reader   client.Reader
	profiles *Registry
	records  *Records
	// slots reads the budgets' slot Leases, in any namespace, through
	// reader.
	slots *budget.Slots
	// decided, when set, has each node's decisions: they are served rather
	// than the checks run.
	decided *Decisions
}

// NewEvaluator evaluates from reader, running the checks.
func NewEvaluator(reader client.Reader, deps check.Deps) *Evaluator {
	return &Evaluator{reader: reader, profiles: NewRegistry(deps), records: NewRecords(), slots: &budget.Slots{Cache: reader}}
}

// Node evaluates every profile the node is in (selected, or still holding
// it in maintenance), in name order.
func (e *Evaluator) Node(ctx context.Context, node *corev1.Node, now time.Time) ([]Evaluation, error) {
	list := &pitstopv1alpha1.MaintenanceProfileList{}
	if err := e.reader.List(ctx, list); err != nil {
		return nil, err
	}
	view := &Cluster{ctx: ctx, reader: e.reader, profiles: list.Items, records: e.records, slots: e.slots}
	return e.node(ctx, view, node, now)
}

// Fleet evaluates every node, reading the profiles and the nodes once. A
// node whose record cannot be read is left out (Node reports why).
func (e *Evaluator) Fleet(ctx context.Context, now time.Time) (map[string][]Evaluation, error) {
	list := &pitstopv1alpha1.MaintenanceProfileList{}
	if err := e.reader.List(ctx, list); err != nil {
		return nil, err
	}
	nodes := &corev1.NodeList{}
	if err := e.reader.List(ctx, nodes); err != nil {
		return nil, err
	}
	view := &Cluster{ctx: ctx, reader: e.reader, profiles: list.Items, records: e.records, slots: e.slots, nodes: Pointers(nodes.Items), loaded: true}
	out := make(map[string][]Evaluation, len(nodes.Items))
	for i := range nodes.Items {
		evals, err := e.node(ctx, view, &nodes.Items[i], now)
		if err == nil {
			out[nodes.Items[i].Name] = evals
		}
	}
	return out, nil
}

func (e *Evaluator) node(ctx context.Context, view *Cluster, node *corev1.Node, now time.Time) ([]Evaluation, error) {
	record, err := engine.ReadRecord(node) // its own copy: Sync changes it
	if err != nil {
		return nil, err
	}
	byName := map[string]*pitstopv1alpha1.MaintenanceProfile{}
	var selected []string
	for i := range view.profiles {
		p := &view.profiles[i]
		byName[p.Name] = p
		if ok, err := engine.Selects(p, node); err == nil && ok {
			selected = append(selected, p.Name)
		}
	}
	record.Sync(selected, now) // as the engine would see it on its next pass
	var out []Evaluation
	for name, pr := range record.Profiles {
		ev := Evaluation{Profile: name, Record: pr}
		p := byName[name]
		if p == nil {
			ev.Error = "the profile was deleted; the node is still in maintenance for it"
			out = append(out, ev)
			continue
		}
		c, err := e.profiles.Get(p)
		if err != nil {
			ev.Error = err.Error()
		}
		switch {
		case c == nil:
		case e.decided != nil:
			e.served(&ev, c, node.Name, record, now)
		case c.Engine.Entering(pr):
			left := c.Engine.EnterLeft(pr)
			ev.Decision = engine.EnteringDecision(pr.Current, left, e.waiting(ctx, c, node, pr, left, pr.Previous, now))
			ev.Evaluated = &now
		default:
			_, ev.Decision = Evaluate(ctx, c, node, record, view, now)
			ev.Evaluated = &now
			if t := ev.Decision.Take; t >= 0 {
				ev.Decision.Evaluations[t].Blocked = e.waiting(ctx, c, node, pr, c.Engine.Transitions[pr.Current][t].Triggers, pr.Current, now)
				if ev.Decision.Evaluations[t].Blocked == "" {
					ev.Decision.Evaluations[t].Blocked = e.inLine(ctx, view, byName, c, node, pr, t, now)
				}
			}
		}
		out = append(out, ev)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Profile < out[j].Profile })
	return out, nil
}

// served fills in the engine's last decision about the node in profile c,
// or the one its record tells when this replica has made none.
func (e *Evaluator) served(ev *Evaluation, c *Compiled, node string, record engine.Record, now time.Time) {
	if last, ok := e.decided.Last(node, ev.Profile, ev.Record); ok {
		ev.Decision, ev.Evaluated = last.Decision, &last.At
		return
	}
	ev.Decision, ev.Recorded = recordedDecision(c, record, ev.Profile, now), true
}

// waiting says what the triggers of a transition whose check passes, or
// of a state being entered, still wait for: a retry after a failure, or a
// trigger (the drain, the restore). from is the state they leave.
func (e *Evaluator) waiting(ctx context.Context, c *Compiled, node *corev1.Node, pr engine.ProfileRecord, triggers []string, from pitstopv1alpha1.MaintenanceState, now time.Time) string {
	if why := WaitingToRetry(pr, now); why != "" {
		return why
	}
	for _, name := range triggers {
		o, ok := c.Triggers[name].(trigger.Observer)
		if !ok {
			continue
		}
		why, err := o.Waiting(ctx, e.reader, node, from)
		if err != nil {
			return fmt.Sprintf("trigger %s: %v", name, err)
		}
		if why != "" {
			return why
		}
	}
	return ""
}

// inLine says, for a transition into maintenance whose check passes, that
// the node waits for a budget slot as the engine would find it: every slot
// the cache shows is taken, or as many nodes have waited longer for the
// free ones as there are.
func (e *Evaluator) inLine(ctx context.Context, view *Cluster, profiles map[string]*pitstopv1alpha1.MaintenanceProfile, c *Compiled, node *corev1.Node, pr engine.ProfileRecord, take int, now time.Time) string {
	if pr.Current == pitstopv1alpha1.StateInMaintenance {
		return ""
	}
	req := admission.Request{Profile: c.Admission(), Transition: c.Engine.Transitions[pr.Current][take], Node: node, Since: pr.Since.Time, Now: now}
	return admission.Explain(ctx, e.slots, req, func(wakeKey string) int {
		if view.lines == nil {
			view.lines = e.lines(view, profiles)
		}
		return view.lines.Ahead(wakeKey, node.Name, pr.Since.Time)
	})
}

// lines are the nodes in line for each budget, as their records show their
// last evaluation: in a state whose transition into maintenance failed
// only for want of a slot.
func (e *Evaluator) lines(view *Cluster, profiles map[string]*pitstopv1alpha1.MaintenanceProfile) admission.Lines {
	lines := admission.Lines{}
	for _, node := range view.Nodes() {
		record, err := view.records.Read(node)
		if err != nil {
			continue
		}
		for name, pr := range record.Profiles {
			p := profiles[name]
			if p == nil || (record.HeldBy() != "" && record.HeldBy() != name) {
				continue
			}
			c, _ := e.profiles.Get(p)
			if c == nil {
				continue
			}
			for _, key := range admission.LineKeys(c.Admission(), node, pr.Current, pr.Checks) {
				lines.Add(key, node.Name, pr.Since.Time)
			}
		}
	}
	return lines
}

// evaluate runs the checks of the node's current state's transitions in
// the profile and decides, changing nothing.
func Evaluate(ctx context.Context, c *Compiled, node *corev1.Node, record engine.Record, view *Cluster, now time.Time) (engine.Input, engine.Decision) {
	name := c.Spec.Name
	pr := record.Profiles[name]
	transitions := c.Engine.Transitions[pr.Current]
	in := engine.Input{State: pr.Current, Transitions: transitions, Results: map[string]check.Result{}, Errors: map[string]error{}}
	if held := record.HeldBy(); held != "" && held != name {
		in.HeldElsewhere = held
	}
	for _, t := range transitions {
		for _, n := range t.Expression.Names() {
			if _, done := in.Results[n]; done {
				continue
			}
			start := time.Now()
			res, err := c.Checks[n].Evaluate(ctx, check.Context{Node: node, Profile: name, State: pr.Current, Since: pr.Since.Time, Now: now, Cluster: view, Recheck: c.Recheck()})
			checkDuration.WithLabelValues(c.Plugins[n]).Observe(time.Since(start).Seconds())
			if err != nil {
				in.Errors[n] = err
			}
			in.Results[n] = res
		}
	}
	return in, engine.Decide(in)
}

// PassedChecks says, for each check evaluated, whether it passed.
func PassedChecks(in engine.Input) map[string]bool {
	passed := make(map[string]bool, len(in.Results))
	for n, res := range in.Results {
		passed[n] = res.Passed && in.Errors[n] == nil
	}
	return passed
}

// WaitingToRetry says why a passing transition waits: its last attempt
// failed and the next is not due yet. Empty when it is due.
func WaitingToRetry(pr engine.ProfileRecord, now time.Time) string {
	if pr.RetryAt == nil || !now.Before(pr.RetryAt.Time) {
		return ""
	}
	return fmt.Sprintf("attempt %d failed (%s); the next one is at %s", pr.Failures, pr.LastError, pr.RetryAt.Format(time.RFC3339))
}
