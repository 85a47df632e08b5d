package fleet

import (
	"fmt"
	"maps"
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
	for _, n := range v.Nodes() {
		if rec, err := v.records.Read(n); err == nil && rec.Holding() {
			out[n.Name] = true
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
