package profile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/admission"
	"github.com/pitstop-dev/pitstop/internal/engine"
	"github.com/pitstop-dev/pitstop/internal/fleet"
	"github.com/pitstop-dev/pitstop/internal/nodepatch"
)

// reconcileNode evaluates every profile of the node and writes the node
// once, unless it changed since it was read (nodepatch.ErrStale):
//   - gather reads the node's record and the profiles that select it;
//   - advance moves the node in each of its profiles, or takes it out of
//     one that no longer selects it;
//   - write writes the node, its record and what the triggers changed, in
//     one patch;
//   - tell reports what the write made true: Events, notifications, the
//     waiters to wake, the budget slots to give back.
func (r *Reconciler) reconcileNode(ctx context.Context, node *corev1.Node) (ctrl.Result, error) {
	p, err := r.gather(ctx, node)
	if p == nil || err != nil {
		return ctrl.Result{}, err
	}
	for _, name := range p.profiles() {
		if err := r.advance(ctx, p, name); err != nil {
			return ctrl.Result{}, err
		}
	}
	if err := r.write(ctx, p); err != nil {
		return ctrl.Result{}, err
	}
	r.tell(ctx, p)
	return p.result(), nil
}

// pass is one evaluation of a node: what it read, what the node becomes,
// and what is told once the node is written.
type pass struct {
	node   *corev1.Node // as read
	want   *corev1.Node // as it will be written
	record engine.Record
	now    time.Time
	view   *fleet.Cluster
	// specs are the compiled profiles that select the node; stranded those
	// that select it without a generation that compiles, with why.
	specs    map[string]*fleet.Compiled
	stranded map[string]error

	requeue time.Duration
	// moved says the node changed state in some profile.
	moved bool
	// releases are the profiles the node left maintenance for: their
	// budget slots are given back once that is written.
	releases []string
	// waitKeys, inLine and waitingSince say what the node waits for from
	// the rest of the fleet, for the waiters.
	waitKeys, inLine []string
	waitingSince     time.Time
	// expire is when a slot of a budget it stands in line for expires.
	expire map[string]time.Time
	// told runs once the node is written: Events and notifications of
	// what the write made true.
	told []func()
}

// waitedSince keeps the earliest time the node has waited since.
func (p *pass) waitedSince(t time.Time) {
	if p.waitingSince.IsZero() || t.Before(p.waitingSince) {
		p.waitingSince = t
	}
}

// later runs f once the node is written.
func (p *pass) later(f func()) { p.told = append(p.told, f) }

// again asks for the next evaluation within d at the latest.
func (p *pass) again(d time.Duration) { p.requeue = shortest(p.requeue, d) }

