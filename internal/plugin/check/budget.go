package check

import (
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/budget"
)

// AllProfilesBudget is the name (budget.Key.Name) of the maxMaintenance
// budget shared by every profile: a check that is not ProfileScoped counts
// against it.
const AllProfilesBudget = "all-profiles"

// StaggerGroupBudget starts the name of a stagger group's budget, shared
// by the stagger checks of every profile that name the group. A profile
// name cannot hold a colon, so it never names a profile's own budget.
const StaggerGroupBudget = "stagger-group:"

// SlotBudget is the budget through which a budget check admits nodes into
// maintenance: Size slot Leases under Key, one per node let in.
type SlotBudget struct {
	Key  budget.Key
	Size int
	// Lasts is how long a slot holds once taken, for a stagger. A
	// maxMaintenance slot (Lasts 0) holds while its node is in maintenance.
	Lasts time.Duration
	// MaxMaintenance is the check's configuration when it is a
	// maxMaintenance check.
	MaxMaintenance *pitstopv1alpha1.MaxMaintenanceCheck
}

// BudgetOf returns the budget of inst, a check of profile, for node when
// the check is a budget (maxMaintenance, stagger).
func BudgetOf(profile string, inst pitstopv1alpha1.CheckInstance, node *corev1.Node) (SlotBudget, bool) {
	switch {
	case inst.MaxMaintenance != nil:
		m := inst.MaxMaintenance
		return SlotBudget{Key: MaxMaintenanceKey(profile, m, GroupOf(m, node.Labels)), Size: int(m.Max), MaxMaintenance: m}, true
	case inst.Stagger != nil:
		s := inst.Stagger
		key := budget.Key{Name: profile + "-stagger-" + inst.Name}
		if s.Group != "" {
			key.Name = StaggerGroupBudget + s.Group // shared by every profile that names it
		}
		return SlotBudget{Key: key, Size: int(max(s.Parallel, 1)), Lasts: s.Duration.Duration}, true
	}
	return SlotBudget{}, false
}

// MaxMaintenanceKey names the budget of profile's maxMaintenance check m
// for the nodes of group (GroupOf): one budget shared by every profile
// unless ProfileScoped, one per group with groups.
func MaxMaintenanceKey(profile string, m *pitstopv1alpha1.MaxMaintenanceCheck, group string) budget.Key {
	key := budget.Key{Name: AllProfilesBudget, Group: group}
	if m.ProfileScoped {
		key.Name = ScopeProfile(profile, m)
	}
	return key
}

// ScopeProfile is the profile whose nodes profile's maxMaintenance check m
// counts when ProfileScoped: m.Profile when set, else profile itself.
func ScopeProfile(profile string, m *pitstopv1alpha1.MaxMaintenanceCheck) string {
	if m.Profile != "" {
		return m.Profile
	}
	return profile
}

// GroupLabels are the labels m's budget is split by: GroupBy, then
// GroupByLabels, each once.
func GroupLabels(m *pitstopv1alpha1.MaxMaintenanceCheck) []string {
	var out []string
	for _, l := range append([]string{m.GroupBy}, m.GroupByLabels...) {
		if l != "" && !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	return out
}

// GroupOf is the group of m's budget that a node with labels is in: ""
// when m has no groups, else "label=value" for each of GroupLabels,
// joined by "," (neither label keys nor values hold a comma or, values,
// an equals sign). A node without a label is in the group of the value "".
func GroupOf(m *pitstopv1alpha1.MaxMaintenanceCheck, labels map[string]string) string {
	keys := GroupLabels(m)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + labels[k]
	}
	return strings.Join(parts, ",")
}

// InGroups says whether group is one of m's groups: its labels are
// GroupLabels, in order.
func InGroups(m *pitstopv1alpha1.MaxMaintenanceCheck, group string) bool {
	keys := GroupLabels(m)
	if len(keys) == 0 {
		return group == ""
	}
	parts := strings.Split(group, ",")
	if len(parts) != len(keys) {
		return false
	}
	for i, p := range parts {
		if k, _, ok := strings.Cut(p, "="); !ok || k != keys[i] {
			return false
		}
	}
	return true
}

// Reads is what a check's answer depends on besides the node it is asked
// about: when the engine must ask again, and whom a change wakes.
type Reads int

const (
	// ReadsNode: the node itself, its pods, or outside services about it.
	ReadsNode Reads = iota
	// ReadsClock: the clock alone (timeWindow, freeze). The answer is the
	// same for every node, and changes only at the time it says.
	ReadsClock
	// ReadsFleet: other nodes (their labels, states or count), so another
	// node's move can change it.
	ReadsFleet
)

// ReadsOf says what the check inst configures reads.
func ReadsOf(inst pitstopv1alpha1.CheckInstance) Reads {
	for _, p := range plugins(inst, Deps{}) {
		if p.set {
			return p.reads
		}
	}
	return ReadsNode
}
