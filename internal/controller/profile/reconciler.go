package profile

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/admission"
	"github.com/pitstop-dev/pitstop/internal/budget"
	"github.com/pitstop-dev/pitstop/internal/engine"
	"github.com/pitstop-dev/pitstop/internal/fleet"
	"github.com/pitstop-dev/pitstop/internal/nodepatch"
	"github.com/pitstop-dev/pitstop/internal/plugin/trigger"
	"github.com/pitstop-dev/pitstop/internal/seedmetrics"
)

// How the engine paces its retries, and the slot sweep.
const (
	triggerRetry = 10 * time.Second
	// watchedTriggerRecheck bounds the wait of a trigger whose objects
	// the engine watches, should a wake-up be missed.
	watchedTriggerRecheck = 5 * time.Minute
	failureRetryFirst     = time.Second
	failureRetryMax       = 5 * time.Minute
	conflictRetry         = 100 * time.Millisecond
	// slotSweepInterval is a third of the slots' grace: a slot is judged
	// stale only once this replica has watched it unchanged for the grace
	// (budget.Slots.Unchanged), so a slot left behind is given back within
	// the grace and one interval of this replica first seeing it.
	slotSweepInterval = 5 * time.Second
)

// Reconciler moves one node at a time through its profiles' states.
type Reconciler struct {
	client client.Client
	// watched names the kinds of object whose changes wake the nodes
	// whose triggers wait on them (trigger.Watched).
	watched map[string]bool
	// seedState: write cloud.sap/maintenance-state too (--smc-compat).
	seedState bool
	// seedMetrics counts the maintenance-controller's metrics
	// (--smc-compat); nil counts nothing.
	seedMetrics *seedmetrics.Recorder
	apiReader   client.Reader
	recorder    events.EventRecorder
	slots       *budget.Slots
	admission   *admission.Admission
	clock       clock.PassiveClock
	profiles    *fleet.Registry
	records     *fleet.Records
	// written is the engine's own last write of each node, until the
	// cache shows it.
	written  *writtenNodes
	notifier notifier
	// nodes lists the cached nodes for checks that count over the fleet.
	nodes fleet.NodeLister
	// index reads the cached nodes holding budget slots, and nodes by
	// name, without listing every node; nil lists them.
	index *fleet.NodeIndex
	// decisions keeps each node's last evaluation per profile, for its
	// notifications and the dashboard.
	decisions *fleet.Decisions
	// namespace is pitstop's own.
	namespace string
}

// Reconcile evaluates every profile of the node and writes the node once.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var live *corev1.Node
	for _, reader := range []client.Reader{r.client, r.apiReader} {
		node := live
		if node == nil {
			node = &corev1.Node{}
			if err := reader.Get(ctx, req.NamespacedName, node); err != nil {
				if apierrors.IsNotFound(err) {
					r.written.forget(req.Name)
					r.decisions.Forget(req.Name)
					r.records.Forget(req.Name)
					return ctrl.Result{}, r.nodeGone(ctx, req.Name)
				}
				return ctrl.Result{}, err
			}
			node = r.written.newest(node)
		}
		res, err := r.reconcileNode(ctx, node)
		if !errors.Is(err, nodepatch.ErrStale) {
			if err != nil {
				// Its place in line would hold the nodes behind it back
				// while its evaluations fail.
				r.admission.OutOfLine(node.Name)
			}
			return res, err
		}
		// The cached node was behind the API server (a write of pitstop's
		// own not yet seen, or the kubelet's status): evaluate the API
		// server's copy at once rather than from the back of the queue;
		// the refused write may have read it already.
		live = nodepatch.LiveNode(err)
	}
	return ctrl.Result{RequeueAfter: conflictRetry}, nil
}

// nodeGone gives back the slots of a node the API server no longer has (a
// node the cache alone misses is left to the next evaluation).
func (r *Reconciler) nodeGone(ctx context.Context, name string) error {
	if err := r.apiReader.Get(ctx, client.ObjectKey{Name: name}, &corev1.Node{}); !apierrors.IsNotFound(err) {
		return client.IgnoreNotFound(err)
	}
	return r.admission.NodeGone(ctx, name)
}

