// Package admission decides who gets the next budget slot: a node enters
// maintenance only holding a slot of every budget its transition names
// (maxMaintenance, stagger), the longest waiting first. It holds the
// waiters (the nodes in line, woken when a slot is freed), the slot Leases
// (through internal/budget) and the budget arithmetic, behind four verbs:
// Admit, Release, Explain and Sweep.
package admission

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/budget"
	"github.com/pitstop-dev/pitstop/internal/engine"
	"github.com/pitstop-dev/pitstop/internal/maintenance"
	"github.com/pitstop-dev/pitstop/internal/plugin/check"
)

// slotGrace spares a maxMaintenance slot just taken or confirmed from the
// staleness rule while the transition it let in is being written.
const slotGrace = 15 * time.Second

// renewAfter is how old a slot a node goes in on may be before its
// admission confirms it (confirm): well within slotGrace, so that a node
// let in on it has the whole grace to show that it needs it.
const renewAfter = slotGrace / 3

// Admission lets nodes into maintenance through their budgets' slots.
type Admission struct {
	slots     *budget.Slots
	waiters   *waiters
	clock     clock.PassiveClock
	client    client.Reader
	apiReader client.Reader
}

// New admits through slots. client (the manager's cache) and apiReader
// (the API server) tell whether a slot's holder still needs it.
func New(slots *budget.Slots, c, apiReader client.Reader, clk clock.PassiveClock) *Admission {
	return &Admission{slots: slots, waiters: newWaiters(), clock: clk, client: c, apiReader: apiReader}
}

// Fleet is what admission reads of the rest of the cluster.
type Fleet interface {
	// Node returns the node named, nil when the cluster has none.
	Node(name string) *corev1.Node
	// UnderMaintenance names every node pitstop has under maintenance,
	// whatever started it, reading the slots through leases.
	UnderMaintenance(leases client.Reader) (map[string]bool, error)
}

// Request is a node asking to take a transition into maintenance.
type Request struct {
	Profile    Profile
	Transition engine.CompiledTransition
	Node       *corev1.Node
	// Since is when the node entered the state it leaves: the longest
	// waiting go first.
	Since, Now time.Time
	Fleet      Fleet
}

// Verdict is admission's answer to a Request.
type Verdict struct {
	Admitted bool
	// Full names the budget's check that keeps the node out, and Why says
	// how; InLine names the wake key of that budget when the node waits
	// for one of its slots.
	Full, Why string
	InLine    []string
	// FreesIn, when not zero, is when the full budget's first slot expires
	// on this replica's count (a stagger, a maxMaintenance with
	// skipAfter): no event says so, so the node is evaluated again then.
	FreesIn time.Duration
}

// Admit takes a slot of every budget the transition's check names
// (maxMaintenance and stagger), then checks the budgets shared by every
// profile against all maintenance in their scope (crowded). All or
// nothing: if one is full, the slots already taken are given back, and the
// verdict names the full budget's check and why.
func (a *Admission) Admit(ctx context.Context, req Request) (Verdict, error) {
	var taken []budget.Key
	var shared []Budget
	node := req.Node
	giveBack := func() {
		for _, k := range taken {
			_ = a.slots.Release(ctx, k, node.Name)
		}
	}
	refuse := func(b Budget, why string) (Verdict, error) {
		giveBack()
		return Verdict{Full: b.Check, Why: why, InLine: []string{b.WakeKey()}}, nil
	}
	// full refuses the node because every slot of b is taken, saying when
	// the first expires where b's slots do.
	full := func(b Budget) (Verdict, error) {
		v, err := refuse(b, slotsTaken(b))
		v.FreesIn = a.slots.ExpiresIn(ctx, b.Key, b.Size, max(b.lasts, b.skipAfter), req.Now)
		return v, err
	}
	for _, name := range req.Transition.Expression.Names() {
		b, isBudget := a.budgetOf(ctx, req.Profile, name, node, req.Now)
		if !isBudget {
			continue
		}
		wakeKey := b.WakeKey()
		free, holding := a.slots.Free(ctx, b.Key, b.Size, node.Name, b.expired(a.slots, req.Now))
		if !holding {
			if free == 0 {
				return full(b)
			}
			// The nodes in line ahead of this one take the free slots.
			if ahead := a.waiters.ahead(wakeKey, node.Name, req.Since); ahead >= free {
				a.waiters.wakeFront(wakeKey, free)
				return refuse(b, linedUp(b, free, ahead))
			}
			if !a.waiters.admitting(wakeKey, node.Name, req.Now) {
				return refuse(b, fmt.Sprintf("a slot of budget %s is being handed to it", name))
			}
		}
		_, got, err := a.slots.Acquire(ctx, b.Key, b.Size, node.Name, req.Now, b.stale)
		if err != nil {
			giveBack()
			return Verdict{}, err
		}
		if !got {
			return full(b)
		}
		if holding && b.MaxMaintenance != nil {
			confirmed, err := a.confirm(ctx, b, node.Name, req.Now)
			if err != nil {
				giveBack()
				return Verdict{}, err
			}
			if !confirmed {
				return refuse(b, fmt.Sprintf("its slot of budget %s was given back or changed hands a moment ago", name))
			}
		}
		a.waiters.admitted(wakeKey, node.Name)
		taken = append(taken, b.Key)
		if b.MaxMaintenance != nil && !b.MaxMaintenance.ProfileScoped {
			shared = append(shared, b)
		}
	}
	b, why, err := a.crowded(req.Fleet, node, shared)
	switch {
	case err != nil:
		giveBack()
		return Verdict{}, err
	case why != "":
		return refuse(b, why)
	}
	return Verdict{Admitted: true}, nil
}

