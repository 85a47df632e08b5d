// Package check holds the check plugins of maintenance profiles: each
// answers, for one node at one instant, whether a condition holds, why, and
// when the answer can next change by itself. Checks are pure: they read the
// node, the clock and a read-only view of the cluster given to them, and
// never write. prometheusInstant alone reaches out: it queries Prometheus,
// with credentials read from an opted-in Secret (package profilesecret)
// that it keeps out of every error and reason. Admission into maintenance
// under a budget (maxMaintenance, stagger) is serialized elsewhere, through
// the API server; the checks here only say whether a slot looks free.
package check

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

// Context is what a check sees when it is evaluated.
type Context struct {
	// Node is the node under evaluation.
	Node *corev1.Node
	// Profile is the name of the profile being evaluated.
	Profile string
	// State is the node's current state in Profile, and Since when.
	State pitstopv1alpha1.MaintenanceState
	Since time.Time
	// Now is the instant of the evaluation; checks never read the clock.
	Now time.Time
	// Cluster is a read-only view of the rest of the cluster.
	Cluster Cluster
	// Recheck is how soon a check that asks a service outside the
	// cluster wants to be evaluated again (Result.NextChange); zero: its
	// own time. The profile's spec.recheck.
	Recheck time.Duration
}

// recheck is when a check that asks a service outside the cluster is
// evaluated again: after the profile's Recheck, or after own.
func (c Context) recheck(own time.Duration) time.Time {
	if c.Recheck > 0 {
		return c.Now.Add(c.Recheck)
	}
	return c.Now.Add(own)
}

// Cluster is the read-only view of the cluster checks may use. The
// controller serves it from its cache; tests serve it from slices.
type Cluster interface {
	// Nodes returns every node.
	Nodes() []*corev1.Node
	// ProfileNodes returns the nodes the profile selects.
	ProfileNodes(profile string) []*corev1.Node
	// StateOf returns a node's state in a profile ("" when the profile does
	// not select it) and whether the node is in maintenance for any profile.
	StateOf(node *corev1.Node, profile string) (state pitstopv1alpha1.MaintenanceState, inMaintenanceAnywhere bool)
	// PodsOn returns the pods bound to a node.
	PodsOn(node string) []corev1.Pod
}

// Prometheus runs PromQL instant queries.
type Prometheus interface {
	// Query returns the single sample value of query at the instant, or an
	// error when the query fails or does not return exactly one sample. It
	// sends creds only to url's scheme and host.
	Query(ctx context.Context, url string, creds Credentials, query string, at time.Time) (float64, error)
}

// Credentials authenticate a Prometheus query: a bearer token, or a
// username and password (basic authentication); the zero value sends
// none. They print as a placeholder, so that a stray %v cannot put them in
// a log or an error.
type Credentials struct {
	BearerToken        string
	Username, Password string
}

// String implements fmt.Stringer.
func (Credentials) String() string { return "<credentials from Secret>" }

// GoString implements fmt.GoStringer.
func (c Credentials) GoString() string { return c.String() }

// Result is the answer of one check.
type Result struct {
	// Passed says whether the check holds.
	Passed bool
	// Reason says why, for people: "window 22:00–04:00 Europe/Berlin opens
	// in 3h12m", "2 of 2 maintenance slots taken in zone-a".
	Reason string
	// NextChange is when the result can change by itself, with nothing in
	// the cluster changing (a window opening, a wait elapsing); zero when
	// only a change in the cluster can change it.
	NextChange time.Time
}

// Check is one configured check plugin.
type Check interface {
	// Evaluate answers for the node in c. An error means the check could
	// not be evaluated (a failing Prometheus query); the transition then
	// does not pass.
	Evaluate(ctx context.Context, c Context) (Result, error)
}

// Slots is implemented by a Cluster that knows which nodes hold the slots
// of a maxMaintenance budget: nodes admitted into maintenance that have
// not entered it yet (their drain is under way) hold one as much as the
// nodes in maintenance. The maxMaintenance check counts both; a Cluster
// that does not implement it counts the nodes in maintenance alone.
type Slots interface {
	// SlotHolders names the nodes holding slots of the budget of profile's
	// maxMaintenance check m in group (GroupOf: "label=value,...").
	SlotHolders(profile string, m *pitstopv1alpha1.MaxMaintenanceCheck, group string) []string
}

// MaintenanceAges is implemented by a Cluster that knows since when each
// node is in maintenance: a maxMaintenance check with skipAfter leaves out
// the nodes in it for longer.
type MaintenanceAges interface {
	// InMaintenanceSince is when the node entered in-maintenance for the
	// profile holding it; false when it is not in maintenance.
	InMaintenanceSince(node string) (time.Time, bool)
}

// Occupancy is implemented by a Cluster that knows every node pitstop has
// under maintenance, whatever started it: the holders of every
// maxMaintenance budget's slots, and the nodes of NodeMaintenances (a
// user's, a drain's, a Machine's deletion). The maxMaintenance check counts
// them against a budget shared by every profile.
type Occupancy interface {
	Occupied() []string
}

// Holding is implemented by a Cluster that keeps at hand the nodes whose
// record holds budget slots (in maintenance for a profile, or leaving it),
// as an index of the manager's cache does. The maxMaintenance check then
// counts from them, and looks the other nodes it counts up by name,
// rather than going over every node: a node's evaluation costs the same
// on a fleet of any size.
type Holding interface {
	// HoldingNodes returns at least every node whose record holds budget
	// slots; the check reads each one's state.
	HoldingNodes() []*corev1.Node
	// Node returns the node named; nil when the cluster has none.
	Node(name string) *corev1.Node
	// Selects says whether the profile selects the node, as ProfileNodes
	// does.
	Selects(profile string, node *corev1.Node) bool
}

// Entries is implemented by a Cluster that knows when nodes entered
// in-maintenance. The stagger check type-asserts its Cluster to it; a
// Cluster that does not implement it lets stagger pass, since nothing can
// be spaced out without entry times.
type Entries interface {
	// EnteredMaintenance returns when nodes of the profile entered
	// in-maintenance for it, in any order: every entry the Cluster
	// remembers, including those of nodes that have left the state since,
	// because stagger spaces out entries, not concurrent maintenances.
	EnteredMaintenance(profile string) []time.Time
}
