package nodemaintenance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/budget"
	"github.com/pitstop-dev/pitstop/internal/drain"
	"github.com/pitstop-dev/pitstop/internal/maintenance"
)

// Options tune the controller.
type Options struct {
	// MaxConcurrentReconciles is how many NodeMaintenances are worked on at
	// once.
	MaxConcurrentReconciles int
	// EvictionConcurrency bounds the evictions in flight for one node.
	EvictionConcurrency int
	// Evictions bound the evictions and pod deletions of every drain
	// together: in flight at once, and started a second.
	Evictions drain.LimiterOptions
	// BudgetSettle is how long after a gap in this process's view of the
	// API server (or after it started, for a drain it took over) a
	// PodDisruptionBudget that allows disruptions and whose status has not
	// changed since is trusted again; until then the pods it covers are not
	// evicted. 0 trusts it at
	// once; a budget whose observedGeneration lags is never trusted.
	BudgetSettle time.Duration
	// LeaseNamespace holds the Lease through which the managers of the
	// cluster take turns to check quorum and cordon a control-plane node.
	LeaseNamespace string
	// AllowSingleControlPlane lets the only control-plane node of a
	// cluster go into maintenance, which quorum never allows.
	AllowSingleControlPlane bool
	// Clock is the time the controller reads; nil is the system's. A test
	// sets one that runs ahead, to play a manager whose clock is off.
	Clock clock.PassiveClock
	// PodEventRate and PodEventBurst bound the Events that name each pod
	// a drain evicts or deletes, over every drain: PodEventBurst at once,
	// PodEventRate a second after a quiet spell.
	PodEventRate  float32
	PodEventBurst int
}

// DefaultOptions are the controller's defaults.
func DefaultOptions() Options {
	return Options{
		MaxConcurrentReconciles: 10,
		EvictionConcurrency:     100,
		Evictions:               drain.LimiterOptions{InFlight: 100, Rate: 200, Burst: 100},
		BudgetSettle:            30 * time.Second,
		LeaseNamespace:          "pitstop-system",
		PodEventRate:            5,
		PodEventBurst:           50,
	}
}

// Reconciler drives NodeMaintenance objects.
type Reconciler struct {
	client    client.Client
	apiReader client.Reader // uncached, for decisions that must not act on a stale view
	recorder  events.EventRecorder
	executor  *drain.Executor
	// queue sends a drain's evictions and deletions apart from the
	// reconcile workers, through executor.
	queue *drain.Queue
	clock clock.PassiveClock
	opts  Options

	// evicted remembers evictions the API server accepted but the cache does
	// not show yet, so that a reconcile right after does not ask again.
	evicted *expectations
	// writes paces status writes that only report progress.
	writes *writePacer
	// drainClock counts how long each drain has waited.
	drainClock *drainClock
	// gate holds back evictions against budgets whose status may be stale.
	gate *budgetGate
	// podEvents paces the Events naming each pod evicted or deleted.
	podEvents flowcontrol.RateLimiter
	// controlPlane serializes the quorum check and the cordon of
	// control-plane nodes in this process, so that two reconciles cannot
	// each take one down on the same count; turns does it across processes.
	controlPlane sync.Mutex
	turns        *budget.Slots
}

// conflictRetry is how soon a reconcile that lost an optimistic-concurrency
// race looks again; by then the cache has usually caught up.
const conflictRetry = 100 * time.Millisecond

// step is one stage of a reconcile. It returns how soon to look again
// (zero: when something changes) and whether later stages must wait.
type step func(ctx context.Context, s *snapshot) (requeue time.Duration, stop bool, err error)

// snapshot is what one reconcile knows about the world.
type snapshot struct {
	nm     *pitstopv1alpha1.NodeMaintenance
	node   *corev1.Node // nil when the node does not exist
	pods   []corev1.Pod // pods bound to the node
	others []pitstopv1alpha1.NodeMaintenance
	now    time.Time
}