// Expects says, for each budget check of the transitions from state into
// maintenance, whether the node would be let in on it now: it holds a slot,
// or a slot is free on this replica's count that the nodes ahead of it in
// line (those that entered state before since) do not take. It takes
// nothing and writes nothing. The engine records it as the check's result
// when the node enters state, in the write of the move, so that a node
// that will wait is recorded waiting at once rather than passing on the
// cached count until its first refusal writes the node a second time.
func (a *Admission) Expects(ctx context.Context, p Profile, node *corev1.Node, state pitstopv1alpha1.MaintenanceState, since, now time.Time) map[string]bool {
	if state == pitstopv1alpha1.StateInMaintenance || a.slots == nil {
		return nil
	}
	var out map[string]bool
	for _, t := range p.Transitions[state] {
		if t.Next != pitstopv1alpha1.StateInMaintenance {
			continue
		}
		for _, name := range t.Expression.Names() {
			b, ok := BudgetOf(p, name, node)
			if !ok {
				continue
			}
			if _, seen := out[name]; seen {
				continue
			}
			free, holding := a.slots.Free(ctx, b.Key, b.Size, node.Name, b.expired(a.slots, now))
			if out == nil {
				out = map[string]bool{}
			}
			out[name] = holding || free > a.waiters.ahead(b.WakeKey(), node.Name, since)
		}
	}
	return out
}

// confirm renews the maxMaintenance slot node holds as it goes in on it,
// so that the sweep's grace counts from now, not from when the slot was
// taken or handed to it. A slot handed to the next node in line may wait
// longer than the grace for that node's evaluation (its queue far
// behind); a sweep between the node's admission and the write that shows
// it needs the slot (its drain's NodeMaintenance, its move into
// maintenance) would otherwise find it neither in maintenance nor
// draining, give its slot back, and let a third node in: one over the
// budget. The renewal is made only if the slot is unchanged since the
// cache showed it, and the sweep deletes a slot only if it is unchanged
// since it judged it stale, so one of the two fails. A node the cache
// shows needing its slot already (in maintenance, or its drain under
// way), or whose slot was taken or confirmed within renewAfter, costs no
// write.
func (a *Admission) confirm(ctx context.Context, b Budget, node string, now time.Time) (bool, error) {
	if needsSlot(ctx, a.client, node) {
		return true, nil
	}
	return a.slots.Renew(ctx, b.Key, node, now, renewAfter)
}

// crowded checks, once the node holds a slot of every budget of its
// transition, the budgets shared by every profile against every node
// pitstop has under maintenance, read with the slots from the API server:
// another budget's slots (a different max or groupBy) and maintenance not
// started by a profile count too. It returns the budget that is full and
// says why the node must give its slots back, or "" when it may go in.
//
// Two nodes let in at once by different budgets each list the slots after
// taking their own, so at least one of them sees the other: a node is let
// in only if, at that moment, fewer than max other nodes in its budget's
// scope were under maintenance.
func (a *Admission) crowded(fleet Fleet, node *corev1.Node, budgets []Budget) (full Budget, why string, err error) {
	if len(budgets) == 0 {
		return Budget{}, "", nil
	}
	occupied, err := fleet.UnderMaintenance(a.slots.Client)
	if err != nil {
		return Budget{}, "", err
	}
	for _, b := range budgets {
		m := b.MaxMaintenance
		var others []string
		for name := range occupied {
			if name == node.Name {
				continue
			}
			n := fleet.Node(name)
			if n == nil || check.GroupOf(m, n.Labels) != check.GroupOf(m, node.Labels) {
				continue
			}
			others = append(others, name)
		}
		if len(others) >= b.Size {
			slices.Sort(others)
			return b, fmt.Sprintf("budget %s allows %d nodes under maintenance%s, and %d others are: %s", b.Check, b.Size, groupScope(m, node), len(others), strings.Join(others, ", ")), nil
		}
	}
	return Budget{}, "", nil
}

// Release gives back the maxMaintenance slots node holds in profile p, the
// node being recorded out of maintenance for it. Each goes to the first
// node in line for it: one write, after which that node finds its slot
// taken for it. With nobody in line (or the hand-over refused), the slot
// goes back to the budget and its waiters are woken at once: the engine
// counts this node from its own write and the slots as it last wrote them,
// so a waiter need not wait for the cache to see either. When giving it
// back fails, the cache's sight of the node leaving (WakeOnChange) and of
// the slot freed (SlotDeleted) wakes them; nodes waiting on other nodes'
// states only then.
//
// A node handed a slot that no longer wants to go in (its window closed
// meanwhile, say) holds it until the sweep finds it out of maintenance.
func (a *Admission) Release(ctx context.Context, p Profile, node *corev1.Node) {
	for _, b := range MaxMaintenanceBudgets(p, node) {
		a.release(ctx, b, node.Name)
	}
}

