package fleet

import (
	"fmt"
	"maps"
	"regexp"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/admission"
)

// UnderMaintenance names every node pitstop has under maintenance, whatever
// started it, as a budget that is not profile-scoped counts them: the
// holders of any maxMaintenance slot (let in, on their way in or in), the
// nodes of NodeMaintenances not being deleted (a user's, a profile's
// drain, a Machine's deletion, a health check's or a medik8s request),
// and the nodes a profile holds in maintenance. leases reads the slots:
// the API server when admission depends on the count, the cache when it
// is only shown.
//
// A node's record is written on the node, and anything that may patch the
// node (its own kubelet among them) can forge it. So the record alone
// counts a node only for a profile that takes no maxMaintenance slot
// (recordCounts): a node pitstop let into maintenance through a
// maxMaintenance check holds that check's slot, a Lease in pitstop's
// namespace, until it is recorded out, and is counted by the slot. A
// forged in-maintenance record naming a profile whose every way into
// maintenance takes such a slot, or a profile that does not exist, holds
// no budget.
func (v *Cluster) UnderMaintenance(leases client.Reader) (map[string]bool, error) {
	out := map[string]bool{}
	holders, err := v.slots.EveryHolder(v.ctx, leases)
	if err != nil {
		return nil, err
	}
	budgets := admission.MaxMaintenanceBudgetNames(v.profiles)
	for key, names := range holders {
		if budgets[key.Name] {
			for _, n := range names {
				out[n] = true
			}
		}
	}
	list := &pitstopv1alpha1.NodeMaintenanceList{}
	if err := v.reader.List(v.ctx, list); err != nil {
		return nil, fmt.Errorf("listing NodeMaintenances: %w", err)
	}
	for _, nm := range list.Items {
		if nm.DeletionTimestamp.IsZero() {
			out[nm.Spec.NodeName] = true
		}
	}
	counts := recordCounts(v.profiles)
	// A node counts by its record only while in maintenance or leaving
	// it: while its record holds budget slots.
	for _, n := range v.HoldingNodes() {
		rec, err := v.records.Read(n)
		if err != nil {
			continue
		}
		for name, pr := range rec.Profiles {
			if counts[name] && (pr.Current == pitstopv1alpha1.StateInMaintenance || pr.Leaving()) {
				out[n.Name] = true
			}
		}
	}
	return out, nil
}

// Occupied implements check.Occupancy from the cache; nil when it cannot
// be read (the slots of the check's own budget still count).
func (v *Cluster) Occupied() []string {
	if v.occupiedCached == nil {
		var cache client.Reader
		if v.slots != nil {
			cache = v.slots.Cache
		}
		occupied, err := v.UnderMaintenance(cache)
		if err != nil {
			return nil
		}
		v.occupiedCached = occupied
	}
	return slices.Sorted(maps.Keys(v.occupiedCached))
}

// recordCounts names the profiles whose nodes in maintenance count by
// their record alone: every profile but those whose every transition into
// in-maintenance names a maxMaintenance check without skipAfter. A node
// taking such a transition holds that check's slot (admission takes a slot
// of every budget a transition names) until it is recorded out. A
// maxMaintenance check with skipAfter may let its slot go to the next
// node while the first is still in maintenance, so its record counts.
func recordCounts(profiles []pitstopv1alpha1.MaintenanceProfile) map[string]bool {
	out := map[string]bool{}
	for _, p := range profiles {
		slotted := map[string]bool{}
		for _, inst := range p.Spec.Checks {
			if m := inst.MaxMaintenance; m != nil && m.SkipAfter == nil {
				slotted[inst.Name] = true
			}
		}
		out[p.Name] = false
		for _, st := range []pitstopv1alpha1.StateSpec{p.Spec.States.Operational, p.Spec.States.MaintenanceRequired} {
			for _, t := range st.Transitions {
				if t.Next == pitstopv1alpha1.StateInMaintenance && !namesAny(t.Check, slotted) {
					out[p.Name] = true
				}
			}
		}
	}
	return out
}

// checkName matches the names of checks in an expression.
var checkName = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)

// namesAny says whether the expression names one of the checks.
func namesAny(expression string, checks map[string]bool) bool {
	for _, name := range checkName.FindAllString(expression, -1) {
		if checks[name] {
			return true
		}
	}
	return false
}