// Reconcile takes one NodeMaintenance one step closer to its node being
// cordoned and drained, or, when it is being deleted, to the node being
// restored. Status is written once, at the end.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	nm := &pitstopv1alpha1.NodeMaintenance{}
	if err := r.client.Get(ctx, req.NamespacedName, nm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !nm.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, nm)
	}
	if !controllerutil.ContainsFinalizer(nm, pitstopv1alpha1.FinalizerNodeMaintenance) {
		if res, err := r.addFinalizer(ctx, nm); err != nil || !res.IsZero() {
			return res, err
		}
		// Go on from the object the API server returned rather than wait
		// for the watch to bring it back through the queue.
	}

	s, err := r.snapshot(ctx, nm)
	if err != nil {
		return ctrl.Result{}, err
	}
	before := nm.DeepCopy()
	var requeue time.Duration
	for _, run := range []step{reconcileSpec, r.reconcileOwnership, r.reconcileNode, r.reconcileCordon, r.reconcileDrain} {
		after, stop, stepErr := run(ctx, s)
		requeue = shortest(requeue, after)
		if stepErr != nil {
			err = stepErr
			break
		}
		if stop {
			break
		}
	}
	setSummary(nm)
	deferred, patchErr := r.patchStatus(ctx, before, nm, s.now)
	requeue = shortest(requeue, deferred)
	if patchErr != nil {
		err = errors.Join(err, patchErr)
	}
	// Once started, a drain waits its turn with the others (urgentPriority).
	normal := ptr.To(0)
	if apierrors.IsConflict(err) {
		return ctrl.Result{RequeueAfter: conflictRetry, Priority: normal}, nil // someone else wrote first; look again
	}
	return ctrl.Result{RequeueAfter: requeue, Priority: normal}, err
}

// addFinalizer makes sure the node is restored before the object goes away.
// Adding it is the first write; nm is then the object as written.
func (r *Reconciler) addFinalizer(ctx context.Context, nm *pitstopv1alpha1.NodeMaintenance) (ctrl.Result, error) {
	controllerutil.AddFinalizer(nm, pitstopv1alpha1.FinalizerNodeMaintenance)
	if err := r.client.Update(ctx, nm); err != nil {
		if apierrors.IsConflict(err) {
			return ctrl.Result{RequeueAfter: conflictRetry}, nil
		}
		return ctrl.Result{}, err
	}
	r.eventStarted(nm)
	return ctrl.Result{}, nil
}

// snapshot reads, from the cache, what a reconcile needs.
func (r *Reconciler) snapshot(ctx context.Context, nm *pitstopv1alpha1.NodeMaintenance) (*snapshot, error) {
	s := &snapshot{nm: nm, now: r.clock.Now()}
	node := &corev1.Node{}
	switch err := r.client.Get(ctx, types.NamespacedName{Name: nm.Spec.NodeName}, node); {
	case err == nil:
		s.node = node
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("reading node %s: %w", nm.Spec.NodeName, err)
	}
	pods := &corev1.PodList{}
	if err := r.client.List(ctx, pods, client.MatchingFields{maintenance.IndexPodNode: nm.Spec.NodeName}); err != nil {
		return nil, fmt.Errorf("listing pods on node %s: %w", nm.Spec.NodeName, err)
	}
	s.pods = pods.Items
	others := &pitstopv1alpha1.NodeMaintenanceList{}
	if err := r.client.List(ctx, others, client.MatchingFields{indexMaintenanceNode: nm.Spec.NodeName}); err != nil {
		return nil, fmt.Errorf("listing maintenances of node %s: %w", nm.Spec.NodeName, err)
	}
	for _, o := range others.Items {
		if o.Name != nm.Name {
			s.others = append(s.others, o)
		}
	}
	return s, nil
}

// reconcileOwnership stops a NodeMaintenance for a node that an older one
// already holds. The webhook refuses such objects; this catches the ones
// created at the same instant, or while the webhook was down.
func (r *Reconciler) reconcileOwnership(_ context.Context, s *snapshot) (time.Duration, bool, error) {
	holder := activeHolder(s.nm, s.others)
	if holder == "" {
		return 0, false, nil
	}
	msg := fmt.Sprintf("node %s is already in maintenance by NodeMaintenance %s; this one waits until that one is deleted", s.nm.Spec.NodeName, holder)
	setCondition(s.nm, pitstopv1alpha1.ConditionCordoned, false, pitstopv1alpha1.ReasonDuplicate, msg)
	setCondition(s.nm, pitstopv1alpha1.ConditionDrained, false, pitstopv1alpha1.ReasonDuplicate, msg)
	return 0, true, nil
}

// activeHolder returns the name of the NodeMaintenance that holds the node
// when it is not nm: the oldest one not being deleted (by creation time, then
// name).
func activeHolder(nm *pitstopv1alpha1.NodeMaintenance, others []pitstopv1alpha1.NodeMaintenance) string {
	oldest := nm
	for i := range others {
		o := &others[i]
		if !o.DeletionTimestamp.IsZero() {
			continue
		}
		if o.CreationTimestamp.Before(&oldest.CreationTimestamp) ||
			(o.CreationTimestamp.Equal(&oldest.CreationTimestamp) && o.Name < oldest.Name) {
			oldest = o
		}
	}
	if oldest == nm {
		return ""
	}
	return oldest.Name
}