// profiles names the profiles in the node's record, in order.
func (p *pass) profiles() []string {
	names := make([]string, 0, len(p.record.Profiles))
	for name := range p.record.Profiles {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// result is when and how urgently the node is evaluated next.
func (p *pass) result() ctrl.Result {
	res := ctrl.Result{RequeueAfter: p.requeue, Priority: ptr.To(0)}
	switch {
	case p.record.Holding():
		res.Priority = ptr.To(pipelinePriority) // its slots wait for it
	case p.moved:
		res.Priority = ptr.To(followUpPriority)
	}
	return res
}

// gather reads the node's record and the profiles, and syncs the record
// with the profiles that select the node. A nil pass means there is
// nothing to do: the record cannot be read, and pitstop leaves the node
// alone until someone fixes or removes it.
func (r *Reconciler) gather(ctx context.Context, node *corev1.Node) (*pass, error) {
	record, err := engine.ReadRecord(node)
	if err != nil {
		// Never reset a record pitstop cannot read: the node may be in
		// maintenance. Someone must fix or remove the annotation.
		r.recorder.Eventf(node, nil, corev1.EventTypeWarning, pitstopv1alpha1.EventInvalidRecord, "Evaluate", "%v", err)
		return nil, nil
	}
	list := &pitstopv1alpha1.MaintenanceProfileList{}
	if err := r.client.List(ctx, list); err != nil {
		return nil, err
	}
	p := &pass{node: node, want: node.DeepCopy(), record: record, now: r.clock.Now()}
	var selected []string
	selected, p.specs, p.stranded = r.selected(list.Items, node)
	p.record.Sync(selected, p.now)
	p.view = fleet.NewCluster(ctx, r.client, r.written.over(r.nodes), list.Items, r.records, r.slots).WithIndex(r.written.overIndex(r.index))
	return p, nil
}

// advance moves the node on in one profile of its record: a step of the
// profile's state machine, or, for a profile that no longer selects the
// node, a step out of it. A failed step is recorded and retried later; an
// error stops the pass.
func (r *Reconciler) advance(ctx context.Context, p *pass, name string) error {
	c := p.specs[name]
	if c == nil {
		if err, ok := p.stranded[name]; ok {
			r.strand(p.node, name, p.record.Profiles[name], err)
			return nil
		}
		left, after, err := r.leave(ctx, p, name)
		if err != nil {
			return err
		}
		if left {
			p.releases = append(p.releases, name)
			p.moved = true
		}
		p.again(after)
		return nil
	}
	before := p.record.Profiles[name].Current
	s, err := r.step(ctx, p, c)
	if p.node.Labels[pitstopv1alpha1.LabelSeedLogDetails] == "true" {
		logDetails(ctx, p.node.Name, name, before, r.Decisions(p.node.Name)[name], err)
	}
	after := s.after
	if err != nil {
		after = retryAfter(p.record.Profiles[name].Failures + 1)
		attempt := p.record.Fail(name, s.failedTo, err, p.now.Add(after))
		r.recorder.Eventf(p.node, nil, corev1.EventTypeWarning, pitstopv1alpha1.EventChangeFailed, "Transition",
			"profile %s: %v; the node stays %s (attempt %d, next in %s)", name, err, p.record.Profiles[name].Current, attempt, after)
	}
	if s.leaving {
		p.releases = append(p.releases, name)
	}
	pr := p.record.Profiles[name]
	if pr.Current != before {
		p.moved = true
		if len(s.wait.inLine) > 0 {
			// It stands in line for the new state's budgets from the
			// move on (step).
			p.waitKeys = append(p.waitKeys, admission.WakeKeys(c.Admission(), p.want, pr.Current)...)
			p.inLine = append(p.inLine, s.wait.inLine...)
			p.waitedSince(pr.Since.Time)
		}
		p.again(after)
		return nil
	}
	// Notifications of a state just entered wait for the next evaluation
	// (a moment later), which says what blocks the node in its new state,
	// and for the state's enter triggers.
	if !c.Engine.Entering(pr) {
		after = shortest(after, r.notifyDue(p, c, name))
	}
	if s.wait.onFleet {
		if keys := admission.WakeKeys(c.Admission(), p.node, before); len(keys) > 0 {
			p.waitKeys = append(p.waitKeys, keys...)
			p.inLine = append(p.inLine, s.wait.inLine...)
			p.waitedSince(pr.Since.Time)
			for key, at := range s.wait.expire {
				if p.expire == nil {
					p.expire = map[string]time.Time{}
				}
				if was, ok := p.expire[key]; !ok || at.Before(was) {
					p.expire[key] = at
				}
			}
			// Budgets wake their waiters; checks that read other nodes
			// do not.
			if slices.Contains(keys, admission.ProfileWakeKey(name)) {
				after = shortest(after, admission.FleetRecheck)
			}
		}
	}
	p.again(after)
	return nil
}

// logDetails logs an evaluation of the node in profile: each transition of
// the state it was in, each check's result and reason, and why a passing
// transition was not taken.
func logDetails(ctx context.Context, node, profile string, state pitstopv1alpha1.MaintenanceState, d engine.Decision, err error) {
	log := ctrl.LoggerFrom(ctx).WithValues("node", node, "profile", profile, "state", state)
	if d.Entering != "" {
		log.Info("Evaluated", "entering", d.Entering)
	}
	for _, t := range d.Evaluations {
		checks := make([]string, 0, len(t.Checks))
		for _, c := range t.Checks {
			why := c.Reason
			if c.Error != "" {
				why = "error: " + c.Error
			}
			checks = append(checks, fmt.Sprintf("%s=%v (%s)", c.Name, c.Passed, why))
		}
		log.Info("Evaluated", "transition", t.Check, "next", t.Next, "passed", t.Passed, "taken", d.Take == t.Index, "blocked", t.Blocked, "checks", checks)
	}
	if err != nil {
		log.Info("Evaluation failed", "error", err.Error())
	}
}

// stepped is what a step of a profile's state machine did.
type stepped struct {
	// after is when the profile wants the node evaluated again.
	after time.Duration
	// leaving says the node left maintenance for the profile: its slots
	// are given back once that is written.
	leaving bool
	// wait is what the node waits for from the fleet, when it stays.
	wait fleetWait
	// failedTo is the state the step failed to move the node to, with
	// its error.
	failedTo pitstopv1alpha1.MaintenanceState
}

// write writes the node as the pass left it, with its record, in one
// patch; nothing when nothing changed.
func (r *Reconciler) write(ctx context.Context, p *pass) error {
	writeRecord(p.want, p.record, r.seedState)
	if equality.Semantic.DeepEqual(p.node, p.want) {
		return nil
	}
	if err := r.writeNode(ctx, p.node, p.want); err != nil {
		if errors.Is(err, nodepatch.ErrStale) {
			return err
		}
		return fmt.Errorf("writing node %s: %w", p.node.Name, err)
	}
	return nil
}

// tell reports what the write made true: the Events and notifications of
// the pass, the node among the waiters, and the budget slots of the
// profiles it left maintenance for, given back only now. Giving them back
// before the write could let another node in while this one is still
// recorded in maintenance.
func (r *Reconciler) tell(ctx context.Context, p *pass) {
	for _, f := range p.told {
		f()
	}
	r.admission.Wait(p.node.Name, p.waitKeys, p.inLine, p.waitingSince, p.expire)
	for _, name := range p.releases {
		if c := r.profiles.Last(name); c != nil {
			r.admission.Release(ctx, c.Admission(), p.want)
		}
	}
}
