package fleet

import (
	"context"
	"maps"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/engine"
	"github.com/pitstop-dev/pitstop/internal/plugin/check"
)

// Overview is the fleet at a glance: where each profile's nodes stand, how
// much of each of its budgets is used, and whether its time windows and
// freezes let maintenance start. It runs only the checks that read nothing
// but the clock, so it costs one pass over the nodes per profile and can be
// served every few seconds on a large fleet; a node's full evaluation is
// Node's.
type Overview struct {
	// Nodes counts every node of the cluster.
	Nodes int `json:"nodes"`
	// States counts the nodes in a profile by their most severe state.
	States map[pitstopv1alpha1.MaintenanceState]int `json:"states"`
	// Profiles are in name order; a deleted profile still holding nodes in
	// maintenance is among them, with an Error.
	Profiles []ProfileView `json:"profiles"`
	// Unprofiled names the nodes no profile selects, in name order.
	Unprofiled []string `json:"unprofiled,omitempty"`
	// Unreadable are nodes whose record cannot be read: the engine leaves
	// them alone until it is fixed.
	Unreadable []NodeProblem `json:"unreadable,omitempty"`
	// NextChange is the earliest time a window or freeze opens or closes;
	// nil when none will.
	NextChange *time.Time `json:"nextChange,omitempty"`
}

// ProfileView is one profile in the Overview.
type ProfileView struct {
	Profile string `json:"profile"`
	// Error says why the profile cannot run as written: it does not compile
	// (the last generation that did keeps running), or it was deleted.
	Error string `json:"error,omitempty"`
	// Nodes are the profile's nodes with their state, in name order.
	Nodes []NodeState `json:"nodes"`
	// Budgets are the maxMaintenance checks, one entry per group.
	Budgets []Budget `json:"budgets,omitempty"`
	// Windows are the timeWindow and freeze checks, answered for now.
	Windows []Window `json:"windows,omitempty"`
}

// NodeState is where a node stands in a profile.
type NodeState struct {
	Node  string                           `json:"node"`
	State pitstopv1alpha1.MaintenanceState `json:"state"`
	Since time.Time                        `json:"since"`
}

// NodeProblem is a node the view cannot place.
type NodeProblem struct {
	Node  string `json:"node"`
	Error string `json:"error"`
}

// Budget is how much of a maxMaintenance check's budget is used in one
// group: nodes in maintenance counted as the check counts them (the
// profile's, or the whole cluster's), out of the nodes allowed at once.
type Budget struct {
	Check string `json:"check"`
	// ProfileScoped counts only the profile's nodes in maintenance for it;
	// otherwise every node in maintenance for any profile counts.
	ProfileScoped bool `json:"profileScoped"`
	// GroupBy is the label that splits the budget into groups, and Group
	// the value of this entry ("" for nodes without the label); with
	// several labels, GroupBy lists them and Group is "label=value,...".
	GroupBy string `json:"groupBy,omitempty"`
	Group   string `json:"group,omitempty"`
	Used    int    `json:"used"`
	Allowed int    `json:"allowed"`
}

// Window is a timeWindow or freeze check's answer: Passed means that,
// as far as this check goes, maintenance may start now (the window is
// open, no freeze holds).
type Window struct {
	Plugin string `json:"plugin"`
	engine.CheckEvaluation
}