// reconcileNode stops when the node does not exist. The object stays (and
// can be deleted at once) so that whoever asked sees what happened.
func (r *Reconciler) reconcileNode(_ context.Context, s *snapshot) (time.Duration, bool, error) {
	if s.node != nil {
		return 0, false, nil
	}
	msg := fmt.Sprintf("node %s does not exist", s.nm.Spec.NodeName)
	if !isConditionReason(s.nm, pitstopv1alpha1.ConditionCordoned, pitstopv1alpha1.ReasonNodeNotFound) {
		r.eventNodeNotFound(s.nm, msg)
	}
	setCondition(s.nm, pitstopv1alpha1.ConditionCordoned, false, pitstopv1alpha1.ReasonNodeNotFound, msg)
	setCondition(s.nm, pitstopv1alpha1.ConditionDrained, false, pitstopv1alpha1.ReasonNodeNotFound, msg)
	return 0, true, nil
}

// reconcileDelete restores the node and lets the object go. A node that no
// longer exists needs no restoring; a node another NodeMaintenance holds is
// left to that one.
func (r *Reconciler) reconcileDelete(ctx context.Context, nm *pitstopv1alpha1.NodeMaintenance) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(nm, pitstopv1alpha1.FinalizerNodeMaintenance) {
		return ctrl.Result{}, nil
	}
	// Nothing more is evicted for a maintenance that is ending.
	r.queue.Forget(nm.Name)
	s, err := r.snapshot(ctx, nm)
	if err != nil {
		return ctrl.Result{}, err
	}
	if s.node != nil && !heldByAnother(s.others) {
		if err := r.restoreNode(ctx, nm, s.node); err != nil {
			if apierrors.IsConflict(err) {
				return ctrl.Result{RequeueAfter: conflictRetry}, nil
			}
			return ctrl.Result{}, err
		}
	}
	r.evicted.forget(nm.Name)
	r.writes.forget(nm.Name)
	r.gate.forget(nm.UID)
	controllerutil.RemoveFinalizer(nm, pitstopv1alpha1.FinalizerNodeMaintenance)
	if err := r.client.Update(ctx, nm); err != nil && !apierrors.IsNotFound(err) {
		if apierrors.IsConflict(err) {
			return ctrl.Result{RequeueAfter: conflictRetry}, nil
		}
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
}

func heldByAnother(others []pitstopv1alpha1.NodeMaintenance) bool {
	for i := range others {
		if others[i].DeletionTimestamp.IsZero() {
			return true
		}
	}
	return false
}

// patchStatus writes status once, only when it changed, with optimistic
// locking so a stale reconcile cannot overwrite a newer one. A change that is
// only progress is held back while the last write is recent; it returns how
// long until it may be written, and the caller requeues for it.
func (r *Reconciler) patchStatus(ctx context.Context, before, after *pitstopv1alpha1.NodeMaintenance, now time.Time) (time.Duration, error) {
	after.Status.ObservedGeneration = after.Generation
	if statusEqual(before.Status, after.Status) {
		return 0, nil
	}
	if onlyProgress(before.Status, after.Status) {
		if wait := r.writes.wait(after.Name, now); wait > 0 {
			return wait, nil
		}
	}
	if err := r.client.Status().Patch(ctx, after, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return 0, err
	}
	r.writes.record(after.Name, now)
	return 0, nil
}

func shortest(a, b time.Duration) time.Duration {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	default:
		return min(a, b)
	}
}

func isConditionReason(nm *pitstopv1alpha1.NodeMaintenance, condType, reason string) bool {
	c := meta.FindStatusCondition(nm.Status.Conditions, condType)
	return c != nil && c.Reason == reason
}

// podRefs turns pods into bounded references, "and N more" left to the
// caller's message.
func podRefs(pods []*corev1.Pod, limit int) []pitstopv1alpha1.PodReference {
	refs := make([]pitstopv1alpha1.PodReference, 0, min(len(pods), limit))
	for _, p := range pods[:min(len(pods), limit)] {
		refs = append(refs, pitstopv1alpha1.PodReference{Namespace: p.Namespace, Name: p.Name})
	}
	return refs
}

// podList renders up to limit pods as "ns/a, ns/b, … (N more)".
func podList(pods []*corev1.Pod, limit int) string {
	names := make([]string, 0, min(len(pods), limit))
	for _, p := range pods[:min(len(pods), limit)] {
		names = append(names, p.Namespace+"/"+p.Name)
	}
	s := strings.Join(names, ", ")
	if len(pods) > limit {
		s += fmt.Sprintf(", … (%d more)", len(pods)-limit)
	}
	return s
}

// sortedPDBs lists budgets in a stable order for messages.
func sortedPDBs(pdbs map[string]*policyv1.PodDisruptionBudget) []*policyv1.PodDisruptionBudget {
	keys := make([]string, 0, len(pdbs))
	for k := range pdbs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]*policyv1.PodDisruptionBudget, 0, len(keys))
	for _, k := range keys {
		out = append(out, pdbs[k])
	}
	return out
}
