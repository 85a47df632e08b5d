package profile

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/budget"
	"github.com/pitstop-dev/pitstop/internal/engine"
	"github.com/pitstop-dev/pitstop/internal/maintenance"
	"github.com/pitstop-dev/pitstop/internal/nodepatch"
	"github.com/pitstop-dev/pitstop/internal/notify"
	"github.com/pitstop-dev/pitstop/internal/plugin/check"
	"github.com/pitstop-dev/pitstop/internal/plugin/trigger"
)

// How the engine paces its retries, and the slot sweep.
const (
	triggerRetry      = 10 * time.Second
	failureRetryFirst = time.Second
	failureRetryMax   = 5 * time.Minute
	conflictRetry     = 100 * time.Millisecond
	slotGrace         = 15 * time.Second
	slotSweepInterval = 15 * time.Second
)

// Reconciler moves one node at a time through its profiles' states.
type Reconciler struct {
	client    client.Client
	apiReader client.Reader
	recorder  events.EventRecorder
	slots     *budget.Slots
	clock     clock.PassiveClock
	profiles  *registry
	records   *recordCache
	waiters   *waiters
	// written is the engine's own last write of each node, until the
	// cache shows it.
	written  *writtenNodes
	notifier notifier
	// nodes lists the cached nodes for checks that count over the fleet.
	nodes nodeLister

	// decisions keeps each node's last evaluation per profile, for its
	// notifications and the dashboard (decided.go).
	mu        sync.Mutex
	decisions map[string]map[string]decided
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
					r.waiters.set(req.Name, nil, nil, time.Time{}, time.Time{})
					r.written.forget(req.Name)
					r.forget(req.Name)
				}
				return ctrl.Result{}, client.IgnoreNotFound(err)
			}
			node = r.written.newest(node)
		}
		res, err := r.reconcileNode(ctx, node)
		if !errors.Is(err, nodepatch.ErrStale) {
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

// writeRecord puts the record and the state label on the node; a node no
// profile selects carries neither.
func writeRecord(node *corev1.Node, record engine.Record) {
	if len(record.Profiles) == 0 {
		delete(node.Annotations, pitstopv1alpha1.AnnotationMaintenanceData)
		delete(node.Labels, pitstopv1alpha1.LabelState)
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
}

// selected returns the names of the profiles that select the node, and
// their compiled forms (the last valid generation of each). A deleted
// profile (its finalizer holds it until its nodes have left) selects no
// node. stranded are the profiles that select the node but have no
// generation that compiles, with why: the node can neither move on in them
// nor leave them until someone fixes or deletes the profile.
func (r *Reconciler) selected(profiles []pitstopv1alpha1.MaintenanceProfile, node *corev1.Node) (names []string, specs map[string]*compiled, stranded map[string]error) {
	specs, stranded = map[string]*compiled{}, map[string]error{}
	for i := range profiles {
		p := &profiles[i]
		c, err := r.profiles.get(p)
		if !p.DeletionTimestamp.IsZero() {
			continue
		}
		if c == nil {
			if ok, selErr := engine.Selects(p, node); selErr == nil && ok {
				stranded[p.Name] = err
			}
			continue
		}
		if ok, err := engine.Selects(c.spec, node); err != nil || !ok {
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
func (r *Reconciler) step(ctx context.Context, p *pass, c *compiled) (stepped, error) {
	node, want, record, view, now := p.node, p.want, &p.record, p.view, p.now
	var wait fleetWait
	name := c.spec.Name
	pr := record.Profiles[name]
	transitions := c.engine.Transitions[pr.Current]
	in, d := evaluate(ctx, c, node, *record, view, now)
	// Kept again each time the step learns why the transition waits.
	remember := func() { r.remember(node.Name, name, pr, d, now) }
	remember()
	passed := passedChecks(in)
	record.SetChecks(name, passed)
	requeue := until(d.NextChange, now)
	if d.Take < 0 {
		record.ClearFailures(name) // what failed is no longer wanted
		wait.onFleet = true
		if in.HeldElsewhere == "" {
			wait.inLine = lineKeys(c, node, pr.Current, passed)
		}
		return stepped{after: requeue, wait: wait}, nil
	}
	if why := waitingToRetry(pr, now); why != "" {
		d.Evaluations[d.Take].Blocked = why
		remember()
		return stepped{after: until(pr.RetryAt.Time, now), wait: wait}, nil
	}
	t := transitions[d.Take]
	entering := t.Next == pitstopv1alpha1.StateInMaintenance && pr.Current != pitstopv1alpha1.StateInMaintenance
	if entering {
		ok, full, why, err := r.admit(ctx, c, t, node, view, pr.Since.Time, now)
		if err != nil {
			transitionFailures.WithLabelValues(name, "budget").Inc()
			d.Evaluations[d.Take].Blocked = "taking a budget slot failed: " + err.Error()
			remember()
			return stepped{wait: wait}, fmt.Errorf("taking a budget slot: %w", err)
		}
		if !ok {
			wait.onFleet = true
			if b, isBudget := budgetSlots(c, full, node, now); isBudget {
				wait.inLine = []string{budgetWakeKey(b.key)}
			}
			d.Evaluations[d.Take].Blocked = why
			remember()
			// The slots, not the cached count, say whether the budget is
			// full: the record says the budget check failed, as it will
			// at the next evaluation once the cache has caught up, rather
			// than passed for a moment (two writes of the node for each
			// race for a freed slot lost).
			passed[full] = false
			record.SetChecks(name, passed)
			// Every slot is taken: the node is a waiter on the budget, and
			// the node that gives a slot back wakes it.
			return stepped{after: shortest(requeue, waiterRecheck), wait: wait}, nil
		}
	}
	scratch := want.DeepCopy()
	for _, tn := range t.Triggers {
		done, status, err := c.triggers[tn].Run(ctx, trigger.Context{Node: scratch, Profile: name, From: pr.Current, Client: r.client})
		if err != nil {
			transitionFailures.WithLabelValues(name, "trigger "+tn).Inc()
			d.Evaluations[d.Take].Blocked = fmt.Sprintf("trigger %s failed: %v", tn, err)
			remember()
			return stepped{wait: wait}, fmt.Errorf("trigger %s: %w", tn, err)
		}
		if !done {
			d.Evaluations[d.Take].Blocked = status
			remember()
			return stepped{after: shortest(requeue, triggerRetry), wait: wait}, nil // a watch wakes it sooner
		}
	}
	*want = *scratch
	leaving := pr.Current == pitstopv1alpha1.StateInMaintenance && t.Next != pitstopv1alpha1.StateInMaintenance
	record.Move(name, t.Next, now)
	// The new state's checks go into the same write as the move: recorded
	// by the next evaluation instead, they would cost a second write of
	// the node after every move. They are evaluated on the node as the
	// triggers left it, as the next evaluation will see it.
	entered, _ := evaluate(ctx, c, want, *record, view, now)
	record.SetChecks(name, passedChecks(entered))
	// Told only once the move is written: a write that loses a conflict
	// is retried, and the move must be reported once.
	p.later(func() {
		transitionsTotal.WithLabelValues(name, string(pr.Current), string(t.Next)).Inc()
		r.recorder.Eventf(node, nil, corev1.EventTypeNormal, pitstopv1alpha1.EventChangedState, "Transition",
			"the node is now %s in profile %s (check %q passed)", t.Next, name, t.Expression.String())
	})
	// The new state's time-based checks start counting now.
	return stepped{after: conflictRetry, leaving: leaving, wait: wait}, nil
}

// notifier sends rendered notifications in the background.
type notifier interface {
	Enqueue(node *corev1.Node, m notify.Message)
	Failed(node *corev1.Node, m notify.Message, err error)
}

// notifyDue queues the notifications of the node's state in the profile
// that are due, records them as sent (in the same write as the rest of the
// record, so a restart does not send them again; they are queued only once
// the write succeeded), and returns when the next one is due.
func (r *Reconciler) notifyDue(p *pass, c *compiled, name string) time.Duration {
	node, record, now := p.want, &p.record, p.now
	pr := record.Profiles[name]
	var requeue time.Duration
	for _, n := range c.notify[pr.Current] {
		due, next := n.Due(pr.Current, pr.Since.Time, pr.Notified[n.Name].Time, now)
		requeue = shortest(requeue, until(next, now))
		if !due {
			continue
		}
		record.Notified(name, n.Name, now)
		msg, err := n.Render(name, notify.Data{
			Node: node.DeepCopy(), State: string(pr.Current), Previous: string(pr.Previous), Since: pr.Since.Time,
			Profile:  notify.Profiles{Current: name, Last: record.LastMoved()},
			Blocking: r.Decisions(node.Name)[name].Blocking(), Checks: pr.Checks,
		})
		p.later(func() {
			if err != nil {
				r.notifier.Failed(node, msg, err)
				return
			}
			r.notifier.Enqueue(node, msg)
		})
	}
	return requeue
}

// admit takes a slot of every budget the transition's check names
// (maxMaintenance and stagger), then checks the budgets shared by every
// profile against all maintenance in their scope (crowded). All or
// nothing: if one is full, the slots already taken are given back, and it
// returns the name of the full budget's check and why.
func (r *Reconciler) admit(ctx context.Context, c *compiled, t engine.CompiledTransition, node *corev1.Node, view *clusterView, since, now time.Time) (ok bool, full, why string, err error) {
	var taken []budget.Key
	var shared []slotBudget
	giveBack := func() {
		for _, k := range taken {
			_ = r.slots.Release(ctx, k, node.Name)
		}
	}
	for _, name := range t.Expression.Names() {
		b, isBudget := r.budgetOf(ctx, c, name, node, now)
		if !isBudget {
			continue
		}
		wakeKey := budgetWakeKey(b.key)
		free, holding := r.slots.Free(ctx, b.key, b.size, node.Name, b.expired)
		if !holding {
			if free == 0 {
				giveBack()
				return false, name, slotsTaken(b, name), nil
			}
			// The nodes in line ahead of this one take the free slots.
			if ahead := r.waiters.ahead(wakeKey, node.Name, since, now); ahead >= free {
				giveBack()
				r.waiters.wakeFront(wakeKey, free, now)
				return false, name, linedUp(b, name, free, ahead), nil
			}
			if !r.waiters.admitting(wakeKey, node.Name, now) {
				giveBack()
				return false, name, fmt.Sprintf("a slot of budget %s is being handed to it", name), nil
			}
		}
		_, got, err := r.slots.Acquire(ctx, b.key, b.size, node.Name, now, b.stale)
		if err != nil {
			giveBack()
			return false, "", "", err
		}
		if !got {
			giveBack()
			return false, name, slotsTaken(b, name), nil
		}
		r.waiters.admitted(wakeKey, node.Name)
		taken = append(taken, b.key)
		if b.check != nil && !b.check.ProfileScoped {
			shared = append(shared, b)
		}
	}
	full, why, err = r.crowded(view, node, shared)
	if err != nil || why != "" {
		giveBack()
		return false, full, why, err
	}
	return true, "", "", nil
}

// slotsTaken says why a node is not let in when every slot of the budget
// of check name is taken.
func slotsTaken(b slotBudget, name string) string {
	return fmt.Sprintf("all %d slots of budget %s are taken", b.size, name)
}

// linedUp says why a node is not let in when the nodes ahead of it in line
// take the free slots of the budget of check name.
func linedUp(b slotBudget, name string, free, ahead int) string {
	return fmt.Sprintf("%d of the %d slots of budget %s are free, and %d nodes have waited longer for them", free, b.size, name, ahead)
}

// fleetWait is what a node that stays waits for from the rest of the fleet.
type fleetWait struct {
	// onFleet: the node stays because of the rest of the fleet (no
	// transition passes, or every budget slot is taken).
	onFleet bool
	// inLine names the wake keys of the budgets that alone keep the node
	// from moving on: it stands in line for them.
	inLine []string
}

// lineKeys names the budgets that alone keep a node in state from moving
// into maintenance: the wake keys of the budget checks that failed (by
// passed) in a transition into maintenance that would pass with them.
func lineKeys(c *compiled, node *corev1.Node, state pitstopv1alpha1.MaintenanceState, passed map[string]bool) []string {
	if state == pitstopv1alpha1.StateInMaintenance {
		return nil
	}
	var keys []string
	for _, t := range c.engine.Transitions[state] {
		if t.Next != pitstopv1alpha1.StateInMaintenance {
			continue
		}
		withSlots := maps.Clone(passed)
		var budgets []slotBudget
		for _, name := range t.Expression.Names() {
			if b, ok := budgetSlots(c, name, node, time.Time{}); ok && !passed[name] {
				withSlots[name] = true
				budgets = append(budgets, b)
			}
		}
		if len(budgets) == 0 {
			continue
		}
		if ok, err := t.Expression.Eval(withSlots); err != nil || !ok {
			continue
		}
		for _, b := range budgets {
			keys = append(keys, budgetWakeKey(b.key))
		}
	}
	return keys
}

// slotBudget is the slots a budget check stands for.
type slotBudget struct {
	key  budget.Key
	size int
	// name is the budget's check; check its configuration, if it is a
	// maxMaintenance check.
	name  string
	check *pitstopv1alpha1.MaxMaintenanceCheck
	// stale says a holder no longer needs its slot; it may read the API
	// server. expired says so from the Lease alone (a stagger slot whose
	// time ran out), or is nil.
	stale, expired budget.Stale
}

// budgetOf returns the slots a check stands for, if it is a budget.
func (r *Reconciler) budgetOf(ctx context.Context, c *compiled, checkName string, node *corev1.Node, now time.Time) (slotBudget, bool) {
	b, ok := budgetSlots(c, checkName, node, now)
	if ok && b.stale == nil {
		b.stale = r.notInMaintenance(ctx, now)
	}
	return b, ok
}

// budgetSlots returns the slots a check stands for, if it is a budget
// (check.BudgetOf), with the staleness rule of a stagger slot (expired at
// now); a maxMaintenance slot's rule reads the cluster
// (Reconciler.budgetOf).
func budgetSlots(c *compiled, checkName string, node *corev1.Node, now time.Time) (slotBudget, bool) {
	for _, inst := range c.spec.Spec.Checks {
		if inst.Name != checkName {
			continue
		}
		b, ok := check.BudgetOf(c.spec.Name, inst, node)
		if !ok {
			return slotBudget{}, false
		}
		sb := slotBudget{key: b.Key, size: b.Size, name: checkName, check: b.MaxMaintenance}
		if b.MaxMaintenance == nil {
			lasts := b.Lasts
			sb.expired = func(_ string, l *coordinationv1.Lease) bool {
				return l.Spec.AcquireTime == nil || !now.Before(l.Spec.AcquireTime.Add(lasts))
			}
			sb.stale = sb.expired
		}
		return sb, true
	}
	return slotBudget{}, false
}

// notInMaintenance says a maxMaintenance slot is stale when its holder is
// no longer in maintenance for any profile (or is gone), once a grace has
// passed for a transition still being written. The cache rules out most
// holders without a request (they are in maintenance); what it cannot rule
// out is confirmed with the API server, since a lagging cache may miss a
// node's move into maintenance or its drain's NodeMaintenance.
func (r *Reconciler) notInMaintenance(ctx context.Context, now time.Time) budget.Stale {
	return func(holder string, l *coordinationv1.Lease) bool {
		if l.Spec.AcquireTime != nil && now.Sub(l.Spec.AcquireTime.Time) < slotGrace {
			return false
		}
		return !needsSlot(ctx, r.client, holder) && !needsSlot(ctx, r.apiReader, holder)
	}
}

// needsSlot says the holder's node may still need its slot, as reader
// sees it: the node is in maintenance for some profile, its record cannot
// be read, or the NodeMaintenance of its drain exists (its transition into
// maintenance waits for the drain). An error reading counts as needing it.
func needsSlot(ctx context.Context, reader client.Reader, holder string) bool {
	n := &corev1.Node{}
	if err := reader.Get(ctx, client.ObjectKey{Name: holder}, n); err != nil {
		return !apierrors.IsNotFound(err)
	}
	rec, err := engine.ReadRecord(n)
	if err != nil || rec.HeldBy() != "" {
		return true
	}
	nm := &pitstopv1alpha1.NodeMaintenance{}
	err = reader.Get(ctx, client.ObjectKey{Name: maintenance.ForProfile(holder)}, nm)
	return !apierrors.IsNotFound(err)
}

// sweep gives back maxMaintenance slots whose holder is out of
// maintenance (left by a manager stopped between writing a node out of
// maintenance and giving its slot back), and deletes the NodeMaintenances
// no profile needs (sweepOrphans). It runs at start and every
// slotSweepInterval while the manager leads.
func (r *Reconciler) sweep(ctx context.Context) error {
	ticker := time.NewTicker(slotSweepInterval)
	defer ticker.Stop()
	for {
		_ = r.sweepOrphans(ctx)
		list := &pitstopv1alpha1.MaintenanceProfileList{}
		if err := r.client.List(ctx, list); err == nil {
			budgets := maxMaintenanceBudgetNames(list.Items)
			stale := r.notInMaintenance(ctx, r.clock.Now())
			_ = r.slots.Sweep(ctx, func(key budget.Key, holder string, lease *coordinationv1.Lease) bool {
				return budgets[key.Name] && stale(holder, lease)
			})
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

// maxMaintenanceBudgetNames names the budgets of maxMaintenance checks
// (Key.Name): the one shared by every profile, and the own budget of each
// profile with such a check.
func maxMaintenanceBudgetNames(profiles []pitstopv1alpha1.MaintenanceProfile) map[string]bool {
	names := map[string]bool{check.AllProfilesBudget: true}
	for _, p := range profiles {
		for _, inst := range p.Spec.Checks {
			if b, ok := check.BudgetOf(p.Name, inst, &corev1.Node{}); ok && b.MaxMaintenance != nil {
				names[b.Key.Name] = true
			}
		}
	}
	return names
}

// giveBack gives the slot node holds of budget b, the node being recorded
// out of maintenance, to the first node in line for it: one write, after
// which that node finds its slot taken for it. With nobody in line (or
// the hand-over refused), the slot goes back to the budget and its waiters
// are woken at once: the engine counts this node from its own write and
// the slots as it last wrote them, so a waiter need not wait for the
// cache to see either. When giving it back fails, the cache's sight of
// the node leaving (wakeOnLeave) and of the slot freed (wakeOnSlotDeleted)
// wakes them; nodes waiting on other nodes' states only then.
//
// A node handed a slot that no longer wants to go in (its window closed
// meanwhile, say) holds it until the sweep finds it out of maintenance.
func (r *Reconciler) giveBack(ctx context.Context, b slotBudget, node string) {
	key, now := budgetWakeKey(b.key), r.clock.Now()
	if next := r.waiters.claimFront(key, node, now); next != "" {
		if ok, err := r.slots.HandOver(ctx, b.key, b.size, node, next, now); err == nil && ok {
			r.waiters.gave(key, node, next, now)
			return
		}
		r.waiters.unclaim(key, next)
	}
	if r.slots.Release(ctx, b.key, node) == nil {
		r.waiters.handOver(key, node, now)
	}
}

// maxMaintenanceBudgets returns the budgets of the profile's
// maxMaintenance checks that the node counts against.
func maxMaintenanceBudgets(c *compiled, node *corev1.Node) []slotBudget {
	var budgets []slotBudget
	for _, inst := range c.spec.Spec.Checks {
		if b, ok := budgetSlots(c, inst.Name, node, time.Time{}); ok && b.check != nil {
			budgets = append(budgets, b)
		}
	}
	return budgets
}

// wakeKeys names what a node that stays in state waits for from the rest of
// the fleet: the budgets of its transitions' budget checks, and the
// profile itself for checks that look at other nodes.
func (r *Reconciler) wakeKeys(c *compiled, node *corev1.Node, state pitstopv1alpha1.MaintenanceState) []string {
	var keys []string
	for _, t := range c.engine.Transitions[state] {
		for _, name := range t.Expression.Names() {
			if b, ok := budgetSlots(c, name, node, time.Time{}); ok {
				keys = append(keys, budgetWakeKey(b.key))
				continue
			}
			for _, inst := range c.spec.Spec.Checks {
				if inst.Name == name && check.ReadsOf(inst) == check.ReadsFleet {
					keys = append(keys, profileWakeKey(c.spec.Name))
				}
			}
		}
	}
	return keys
}

func budgetWakeKey(k budget.Key) string    { return "budget/" + k.Name + "/" + k.Group }
func profileWakeKey(profile string) string { return "profile/" + profile }

// Decisions returns the last evaluation of each profile for a node.
func (r *Reconciler) Decisions(node string) map[string]engine.Decision {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]engine.Decision{}
	for k, v := range r.decisions[node] {
		out[k] = v.decision
	}
	return out
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

// evaluate runs the checks of the node's current state's transitions in
// the profile and decides, changing nothing.
func evaluate(ctx context.Context, c *compiled, node *corev1.Node, record engine.Record, view *clusterView, now time.Time) (engine.Input, engine.Decision) {
	name := c.spec.Name
	pr := record.Profiles[name]
	transitions := c.engine.Transitions[pr.Current]
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
			res, err := c.checks[n].Evaluate(ctx, check.Context{Node: node, Profile: name, State: pr.Current, Since: pr.Since.Time, Now: now, Cluster: view})
			checkDuration.WithLabelValues(c.plugins[n]).Observe(time.Since(start).Seconds())
			if err != nil {
				in.Errors[n] = err
			}
			in.Results[n] = res
		}
	}
	return in, engine.Decide(in)
}

// passedChecks says, for each check evaluated, whether it passed.
func passedChecks(in engine.Input) map[string]bool {
	passed := make(map[string]bool, len(in.Results))
	for n, res := range in.Results {
		passed[n] = res.Passed && in.Errors[n] == nil
	}
	return passed
}

// waitingToRetry says why a passing transition waits: its last attempt
// failed and the next is not due yet. Empty when it is due.
func waitingToRetry(pr engine.ProfileRecord, now time.Time) string {
	if pr.RetryAt == nil || !now.Before(pr.RetryAt.Time) {
		return ""
	}
	return fmt.Sprintf("attempt %d failed (%s); the next one is at %s", pr.Failures, pr.LastError, pr.RetryAt.Format(time.RFC3339))
}
