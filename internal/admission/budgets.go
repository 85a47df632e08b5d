package admission

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/budget"
	"github.com/pitstop-dev/pitstop/internal/engine"
	"github.com/pitstop-dev/pitstop/internal/plugin/check"
)

// Profile is what admission reads of a running profile: its checks (which
// of them are budgets) and its compiled transitions.
type Profile struct {
	Spec        *pitstopv1alpha1.MaintenanceProfile
	Transitions map[pitstopv1alpha1.MaintenanceState][]engine.CompiledTransition
}

// Budget is the slots a budget check stands for on one node.
type Budget struct {
	Key  budget.Key
	Size int
	// Check is the budget's check; MaxMaintenance its configuration, if
	// it is a maxMaintenance check.
	Check          string
	MaxMaintenance *pitstopv1alpha1.MaxMaintenanceCheck
	// stale says a holder no longer needs its slot; it may read the API
	// server.
	stale budget.Stale
	// lasts is how long a stagger slot lasts, and skipAfter how long the
	// holder of a maxMaintenance slot with skipAfter counts (0: for ever),
	// on this process's sight of the slot (expired).
	lasts, skipAfter time.Duration
}

// expired says a slot no longer counts from the Lease alone, or is nil
// when the budget's slots never expire: a stagger slot whose time ran out,
// or a maxMaintenance slot held for longer than skipAfter. The time is
// this process's own: how long it has seen the slot unchanged
// (Slots.Unchanged), never the acquireTime the taker wrote with its clock,
// so that a replica whose clock is ahead (or a fresh one) does not let a
// second node in early. It is never shorter than the time since the slot
// was taken, so a stagger slot lasts at least its duration, and a holder
// counts for at least skipAfter.
func (b Budget) expired(slots *budget.Slots, now time.Time) budget.Stale {
	switch {
	case b.MaxMaintenance == nil:
		return func(_ string, l *coordinationv1.Lease) bool {
			return l.Spec.AcquireTime == nil || slots.Unchanged(l, now) >= b.lasts
		}
	case b.skipAfter > 0:
		// A holder let in longer ago than skipAfter no longer counts (the
		// check leaves it out too): its slot may be taken.
		return func(_ string, l *coordinationv1.Lease) bool {
			return l.Spec.AcquireTime != nil && slots.Unchanged(l, now) >= b.skipAfter
		}
	}
	return nil
}

// WakeKey names what the nodes waiting for a slot of the budget wait on.
func (b Budget) WakeKey() string { return budgetWakeKey(b.Key) }

// BudgetOf returns the slots the check checkName of p stands for on node,
// if it is a budget (check.BudgetOf). A stagger slot is stale once expired;
// a maxMaintenance slot's rule reads the cluster (Admission.budgetOf).
func BudgetOf(p Profile, checkName string, node *corev1.Node) (Budget, bool) {
	for _, inst := range p.Spec.Spec.Checks {
		if inst.Name != checkName {
			continue
		}
		b, ok := check.BudgetOf(p.Spec.Name, inst, node)
		if !ok {
			return Budget{}, false
		}
		sb := Budget{Key: b.Key, Size: b.Size, Check: checkName, MaxMaintenance: b.MaxMaintenance, lasts: b.Lasts}
		if m := b.MaxMaintenance; m != nil && m.SkipAfter != nil {
			sb.skipAfter = m.SkipAfter.Duration
		}
		return sb, true
	}
	return Budget{}, false
}

// MaxMaintenanceBudgets returns the budgets of the profile's
// maxMaintenance checks that the node counts against.
func MaxMaintenanceBudgets(p Profile, node *corev1.Node) []Budget {
	var budgets []Budget
	for _, inst := range p.Spec.Spec.Checks {
		if b, ok := BudgetOf(p, inst.Name, node); ok && b.MaxMaintenance != nil {
			budgets = append(budgets, b)
		}
	}
	return budgets
}