// writeRecord puts the record and the state label on the node; a node no
// profile holds has neither. With seedState the maintenance-controller's
// state label and record follow pitstop's.
func writeRecord(node *corev1.Node, record engine.Record, seedState bool) {
	if len(record.Profiles) == 0 {
		delete(node.Annotations, pitstopv1alpha1.AnnotationMaintenanceData)
		delete(node.Labels, pitstopv1alpha1.LabelState)
		if seedState {
			delete(node.Labels, pitstopv1alpha1.LabelSeedState)
			delete(node.Annotations, pitstopv1alpha1.AnnotationSeedData)
		}
		return
	}
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	node.Annotations[pitstopv1alpha1.AnnotationMaintenanceData] = record.Encode()
	node.Labels[pitstopv1alpha1.LabelState] = string(record.MostSevere())
	if seedState {
		node.Labels[pitstopv1alpha1.LabelSeedState] = string(record.MostSevere())
		node.Annotations[pitstopv1alpha1.AnnotationSeedData] = record.EncodeSeed()
	}
}

// selected returns the names of the profiles that select the node, and
// their compiled forms (the last valid generation of each). A deleted
// profile (its finalizer holds it until its nodes have left) selects no
// node. stranded are the profiles that select the node but have no
// generation that compiles, with why: the node can neither move on in them
// nor leave them until someone fixes or deletes the profile.
func (r *Reconciler) selected(profiles []pitstopv1alpha1.MaintenanceProfile, node *corev1.Node) (names []string, specs map[string]*fleet.Compiled, stranded map[string]error) {
	specs, stranded = map[string]*fleet.Compiled{}, map[string]error{}
	for i := range profiles {
		p := &profiles[i]
		c, err := r.profiles.Get(p)
		if !p.DeletionTimestamp.IsZero() {
			continue
		}
		if c == nil {
			if ok, selErr := engine.Selects(p, node); selErr == nil && ok {
				stranded[p.Name] = err
			}
			continue
		}
		if ok, err := engine.Selects(c.Spec, node); err != nil || !ok {
			continue
		}
		names = append(names, p.Name)
		specs[p.Name] = c
	}
	return names, specs, stranded
}

