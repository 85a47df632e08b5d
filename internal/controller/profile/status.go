package profile

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/fleet"
)

// statusReconciler writes each profile's status: whether it is valid, and
// its nodes per state.
type statusReconciler struct {
	client   client.Client
	nodes    fleet.NodeLister
	profiles *fleet.Registry
	records  *fleet.Records
	clock    clock.PassiveClock

	// written is when each profile's status was last written, for
	// statusCountsInterval.
	mu      sync.Mutex
	written map[string]time.Time
}

// statusCountsInterval paces the status writes that only move the nodes
// per state and the last transition time: on a fleet where nodes change
// state several times a second, each change would otherwise be a write of
// the profile (at 100 nodes, four writes per node maintained). The counts
// are at most this old; a change of the conditions is written at once.
const statusCountsInterval = 2 * time.Second

func newStatusReconciler(c client.Client, nodes fleet.NodeLister, profiles *fleet.Registry, records *fleet.Records, clk clock.PassiveClock) *statusReconciler {
	return &statusReconciler{client: c, nodes: nodes, profiles: profiles, records: records, clock: clk, written: map[string]time.Time{}}
}

func (s *statusReconciler) allProfiles(ctx context.Context, _ client.Object) []reconcile.Request {
	list := &pitstopv1alpha1.MaintenanceProfileList{}
	if err := s.client.List(ctx, list); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, p := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: p.Name}})
	}
	return reqs
}

