package profile

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

// occupied names every node pitstop has under maintenance, whatever
// started it, as a budget that is not profile-scoped counts them: the
// holders of any maxMaintenance slot (let in, on their way in or in), the
// nodes of NodeMaintenances not being deleted (a user's, a profile's
// drain, a Machine's deletion, a health check's or a medik8s request),
// and the nodes a profile holds in maintenance. leases reads the slots:
// the API server when admission depends on the count, the cache when it
// is only shown.
func (v *clusterView) occupied(leases client.Reader) (map[string]bool, error) {
	out := map[string]bool{}
	holders, err := v.slots.EveryHolder(v.ctx, leases)
	if err != nil {
		return nil, err
	}
	budgets := maxMaintenanceBudgetNames(v.profiles)
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
		if rec, err := v.records.read(n); err == nil && rec.HeldBy() != "" {
			out[n.Name] = true
		}
	}
	return out, nil
}

// Occupied implements check.Occupancy from the cache; nil when it cannot
// be read (the slots of the check's own budget still count).
func (v *clusterView) Occupied() []string {
	if v.occupiedCached == nil {
		var cache client.Reader
		if v.slots != nil {
			cache = v.slots.Cache
		}
		occupied, err := v.occupied(cache)
		if err != nil {
			return nil
		}
		v.occupiedCached = occupied
	}
	return slices.Sorted(maps.Keys(v.occupiedCached))
}

// crowded checks, once the node holds a slot of every budget of its
// transition, the budgets shared by every profile against every node
// pitstop has under maintenance, read with the slots from the API server:
// another budget's slots (a different max or groupBy) and maintenance not
// started by a profile count too. It names the budget's check that is full
// and says why the node must give its slots back, or "" when it may go in.
//
// Two nodes let in at once by different budgets each list the slots after
// taking their own, so at least one of them sees the other: a node is let
// in only if, at that moment, fewer than max other nodes in its budget's
// scope were under maintenance.
func (r *Reconciler) crowded(view *clusterView, node *corev1.Node, budgets []slotBudget) (full, why string, err error) {
	if len(budgets) == 0 {
		return "", "", nil
	}
	occupied, err := view.occupied(r.slots.Client)
	if err != nil {
		return "", "", err
	}
	byName := map[string]*corev1.Node{}
	for _, n := range view.Nodes() {
		byName[n.Name] = n
	}
	for _, b := range budgets {
		var others []string
		for name := range occupied {
			n, ok := byName[name]
			if name == node.Name || !ok || (b.check.GroupBy != "" && n.Labels[b.check.GroupBy] != node.Labels[b.check.GroupBy]) {
				continue
			}
			others = append(others, name)
		}
		if len(others) >= b.size {
			slices.Sort(others)
			return b.name, fmt.Sprintf("budget %s allows %d nodes under maintenance%s, and %d others are: %s", b.name, b.size, groupScope(b.check, node), len(others), strings.Join(others, ", ")), nil
		}
	}
	return "", "", nil
}

func groupScope(m *pitstopv1alpha1.MaxMaintenanceCheck, node *corev1.Node) string {
	if m.GroupBy == "" {
		return ""
	}
	return fmt.Sprintf(" with %s=%q", m.GroupBy, node.Labels[m.GroupBy])
}