// step evaluates one profile for the node and, if a transition passes and
// its triggers are done, records the move in the pass. It says whether the
// node left maintenance for this profile (its slots are released after the
// write), and what the node waits for from the rest of the fleet when it
// stays; a node that was let in and waits for its own triggers (its drain)
// is not waiting on the fleet and must not be woken in place of those that
// are.
func (r *Reconciler) step(ctx context.Context, p *pass, c *fleet.Compiled) (stepped, error) {
	node, want, record, view, now := p.node, p.want, &p.record, p.view, p.now
	var wait fleetWait
	name := c.Spec.Name
	pr := record.Profiles[name]
	if c.Engine.Entering(pr) {
		return r.enter(ctx, p, c)
	}
	if pr.Entering {
		record.Entered(name) // the state has no enter triggers any more
		pr = record.Profiles[name]
	}
	transitions := c.Engine.Transitions[pr.Current]
	in, d := fleet.Evaluate(ctx, c, node, *record, view, now)
	// Kept again each time the step learns why the transition waits.
	remember := func() { r.decisions.Remember(node.Name, name, pr, d, now) }
	remember()
	passed := fleet.PassedChecks(in)
	record.SetChecks(name, passed)
	requeue := until(d.NextChange, now)
	if d.Take < 0 {
		record.ClearFailures(name) // what failed is no longer wanted
		wait.onFleet = true
		if in.HeldElsewhere == "" {
			wait.inLine = admission.LineKeys(c.Admission(), node, pr.Current, passed)
		}
		// A budget's slot expiring wakes the front of its line, not
		// every node waiting for it.
		others, budgets := admission.NextChanges(c.Admission(), node, in.Results)
		wait.expire = budgets
		return stepped{after: until(others, now), wait: wait}, nil
	}
	t := transitions[d.Take]
	// The wait after a failed attempt holds back that move only: a node
	// whose replacement failed may still go back to operational at once
	// when it no longer asks for one.
	if why := fleet.WaitingToRetry(pr, now); why != "" && (pr.FailedTo == "" || pr.FailedTo == t.Next) {
		d.Evaluations[d.Take].Blocked = why
		remember()
		return stepped{after: until(pr.RetryAt.Time, now), wait: wait}, nil
	}
	entering := t.Next == pitstopv1alpha1.StateInMaintenance && pr.Current != pitstopv1alpha1.StateInMaintenance
	if entering {
		v, err := r.admission.Admit(ctx, admission.Request{Profile: c.Admission(), Transition: t, Node: node, Since: pr.Since.Time, Now: now, Fleet: view})
		if err != nil {
			transitionFailures.WithLabelValues(name, "budget").Inc()
			r.seedMetrics.TransitionFailed(name)
			d.Evaluations[d.Take].Blocked = "taking a budget slot failed: " + err.Error()
			remember()
			return stepped{wait: wait, failedTo: t.Next}, fmt.Errorf("taking a budget slot: %w", err)
		}
		if !v.Admitted {
			wait.onFleet, wait.inLine = true, v.InLine
			d.Evaluations[d.Take].Blocked = v.Why
			remember()
			// The slots, not the cached count, say whether the budget is
			// full: the record says the budget check failed, as it will
			// at the next evaluation once the cache has caught up, rather
			// than passed for a moment (two writes of the node for each
			// race for a freed slot lost).
			passed[v.Full] = false
			record.SetChecks(name, passed)
			// Every slot is taken: the node is a waiter on the budget, and
			// the node that gives a slot back wakes it; a slot that expires
			// (FreesIn) wakes no one, so the node looks again then.
			return stepped{after: shortest(requeue, v.FreesIn), wait: wait}, nil
		}
	}
	if entering {
		// The pods on the node now are those the maintenance is likely to
		// move: counted once per entry, before a drain trigger empties it.
		r.seedMetrics.Entering(ctx, node.Name, view.PodsOn(node.Name), name, pr.Since.Time)
	}
	scratch := want.DeepCopy()
	for _, tn := range t.Triggers {
		done, status, err := c.Triggers[tn].Run(ctx, trigger.Context{Node: scratch, Profile: name, From: pr.Current, Since: pr.Since.Time, Now: now, Namespace: r.namespace, Client: r.client, Reader: r.apiReader})
		if err != nil {
			transitionFailures.WithLabelValues(name, "trigger "+tn).Inc()
			r.seedMetrics.TransitionFailed(name)
			d.Evaluations[d.Take].Blocked = fmt.Sprintf("trigger %s failed: %v", tn, err)
			remember()
			return stepped{wait: wait, failedTo: t.Next}, fmt.Errorf("trigger %s: %w", tn, err)
		}
		if !done {
			d.Evaluations[d.Take].Blocked = status
			remember()
			return stepped{after: shortest(requeue, r.triggerRecheck(c.Triggers[tn])), wait: wait}, nil
		}
	}
	*want = *scratch
	// A transition back into the state it leaves enters nothing.
	hasEnter := t.Next != pr.Current && len(c.Engine.Enter[t.Next]) > 0
	// A node leaving maintenance gives its slots back once the state it
	// goes to has run its enter triggers (a restore among them): until
	// then it is not back.
	leaving := pr.Current == pitstopv1alpha1.StateInMaintenance && t.Next != pitstopv1alpha1.StateInMaintenance && !hasEnter
	record.Move(name, t.Next, now, hasEnter)
	if !hasEnter {
		// The new state's checks go into the same write as the move:
		// recorded by the next evaluation instead, they would cost a
		// second write of the node after every move. They are evaluated
		// on the node as the triggers left it, as the next evaluation will
		// see it. A state with enter triggers evaluates its checks once
		// they are done.
		entered, _ := fleet.Evaluate(ctx, c, want, *record, view, now)
		passed := fleet.PassedChecks(entered)
		// A budget check passes on the cached count of nodes in
		// maintenance, but the node is let in only on a slot: recorded as
		// passing, a node that must wait would be written again at its
		// first refusal. It is recorded as admission expects it to go,
		// and the node stands in line from its move on, so that the nodes
		// that enter the state after it expect to wait behind it.
		expects := r.admission.Expects(ctx, c.Admission(), want, t.Next, now, now)
		withoutSlots := maps.Clone(passed)
		for check, expected := range expects {
			if ok, evaluated := passed[check]; evaluated {
				passed[check] = ok && expected
				withoutSlots[check] = false
			}
		}
		wait.inLine = admission.LineKeys(c.Admission(), want, t.Next, withoutSlots)
		record.SetChecks(name, passed)
	}
	// Told only once the move is written: a write that loses a conflict
	// is retried, and the move must be reported once.
	p.later(func() {
		r.seedMetrics.Forget(node.Name, name)
		transitionsTotal.WithLabelValues(name, string(pr.Current), string(t.Next)).Inc()
		r.recorder.Eventf(node, nil, corev1.EventTypeNormal, pitstopv1alpha1.EventChangedState, "Transition",
			"the node is now %s in profile %s (check %q passed)", t.Next, name, t.Expression.String())
	})
	// The new state's time-based checks start counting now.
	return stepped{after: conflictRetry, leaving: leaving, wait: wait}, nil
}