func (s *statusReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	p := &pitstopv1alpha1.MaintenanceProfile{}
	if err := s.client.Get(ctx, req.NamespacedName, p); err != nil {
		if apierrors.IsNotFound(err) {
			s.mu.Lock()
			delete(s.written, req.Name) // a profile made again under the name starts afresh
			s.mu.Unlock()
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !p.DeletionTimestamp.IsZero() {
		return s.release(ctx, p)
	}
	if !controllerutil.ContainsFinalizer(p, pitstopv1alpha1.FinalizerMaintenanceProfile) {
		held := p.DeepCopy()
		controllerutil.AddFinalizer(held, pitstopv1alpha1.FinalizerMaintenanceProfile)
		if err := s.client.Patch(ctx, held, client.MergeFromWithOptions(p, client.MergeFromWithOptimisticLock{})); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		p = held
	}
	before := p.DeepCopy()
	running, err := s.profiles.Get(p)
	if running != nil && (p.Status.LastValid == nil || p.Status.LastValid.Generation != running.Spec.Generation) {
		p.Status.LastValid = &pitstopv1alpha1.ProfileGeneration{Generation: running.Spec.Generation, Spec: *running.Spec.Spec.DeepCopy()}
	}
	valid := metav1.Condition{Type: pitstopv1alpha1.ConditionValid, Status: metav1.ConditionTrue, Reason: pitstopv1alpha1.ReasonCompiled, Message: "every check, trigger and transition is valid", ObservedGeneration: p.Generation}
	ready := metav1.Condition{Type: pitstopv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: pitstopv1alpha1.ReasonRunning, Message: "the engine runs this generation", ObservedGeneration: p.Generation}
	if err != nil {
		valid = metav1.Condition{Type: pitstopv1alpha1.ConditionValid, Status: metav1.ConditionFalse, Reason: pitstopv1alpha1.ReasonInvalid, Message: err.Error(), ObservedGeneration: p.Generation}
		ready = metav1.Condition{Type: pitstopv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: pitstopv1alpha1.ReasonNotRunning, Message: "no valid generation has run yet", ObservedGeneration: p.Generation}
		if running != nil {
			ready = metav1.Condition{Type: pitstopv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: pitstopv1alpha1.ReasonRunningPreviousGeneration,
				Message: "the engine keeps running generation " + strconv.FormatInt(running.Spec.Generation, 10) + ", the last valid one", ObservedGeneration: p.Generation}
		}
	}
	meta.SetStatusCondition(&p.Status.Conditions, valid)
	meta.SetStatusCondition(&p.Status.Conditions, ready)

	nodes, err := s.nodes(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	counts := map[pitstopv1alpha1.MaintenanceState]int32{
		pitstopv1alpha1.StateOperational: 0, pitstopv1alpha1.StateMaintenanceRequired: 0, pitstopv1alpha1.StateInMaintenance: 0,
	}
	var last time.Time
	for _, node := range nodes {
		rec, err := s.records.Read(node)
		if err != nil {
			continue
		}
		if pr, ok := rec.Profiles[p.Name]; ok {
			counts[pr.Current]++
			if pr.Since.After(last) && pr.Current != pr.Previous {
				last = pr.Since.Time
			}
		}
	}
	p.Status.Nodes = counts
	if !last.IsZero() {
		p.Status.LastTransitionTime = &metav1.Time{Time: last}
	}
	p.Status.ObservedGeneration = p.Generation
	if equality.Semantic.DeepEqual(before.Status, p.Status) {
		return ctrl.Result{}, nil
	}
	if wait := s.countsWait(before, p); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	if err := s.patchStatus(ctx, before, p); err != nil {
		if apierrors.IsConflict(err) {
			return ctrl.Result{RequeueAfter: conflictRequeue}, nil
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.written[p.Name] = s.clock.Now()
	return ctrl.Result{}, nil
}

// conflictRequeue is how soon a status write that lost to another writer
// is made again, from the cache by then holding the other write.
const conflictRequeue = 100 * time.Millisecond

// patchStatus writes the profile's status as after, from before as it was
// read. The patch replaces the whole conditions list (a JSON merge patch
// has no other way with a list), so it carries an optimistic lock: the
// profile holds conditions of other writers too (SeedConfigCurrent, which
// the seed file applies), and a list read from a cache that has not seen
// one yet would drop it. A conflict is read again and written then.
func (s *statusReconciler) patchStatus(ctx context.Context, before, after *pitstopv1alpha1.MaintenanceProfile) error {
	return s.client.Status().Patch(ctx, after, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
}

// releaseRecheck paces the status of a deleted profile while its nodes
// leave it.
const releaseRecheck = 2 * time.Second

// release lets a deleted profile go once no node is out of operational for
// it and none of the NodeMaintenances it made is left; until then its
// Ready condition names the nodes still leaving it.
func (s *statusReconciler) release(ctx context.Context, p *pitstopv1alpha1.MaintenanceProfile) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(p, pitstopv1alpha1.FinalizerMaintenanceProfile) {
		return ctrl.Result{}, nil
	}
	leaving, err := s.leaving(ctx, p.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(leaving) == 0 {
		released := p.DeepCopy()
		controllerutil.RemoveFinalizer(released, pitstopv1alpha1.FinalizerMaintenanceProfile)
		return ctrl.Result{}, client.IgnoreNotFound(s.client.Patch(ctx, released, client.MergeFromWithOptions(p, client.MergeFromWithOptimisticLock{})))
	}
	before := p.DeepCopy()
	shown := leaving
	if len(shown) > 10 {
		shown = append(shown[:10:10], fmt.Sprintf("and %d more", len(leaving)-10))
	}
	meta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{Type: pitstopv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: pitstopv1alpha1.ReasonReleasing,
		Message: fmt.Sprintf("deleted: %d nodes are leaving the profile (their drains undone, their slots given back): %s", len(leaving), strings.Join(shown, ", ")), ObservedGeneration: p.Generation})
	if !equality.Semantic.DeepEqual(before.Status, p.Status) {
		if err := s.patchStatus(ctx, before, p); err != nil && !apierrors.IsConflict(err) {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	return ctrl.Result{RequeueAfter: releaseRecheck}, nil
}

// leaving names the nodes that have yet to leave the profile: out of
// operational for it, or with a NodeMaintenance it made.
func (s *statusReconciler) leaving(ctx context.Context, profile string) ([]string, error) {
	nodes, err := s.nodes(ctx)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, node := range nodes {
		rec, err := s.records.Read(node)
		if err != nil {
			continue
		}
		if pr, ok := rec.Profiles[profile]; ok && pr.Current != pitstopv1alpha1.StateOperational {
			seen[node.Name] = true
		}
	}
	list := &pitstopv1alpha1.NodeMaintenanceList{}
	if err := s.client.List(ctx, list, client.MatchingLabels{pitstopv1alpha1.LabelProfile: profile}); err != nil {
		return nil, err
	}
	for _, nm := range list.Items {
		seen[nm.Spec.NodeName] = true
	}
	return slices.Sorted(maps.Keys(seen)), nil
}

// countsWait says how long a status change that only moves the counts
// waits for statusCountsInterval since the profile's last write; 0 when it
// may be written now.
func (s *statusReconciler) countsWait(before, after *pitstopv1alpha1.MaintenanceProfile) time.Duration {
	if !equality.Semantic.DeepEqual(before.Status.Conditions, after.Status.Conditions) ||
		before.Status.ObservedGeneration != after.Status.ObservedGeneration {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	last, ok := s.written[after.Name]
	if !ok {
		return 0
	}
	return max(last.Add(statusCountsInterval).Sub(s.clock.Now()), 0)
}
