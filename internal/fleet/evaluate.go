package profile

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/budget"
	"github.com/pitstop-dev/pitstop/internal/engine"
	"github.com/pitstop-dev/pitstop/internal/plugin/check"
	"github.com/pitstop-dev/pitstop/internal/plugin/trigger"
)

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
// engine's last decisions instead (Reconciler.Evaluator).
type Evaluator struct {
	reader   client.Reader
	profiles *registry
	records  *recordCache
	// slots reads the budgets' slot Leases, in any namespace, through
	// reader.
	slots *budget.Slots
	// decided, when set, has each node's decisions: they are served rather
	// than the checks run.
	decided *Reconciler
}

// NewEvaluator evaluates from reader, running the checks.
func NewEvaluator(reader client.Reader, deps check.Deps) *Evaluator {
	return &Evaluator{reader: reader, profiles: newRegistry(deps), records: newRecordCache(), slots: &budget.Slots{Cache: reader}}
}

// Node evaluates every profile the node is in (selected, or still holding
// it in maintenance), in name order.
func (e *Evaluator) Node(ctx context.Context, node *corev1.Node, now time.Time) ([]Evaluation, error) {
	list := &pitstopv1alpha1.MaintenanceProfileList{}
	if err := e.reader.List(ctx, list); err != nil {
		return nil, err
	}
	view := &clusterView{ctx: ctx, reader: e.reader, profiles: list.Items, records: e.records, slots: e.slots}
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
	view := &clusterView{ctx: ctx, reader: e.reader, profiles: list.Items, records: e.records, slots: e.slots, nodes: pointers(nodes.Items), loaded: true}
	out := make(map[string][]Evaluation, len(nodes.Items))
	for i := range nodes.Items {
		evals, err := e.node(ctx, view, &nodes.Items[i], now)
		if err == nil {
			out[nodes.Items[i].Name] = evals
		}
	}
	return out, nil
}

func (e *Evaluator) node(ctx context.Context, view *clusterView, node *corev1.Node, now time.Time) ([]Evaluation, error) {
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
		c, err := e.profiles.get(p)
		if err != nil {
			ev.Error = err.Error()
		}
		switch {
		case c == nil:
		case e.decided != nil:
			e.served(&ev, c, node.Name, record, now)
		default:
			_, ev.Decision = evaluate(ctx, c, node, record, view, now)
			ev.Evaluated = &now
			if t := ev.Decision.Take; t >= 0 {
				ev.Decision.Evaluations[t].Blocked = e.waiting(ctx, c, node, pr, t, now)
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
func (e *Evaluator) served(ev *Evaluation, c *compiled, node string, record engine.Record, now time.Time) {
	if last, ok := e.decided.lastDecision(node, ev.Profile, ev.Record); ok {
		ev.Decision, ev.Evaluated = last.decision, &last.at
		return
	}
	ev.Decision, ev.Recorded = recordedDecision(c, record, ev.Profile, now), true
}

// waiting says what a transition whose check passes still waits for: a
// retry after a failure, or a trigger (the drain, the restore).
func (e *Evaluator) waiting(ctx context.Context, c *compiled, node *corev1.Node, pr engine.ProfileRecord, take int, now time.Time) string {
	if why := waitingToRetry(pr, now); why != "" {
		return why
	}
	for _, name := range c.engine.Transitions[pr.Current][take].Triggers {
		o, ok := c.triggers[name].(trigger.Observer)
		if !ok {
			continue
		}
		why, err := o.Waiting(ctx, e.reader, node, pr.Current)
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
func (e *Evaluator) inLine(ctx context.Context, view *clusterView, profiles map[string]*pitstopv1alpha1.MaintenanceProfile, c *compiled, node *corev1.Node, pr engine.ProfileRecord, take int, now time.Time) string {
	t := c.engine.Transitions[pr.Current][take]
	if t.Next != pitstopv1alpha1.StateInMaintenance || pr.Current == pitstopv1alpha1.StateInMaintenance {
		return ""
	}
	for _, name := range t.Expression.Names() {
		b, ok := budgetSlots(c, name, node, now)
		if !ok {
			continue
		}
		free, holding := e.slots.Free(ctx, b.key, b.size, node.Name, b.expired)
		switch {
		case holding:
			continue
		case free == 0:
			return slotsTaken(b, name)
		}
		if ahead := e.ahead(view, profiles, budgetWakeKey(b.key), node.Name, pr.Since.Time); ahead >= free {
			return linedUp(b, name, free, ahead)
		}
	}
	return ""
}

// ahead counts the nodes in line for the budget of wakeKey that have
// waited longer than node, which waits since since.
func (e *Evaluator) ahead(view *clusterView, profiles map[string]*pitstopv1alpha1.MaintenanceProfile, wakeKey, node string, since time.Time) int {
	if view.lines == nil {
		view.lines = e.lines(view, profiles)
	}
	n := 0
	for _, w := range view.lines[wakeKey] {
		if w.node != node && before(w.since, w.node, since, node) {
			n++
		}
	}
	return n
}

// lineEntry is a node in line for a budget, as its record shows it.
type lineEntry struct {
	node  string
	since time.Time
}

// lines are the nodes in line for each budget (by wake key), as their
// records show their last evaluation: in a state whose transition into
// maintenance failed only for want of a slot.
func (e *Evaluator) lines(view *clusterView, profiles map[string]*pitstopv1alpha1.MaintenanceProfile) map[string][]lineEntry {
	waiting := map[string]map[string]time.Time{} // wake key → node → since
	for _, node := range view.Nodes() {
		record, err := view.records.read(node)
		if err != nil {
			continue
		}
		for name, pr := range record.Profiles {
			p := profiles[name]
			if p == nil || (record.HeldBy() != "" && record.HeldBy() != name) {
				continue
			}
			c, _ := e.profiles.get(p)
			if c == nil {
				continue
			}
			for _, key := range lineKeys(c, node, pr.Current, pr.Checks) {
				if waiting[key] == nil {
					waiting[key] = map[string]time.Time{}
				}
				// In line for a budget two profiles share: once, since
				// the earlier of the two.
				if at, ok := waiting[key][node.Name]; !ok || pr.Since.Time.Before(at) {
					waiting[key][node.Name] = pr.Since.Time
				}
			}
		}
	}
	lines := make(map[string][]lineEntry, len(waiting))
	for key, nodes := range waiting {
		for node, since := range nodes {
			lines[key] = append(lines[key], lineEntry{node, since})
		}
	}
	return lines
}