func (a *Admission) release(ctx context.Context, b Budget, node string) {
	key, now := b.WakeKey(), a.clock.Now()
	if next := a.waiters.claimFront(key, node, now); next != "" {
		if ok, err := a.slots.HandOver(ctx, b.Key, b.Size, node, next, now); err == nil && ok {
			a.waiters.gave(key, node, next, now)
			return
		}
		a.waiters.unclaim(key, next)
	}
	if a.slots.Release(ctx, b.Key, node) == nil {
		a.waiters.handOver(key, node, now)
	}
}

// Sweep gives back the slots whose holder is out of maintenance: of the
// maxMaintenance budgets, slots left by a manager stopped between writing
// a node out of maintenance and giving its slot back; of any budget that
// no profile has any more (its profile was deleted), every such slot, so
// that one whose release was missed does not stay forever. The slots of a
// budget.SourceKey are their source's to give back.
func (a *Admission) Sweep(ctx context.Context, profiles []pitstopv1alpha1.MaintenanceProfile) error {
	maxMaintenance := MaxMaintenanceBudgetNames(profiles)
	known := budgetNames(profiles)
	stale := a.notInMaintenance(ctx, a.clock.Now())
	return a.slots.Sweep(ctx, func(key budget.Key, holder string, lease *coordinationv1.Lease) bool {
		return !key.IsSource() && (maxMaintenance[key.Name] || !known[key.Name]) && stale(holder, lease)
	})
}

// budgetNames names every budget of the profiles (Key.Name), of
// maxMaintenance and stagger checks, and the one shared by every profile.
func budgetNames(profiles []pitstopv1alpha1.MaintenanceProfile) map[string]bool {
	names := map[string]bool{check.AllProfilesBudget: true}
	for _, p := range profiles {
		for _, inst := range p.Spec.Checks {
			if b, ok := check.BudgetOf(p.Name, inst, &corev1.Node{}); ok {
				names[b.Key.Name] = true
			}
		}
	}
	return names
}

// budgetOf returns the slots a check stands for, if it is a budget, with
// the staleness rule that reads the cluster for a maxMaintenance slot.
func (a *Admission) budgetOf(ctx context.Context, p Profile, checkName string, node *corev1.Node, now time.Time) (Budget, bool) {
	b, ok := BudgetOf(p, checkName, node)
	expired := b.expired(a.slots, now)
	switch {
	case !ok:
	case b.MaxMaintenance == nil:
		b.stale = expired
	case expired != nil:
		notIn := a.notInMaintenance(ctx, now)
		b.stale = func(holder string, l *coordinationv1.Lease) bool { return expired(holder, l) || notIn(holder, l) }
	default:
		b.stale = a.notInMaintenance(ctx, now)
	}
	return b, ok
}

// StaleRule is the staleness rule of maxMaintenance slots at now.
func (a *Admission) StaleRule(ctx context.Context, now time.Time) budget.Stale {
	return a.notInMaintenance(ctx, now)
}

// notInMaintenance says a maxMaintenance slot is stale when its holder is
// no longer in maintenance for any profile (or is gone), once a grace has
// passed for a transition still being written: once this process has seen
// the slot unchanged for slotGrace on its own clock (Slots.Unchanged), not
// by the times another replica wrote in it. The cache rules out most
// holders without a request (they are in maintenance); what it cannot rule
// out is confirmed with the API server, since a lagging cache may miss a
// node's move into maintenance or its drain's NodeMaintenance.
func (a *Admission) notInMaintenance(ctx context.Context, now time.Time) budget.Stale {
	return func(holder string, l *coordinationv1.Lease) bool {
		if a.slots.Unchanged(l, now) < slotGrace {
			return false
		}
		return !needsSlot(ctx, a.client, holder) && !needsSlot(ctx, a.apiReader, holder)
	}
}

// needsSlot says the holder's node may still need its slot, as reader
// sees it: the node is in maintenance for some profile or leaving it (the
// enter triggers of the state it left for, a restore, not done), its record cannot
// be read, or the NodeMaintenance of its drain exists (its transition into
// maintenance waits for the drain). An error reading counts as needing it.
func needsSlot(ctx context.Context, reader client.Reader, holder string) bool {
	n := &corev1.Node{}
	if err := reader.Get(ctx, client.ObjectKey{Name: holder}, n); err != nil {
		return !apierrors.IsNotFound(err)
	}
	rec, err := engine.ReadRecord(n)
	if err != nil || rec.Holding() {
		return true
	}
	nm := &pitstopv1alpha1.NodeMaintenance{}
	err = reader.Get(ctx, client.ObjectKey{Name: maintenance.ForProfile(holder)}, nm)
	return !apierrors.IsNotFound(err)
}
