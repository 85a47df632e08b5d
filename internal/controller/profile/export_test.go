package profile

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/admission"
	"github.com/pitstop-dev/pitstop/internal/budget"
	"github.com/pitstop-dev/pitstop/internal/fleet"
	"github.com/pitstop-dev/pitstop/internal/plugin/check"
)

// NewBareReconciler is a node Reconciler outside a manager, for tests that
// call Reconcile themselves: nodes are read through c first and apiReader
// on a conflict. Its profiles may not use notifications, nor budgets
// unless WithSlots gives it slots.
func NewBareReconciler(c client.Client, apiReader client.Reader) *Reconciler {
	r := &Reconciler{
		client:    c,
		apiReader: apiReader,
		recorder:  events.NewFakeRecorder(100),
		clock:     clock.RealClock{},
		profiles:  fleet.NewRegistry(check.Deps{}),
		records:   fleet.NewRecords(),
		written:   newWrittenNodes(),
		nodes:     fleet.ListNodes(c),
		decisions: fleet.NewDecisions(),
	}
	r.admission = admission.New(nil, c, apiReader, r.clock)
	return r
}

// SlotStale is the staleness rule of maxMaintenance slots at now.
func (r *Reconciler) SlotStale(ctx context.Context, now time.Time) budget.Stale {
	return r.admission.StaleRule(ctx, now)
}

// InformerNodes is the engine's lister of cached nodes.
func InformerNodes(c cache.Cache) (func(context.Context) ([]*corev1.Node, error), error) {
	return fleet.InformerNodes(c)
}

// InformerIndex is the engine's index of the cached nodes holding budget
// slots.
func InformerIndex(c cache.Cache) (*fleet.NodeIndex, error) {
	return fleet.InformerIndex(c, fleet.NewRecords())
}

// WriteNode writes want over node as the engine does; ErrStale when the
// node changed since it was read in a way the write depends on.
func (r *Reconciler) WriteNode(ctx context.Context, node, want *corev1.Node) error {
	return r.writeNode(ctx, node, want)
}

// WithInformerNodes has the Reconciler count over the nodes of the
// informer cache c and its index of the nodes holding budget slots, as
// the manager's does (Setup).
func (r *Reconciler) WithInformerNodes(c cache.Cache) (*Reconciler, error) {
	nodes, err := fleet.InformerNodes(c)
	if err != nil {
		return nil, err
	}
	r.nodes = nodes
	if r.index, err = fleet.InformerIndex(c, r.records); err != nil {
		return nil, err
	}
	return r, nil
}

// Watching has the Reconciler count on the watch of objects of kinds
// (trigger.Watched) to wake the nodes whose triggers wait on them, as its
// controller's watches do.
func (r *Reconciler) Watching(kinds ...string) *Reconciler {
	r.watched = map[string]bool{}
	for _, k := range kinds {
		r.watched[k] = true
	}
	return r
}

// WithSlots has the Reconciler take budget slots through s.
func (r *Reconciler) WithSlots(s *budget.Slots) *Reconciler {
	r.slots = s
	r.admission = admission.New(s, r.client, r.apiReader, r.clock)
	return r
}

// WithClock has the Reconciler read the time from c.
func (r *Reconciler) WithClock(c clock.Clock) *Reconciler {
	r.clock = c
	r.admission = admission.New(r.slots, r.client, r.apiReader, c)
	return r
}

// Woken names the nodes woken, since the last call, for what another node
// freed.
func (r *Reconciler) Woken() []string { return r.admission.TakeWoken() }

// OutOfLine takes a node out of the budgets' lines, as a failed
// evaluation of it does.
func (r *Reconciler) OutOfLine(node string) { r.admission.OutOfLine(node) }

// NewFleetCollector is the collector of the fleet gauges, reading through
// reader and the budgets' slots through slots, at clk's time.
func NewFleetCollector(reader client.Reader, slots *budget.Slots, clk clock.PassiveClock) prometheus.Collector {
	return newFleetCollector(reader, fleet.NewRecords(), fleet.NewRegistry(check.Deps{}), slots, clk)
}

// BudgetKey names the budget whose slots the check checkName of p stands
// for on node, as the engine takes them.
func BudgetKey(p *pitstopv1alpha1.MaintenanceProfile, checkName string, node *corev1.Node) (budget.Key, error) {
	c, err := fleet.Compile(p, check.Deps{})
	if err != nil {
		return budget.Key{}, err
	}
	b, ok := admission.BudgetOf(c.Admission(), checkName, node)
	if !ok {
		return budget.Key{}, fmt.Errorf("check %s of %s is no budget", checkName, p.Name)
	}
	return b.Key, nil
}

// LatestWarnings is the engine's Event recorder over r: a Warning whose
// message changed is an Event of its own.
func LatestWarnings(r events.EventRecorder) events.EventRecorder { return latestWarnings{r} }

// NewStatusReconciler is the profile status controller outside a manager,
// reading profiles and nodes through c, for tests that call Reconcile
// themselves.
func NewStatusReconciler(c client.Client) reconcile.Reconciler {
	return newStatusReconciler(c, fleet.ListNodes(c), fleet.NewRegistry(check.Deps{}), fleet.NewRecords(), clock.RealClock{})
}