// Overview reads the profiles and nodes once and places every node.
// A node's state in a profile is the one the engine would see on its next
// pass, as in Node: a profile that newly selects it starts it operational.
func (e *Evaluator) Overview(ctx context.Context, now time.Time) (*Overview, error) {
	list := &pitstopv1alpha1.MaintenanceProfileList{}
	if err := e.reader.List(ctx, list); err != nil {
		return nil, err
	}
	nodes := &corev1.NodeList{}
	// The view only reads the nodes: the cache's own objects will do.
	if err := e.reader.List(ctx, nodes, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	view := &Cluster{ctx: ctx, reader: e.reader, profiles: list.Items, records: e.records, slots: e.slots, nodes: Pointers(nodes.Items), loaded: true}
	e.records.prune(view.nodes)
	fv := &Overview{Nodes: len(nodes.Items), States: map[pitstopv1alpha1.MaintenanceState]int{}, Profiles: []ProfileView{}}
	byProfile := map[string][]NodeState{}
	for i := range nodes.Items {
		node := &nodes.Items[i]
		record, err := syncedRecord(view, node, now)
		if err != nil {
			fv.Unreadable = append(fv.Unreadable, NodeProblem{Node: node.Name, Error: err.Error()})
			continue
		}
		if len(record.Profiles) == 0 {
			fv.Unprofiled = append(fv.Unprofiled, node.Name)
			continue
		}
		fv.States[record.MostSevere()]++
		for name, pr := range record.Profiles {
			byProfile[name] = append(byProfile[name], NodeState{Node: node.Name, State: pr.Current, Since: pr.Since.Time})
		}
	}
	for i := range list.Items {
		p := &list.Items[i]
		pv := e.profileView(ctx, view, p, now)
		pv.Nodes = byProfile[p.Name]
		if pv.Nodes == nil {
			pv.Nodes = []NodeState{} // a profile without nodes lists none, not null
		}
		delete(byProfile, p.Name)
		fv.Profiles = append(fv.Profiles, pv)
	}
	for name, held := range byProfile {
		fv.Profiles = append(fv.Profiles, ProfileView{Profile: name, Error: "the profile was deleted; its nodes are still in maintenance for it", Nodes: held})
	}
	fv.sort()
	return fv, nil
}

// syncedRecord is the node's record as the engine would see it on its
// next pass; the cached record is shared, so it is synced on a copy.
func syncedRecord(view *Cluster, node *corev1.Node, now time.Time) (engine.Record, error) {
	cached, err := view.records.Read(node)
	if err != nil {
		return engine.Record{}, err
	}
	record := engine.Record{Profiles: maps.Clone(cached.Profiles)}
	var selected []string
	for i := range view.profiles {
		if view.selects(&view.profiles[i], node) {
			selected = append(selected, view.profiles[i].Name)
		}
	}
	record.Sync(selected, now)
	return record, nil
}

// profileView answers a profile's budgets and windows.
func (e *Evaluator) profileView(ctx context.Context, view *Cluster, p *pitstopv1alpha1.MaintenanceProfile, now time.Time) ProfileView {
	pv := ProfileView{Profile: p.Name}
	c, err := e.profiles.Get(p)
	if err != nil {
		pv.Error = err.Error()
	}
	if c == nil {
		return pv
	}
	for _, inst := range c.Spec.Spec.Checks {
		if b, ok := check.BudgetOf(c.Spec.Name, inst, &corev1.Node{}); ok && b.MaxMaintenance != nil {
			pv.Budgets = append(pv.Budgets, budgets(view, c.Spec.Name, inst.Name, b.MaxMaintenance, now)...)
			continue
		}
		if check.ReadsOf(inst) == check.ReadsClock {
			// The check reads the clock only, so any node will do.
			res, err := c.Checks[inst.Name].Evaluate(ctx, check.Context{Node: &corev1.Node{}, Profile: p.Name, Now: now, Cluster: view})
			pv.Windows = append(pv.Windows, Window{Plugin: check.PluginName(inst), CheckEvaluation: engine.NewCheckEvaluation(inst.Name, res, err)})
		}
	}
	return pv
}

// budgets counts a maxMaintenance check's budget in each group the
// profile's nodes are in, as the check counts it.
func budgets(view *Cluster, profile, checkName string, m *pitstopv1alpha1.MaxMaintenanceCheck, now time.Time) []Budget {
	// Each group by its key (check.GroupOf), with what the dashboard shows
	// of it: the value of the one label, or every label=value.
	groups := map[string]string{}
	keys := check.GroupLabels(m)
	if len(keys) == 0 {
		groups[""] = "" // one budget, even while the profile has no nodes
	}
	members := view.ProfileNodes(profile)
	for _, n := range members {
		shown := check.GroupOf(m, n.Labels)
		if len(keys) == 1 {
			shown = n.Labels[keys[0]]
		}
		groups[check.GroupOf(m, n.Labels)] = shown
	}
	groupBy := strings.Join(keys, ",")
	out := make([]Budget, 0, len(groups))
	for group, shown := range groups {
		out = append(out, Budget{
			Check: checkName, ProfileScoped: m.ProfileScoped, GroupBy: groupBy, Group: shown, Allowed: int(m.Max),
			Used: check.MaintenanceUsed(view, profile, m, group, "", now),
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out
}

// sort puts everything in a stable order and finds the next change.
func (fv *Overview) sort() {
	sort.Slice(fv.Profiles, func(i, j int) bool { return fv.Profiles[i].Profile < fv.Profiles[j].Profile })
	for _, pv := range fv.Profiles {
		sort.Slice(pv.Nodes, func(i, j int) bool { return pv.Nodes[i].Node < pv.Nodes[j].Node })
		for _, w := range pv.Windows {
			if w.NextChange != nil && (fv.NextChange == nil || w.NextChange.Before(*fv.NextChange)) {
				fv.NextChange = w.NextChange
			}
		}
	}
	sort.Strings(fv.Unprofiled)
	sort.Slice(fv.Unreadable, func(i, j int) bool { return fv.Unreadable[i].Node < fv.Unreadable[j].Node })
}