// MaxMaintenanceBudgetNames names the budgets of maxMaintenance checks
// (Key.Name): the one shared by every profile, and the own budget of each
// profile with such a check.
func MaxMaintenanceBudgetNames(profiles []pitstopv1alpha1.MaintenanceProfile) map[string]bool {
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

// LineKeys names the budgets that alone keep a node in state from moving
// into maintenance: the wake keys of the budget checks that failed (by
// passed) in a transition into maintenance that would pass with them.
func LineKeys(p Profile, node *corev1.Node, state pitstopv1alpha1.MaintenanceState, passed map[string]bool) []string {
	if state == pitstopv1alpha1.StateInMaintenance {
		return nil
	}
	var keys []string
	for _, t := range p.Transitions[state] {
		if t.Next != pitstopv1alpha1.StateInMaintenance {
			continue
		}
		withSlots := maps.Clone(passed)
		var budgets []Budget
		for _, name := range t.Expression.Names() {
			if b, ok := BudgetOf(p, name, node); ok && !passed[name] {
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
			keys = append(keys, b.WakeKey())
		}
	}
	return keys
}

// WakeKeys names what a node that stays in state waits for from the rest of
// the fleet: the budgets of its transitions' budget checks, and the
// profile itself for checks that look at other nodes.
func WakeKeys(p Profile, node *corev1.Node, state pitstopv1alpha1.MaintenanceState) []string {
	var keys []string
	for _, t := range p.Transitions[state] {
		for _, name := range t.Expression.Names() {
			if b, ok := BudgetOf(p, name, node); ok {
				keys = append(keys, b.WakeKey())
				continue
			}
			for _, inst := range p.Spec.Spec.Checks {
				if inst.Name == name && check.ReadsOf(inst) == check.ReadsFleet {
					keys = append(keys, ProfileWakeKey(p.Spec.Name))
				}
			}
		}
	}
	return keys
}

// NextChanges splits the times the node's check results change by
// themselves (check.Result.NextChange) into the budgets' (a stagger slot
// or a maxMaintenance slot with skipAfter expiring), by wake key, and the
// earliest of the others. A node waiting on a budget is evaluated again at
// the others' time; the budgets' wake the front of their line instead
// (Admission.Wait), so that a slot expiring does not evaluate every node
// that waits for it.
func NextChanges(p Profile, node *corev1.Node, results map[string]check.Result) (others time.Time, budgets map[string]time.Time) {
	for name, r := range results {
		if r.NextChange.IsZero() {
			continue
		}
		if b, ok := BudgetOf(p, name, node); ok {
			if budgets == nil {
				budgets = map[string]time.Time{}
			}
			if at, ok := budgets[b.WakeKey()]; !ok || r.NextChange.Before(at) {
				budgets[b.WakeKey()] = r.NextChange
			}
			continue
		}
		if others.IsZero() || r.NextChange.Before(others) {
			others = r.NextChange
		}
	}
	return others, budgets
}

func budgetWakeKey(k budget.Key) string { return "budget/" + k.Name + "/" + k.Group }

// ProfileWakeKey names what the nodes whose checks count the profile's
// other nodes wait on.
func ProfileWakeKey(profile string) string { return "profile/" + profile }

// slotsTaken says why a node is not let in when every slot of budget b is
// taken.
func slotsTaken(b Budget) string {
	return fmt.Sprintf("all %d slots of budget %s are taken", b.Size, b.Check)
}

// linedUp says why a node is not let in when the nodes ahead of it in line
// take the free slots of budget b.
func linedUp(b Budget, free, ahead int) string {
	return fmt.Sprintf("%d of the %d slots of budget %s are free, and %d nodes have waited longer for them", free, b.Size, b.Check, ahead)
}

func groupScope(m *pitstopv1alpha1.MaxMaintenanceCheck, node *corev1.Node) string {
	keys := check.GroupLabels(m)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%q", k, node.Labels[k])
	}
	if len(parts) == 0 {
		return ""
	}
	return " with " + strings.Join(parts, ", ")
}

// Use is how full one budget check of a profile is.
type Use struct {
	Check      string
	Used, Size int
}

// Used reports each budget check of the profile (maxMaintenance and
// stagger, in the order listed) with the slots the cache shows taken at
// now. A budget per group reports its fullest group: of keys, the budgets
// with slot Leases, the groups of this one. Slots are reckoned as Admit
// takes them.
func Used(ctx context.Context, slots *budget.Slots, p Profile, keys []budget.Key, now time.Time) ([]Use, error) {
	var out []Use
	for _, inst := range p.Spec.Spec.Checks {
		// A node without labels stands for every node but the group: its
		// key is the budget's name, with the group labels and no values.
		b, ok := BudgetOf(p, inst.Name, &corev1.Node{})
		if !ok {
			continue
		}
		groups := []budget.Key{b.Key}
		if m := b.MaxMaintenance; m != nil && len(check.GroupLabels(m)) > 0 {
			groups = groups[:0]
			for _, k := range keys {
				if k.Name == b.Key.Name && check.InGroups(m, k.Group) {
					groups = append(groups, k)
				}
			}
		}
		u := Use{Check: inst.Name, Size: b.Size}
		for _, k := range groups {
			n, err := slots.CachedUsed(ctx, k, b.Size, b.expired(slots, now))
			if err != nil {
				return nil, err
			}
			u.Used = max(u.Used, n)
		}
		out = append(out, u)
	}
	return out, nil
}