// enter runs the enter triggers of the state the node has entered in
// profile c, in order, on the node as it will be written. Like a
// transition's triggers they run again at each evaluation until each is
// done, each doing its part once (a drain is started once, then waited
// for); a failure is retried after a pause, as a transition's is. Once
// they are done the record says so, and the next evaluation, a moment
// later, evaluates the state's transitions; a node that came out of
// maintenance gives its budget slots back then.
func (r *Reconciler) enter(ctx context.Context, p *pass, c *fleet.Compiled) (stepped, error) {
	name := c.Spec.Name
	pr := p.record.Profiles[name]
	triggers := c.Engine.Enter[pr.Current]
	remember := func(why string) {
		r.decisions.Remember(p.node.Name, name, pr, engine.EnteringDecision(pr.Current, c.Engine.EnterLeft(p.record.Profiles[name]), why), p.now)
	}
	if why := fleet.WaitingToRetry(pr, p.now); why != "" {
		remember(why)
		return stepped{after: until(pr.RetryAt.Time, p.now)}, nil
	}
	// The triggers done are recorded, and not run again: a restore after
	// a drain would otherwise have the drain start over.
	for i := pr.EnterDone; i < len(triggers); i++ {
		tn := triggers[i]
		scratch := p.want.DeepCopy()
		// The node came from Previous: a restore here sees the node as
		// written after it entered, as a transition's restore does.
		done, status, err := c.Triggers[tn].Run(ctx, trigger.Context{Node: scratch, Profile: name, From: pr.Previous, Since: pr.Since.Time, Now: p.now, Namespace: r.namespace, Client: r.client, Reader: r.apiReader})
		if err != nil {
			transitionFailures.WithLabelValues(name, "enter trigger "+tn).Inc()
			r.seedMetrics.TransitionFailed(name)
			remember(fmt.Sprintf("enter trigger %s failed: %v", tn, err))
			return stepped{failedTo: pr.Current}, fmt.Errorf("entering %s: trigger %s: %w", pr.Current, tn, err)
		}
		if !done {
			remember(fmt.Sprintf("trigger %s: %s", tn, status))
			return stepped{after: triggerRetry}, nil // a watch wakes it sooner
		}
		*p.want = *scratch
		p.record.EnterDone(name, i+1)
	}
	p.record.Entered(name)
	remember("its enter triggers are done; its transitions are evaluated next")
	return stepped{after: conflictRetry, leaving: pr.Leaving()}, nil
}

// fleetWait is what a node that stays waits for from the rest of the fleet.
type fleetWait struct {
	// onFleet: the node stays because of the rest of the fleet (no
	// transition passes, or every budget slot is taken).
	onFleet bool
	// inLine names the wake keys of the budgets that alone keep the node
	// from moving on: it stands in line for them.
	inLine []string
	// expire is when a slot of a budget the node waits for expires by
	// itself, by wake key.
	expire map[string]time.Time
}

// sweep gives back maxMaintenance slots whose holder is out of
// maintenance (Admission.Sweep), and deletes the NodeMaintenances no
// profile needs (sweepOrphans). It runs at start and every
// slotSweepInterval while the manager leads.
func (r *Reconciler) sweep(ctx context.Context) error {
	ticker := time.NewTicker(slotSweepInterval)
	defer ticker.Stop()
	for {
		_ = r.sweepOrphans(ctx)
		list := &pitstopv1alpha1.MaintenanceProfileList{}
		if err := r.client.List(ctx, list); err == nil {
			_ = r.admission.Sweep(ctx, list.Items)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

// Decisions returns the last evaluation of each profile for a node.
func (r *Reconciler) Decisions(node string) map[string]engine.Decision {
	return r.decisions.Of(node)
}

// retryAfter is the wait before attempt+1: one second, doubling, at most
// five minutes.
func retryAfter(attempt int) time.Duration {
	d := failureRetryFirst
	for i := 1; i < attempt && d < failureRetryMax; i++ {
		d *= 2
	}
	return min(d, failureRetryMax)
}

// triggerRecheck is when a node whose trigger t waits is evaluated again
// if nothing wakes it first: a trigger waiting on objects the engine
// watches is woken by their change, and looked at only after
// watchedTriggerRecheck; another after triggerRetry.
func (r *Reconciler) triggerRecheck(t trigger.Trigger) time.Duration {
	if w, ok := t.(trigger.Watched); ok && r.watched[w.WaitsOn()] {
		return watchedTriggerRecheck
	}
	return triggerRetry
}

func until(t, now time.Time) time.Duration {
	if t.IsZero() {
		return 0
	}
	return max(t.Sub(now), time.Millisecond)
}

func shortest(a, b time.Duration) time.Duration {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	}
	return min(a, b)
}

// Evaluator returns the read model that serves this Reconciler's last
// decisions, reading the cluster through reader (the manager's cache):
// what the dashboard shows (fleet.ServedEvaluator).
func (r *Reconciler) Evaluator(reader client.Reader) *fleet.Evaluator {
	return fleet.ServedEvaluator(reader, r.profiles, r.records, r.decisions)
}
