package nodemaintenance

import (
	"context"
	"errors"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/pitstop-dev/pitstop/internal/drain"
)

// budgetGate remembers what this process has seen of PodDisruptionBudget
// status, so that a drain does not evict on a status that may predate
// the disruption controller's view after an API server restart: when it
// last lost sight of the API server (a gap), when each budget's status
// last changed, and which drains it started itself.
//
// A gap is noticed when the cache's PodDisruptionBudget watch fails (a
// list that fails, a watch too old to resume), when an eviction or
// deletion finds the API server unreachable, and, for a drain another
// process started (a restart, a leader handover, both usual after an API
// server restart since the leader loses its Lease), when this process
// started.
type budgetGate struct {
	clock  clock.PassiveClock
	settle time.Duration

	mu      sync.Mutex
	started time.Time
	gap     time.Time
	changed map[types.UID]time.Time
	ours    map[types.UID]bool // drains this process started
}

func newBudgetGate(clk clock.PassiveClock, settle time.Duration) *budgetGate {
	return &budgetGate{clock: clk, settle: settle, started: clk.Now(), changed: map[types.UID]time.Time{}, ours: map[types.UID]bool{}}
}

// noticeGap records that this process may have missed what the API server
// went through.
func (g *budgetGate) noticeGap() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gap = g.clock.Now()
}

// startedDrain records that this process started the drain of nm.
func (g *budgetGate) startedDrain(nm types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ours[nm] = true
}

// forget drops a NodeMaintenance that is going away.
func (g *budgetGate) forget(nm types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.ours, nm)
}

// view is what a drain of nm has to go by for pdb.
func (g *budgetGate) view(nm types.UID, pdb *policyv1.PodDisruptionBudget) drain.StatusView {
	g.mu.Lock()
	defer g.mu.Unlock()
	v := drain.StatusView{Gap: g.gap, Changed: g.changed[pdb.UID], Settle: g.settle}
	if !g.ours[nm] && g.started.After(v.Gap) {
		v.Gap = g.started
	}
	return v
}

// waiting says whether a gap's settle period is still running: only then
// does a mere change of status free pods.
func (g *budgetGate) waiting() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.clock.Now()
	return now.Before(g.gap.Add(g.settle)) || now.Before(g.started.Add(g.settle))
}

func (g *budgetGate) sawChange(pdb types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.changed[pdb] = g.clock.Now()
}

func (g *budgetGate) dropBudget(pdb types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.changed, pdb)
}

// noticeUnreachable records a gap when a result shows the API server could
// not be reached or was not serving.
func (g *budgetGate) noticeUnreachable(results ...drain.Result) {
	for _, r := range results {
		for _, p := range r.With(drain.Failed) {
			if isUnreachable(p.Err) {
				g.noticeGap()
				return
			}
		}
	}
}

// isUnreachable says the error is the API server's absence rather than its
// answer: a connection refused or reset, a timeout, or a 5xx.
func isUnreachable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	return utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) ||
		errors.Is(err, context.DeadlineExceeded) || apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) ||
		apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err)
}

// watchBudgets has the cache's PodDisruptionBudget informer report its
// watch failures to the gate, after logging them as client-go does. It must
// run before the cache starts; an informer that cannot take a handler
// (none but client-go's shared informers) leaves only the other signals.
func (g *budgetGate) watchBudgets(ctx context.Context, mgr ctrl.Manager) error {
	inf, err := mgr.GetCache().GetInformer(ctx, &policyv1.PodDisruptionBudget{})
	if err != nil {
		return err
	}
	settable, ok := inf.(interface {
		SetWatchErrorHandlerWithContext(toolscache.WatchErrorHandlerWithContext) error
	})
	if !ok {
		return nil
	}
	return settable.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *toolscache.Reflector, err error) {
		toolscache.DefaultWatchErrorHandler(ctx, r, err)
		g.noticeGap()
	})
}

// budgetEvents records changes of budget status in the gate and wakes the
// drains a budget holds up when it may let them go on: it allows more
// disruptions, its observedGeneration moves, or, while a gap's settle
// period runs, its status changes at all. The gate is written before the
// drains are queued, so that they see the change.
func (r *Reconciler) budgetEvents() handler.Funcs {
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if !e.IsInInitialList {
				r.gate.sawChange(e.Object.GetUID())
			}
			r.enqueueBlockedBy(ctx, e.Object, q)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			old, ok1 := e.ObjectOld.(*policyv1.PodDisruptionBudget)
			pdb, ok2 := e.ObjectNew.(*policyv1.PodDisruptionBudget)
			if !ok1 || !ok2 || equality.Semantic.DeepEqual(old.Status, pdb.Status) {
				return
			}
			waiting := r.gate.waiting()
			r.gate.sawChange(pdb.UID)
			if pdb.Status.DisruptionsAllowed > old.Status.DisruptionsAllowed ||
				pdb.Status.ObservedGeneration != old.Status.ObservedGeneration || waiting {
				r.enqueueBlockedBy(ctx, pdb, q)
			}
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			r.gate.dropBudget(e.Object.GetUID())
			r.enqueueBlockedBy(ctx, e.Object, q)
		},
	}
}

// enqueueBlockedBy queues the drains that name the budget among their
// blockers.
func (r *Reconciler) enqueueBlockedBy(ctx context.Context, pdb client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	for _, req := range r.maintenancesBlockedBy(ctx, pdb) {
		q.Add(req)
	}
}

// heldPod is a pod the drain does not evict now: the budget that covers it
// has a status that may be stale.
type heldPod struct {
	pod   *corev1.Pod
	pdb   *policyv1.PodDisruptionBudget
	why   string
	until time.Time // zero: until the budget changes
}
