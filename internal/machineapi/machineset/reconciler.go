package machineset

import (
	"context"
	"errors"
	"fmt"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Reconciler keeps each MachineSet's Machines at spec.replicas and reports
// them in its status.
type Reconciler struct {
	// client reads from the manager's cache and writes to the API server.
	client client.Client
	// apiReader is uncached, for the one check that must not act on a
	// stale view: that a set about to adopt Machines is not being deleted.
	apiReader    client.Reader
	recorder     events.EventRecorder
	clock        clock.PassiveClock
	expectations *expectations
}

// errStale says that the cache is behind the API server: the reconcile
// looks again soon instead of failing.
var errStale = errors.New("the cache is behind the API server")

// conflictRequeue is how soon a reconcile that lost a write race looks
// again.
const conflictRequeue = time.Second

// Reconcile takes one MachineSet one step closer to spec.replicas Machines:
// validate the spec, claim Machines, count them, then create or delete the
// difference unless the cache has not caught up with the last step yet.
// Status is written once, at the end.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, err error) {
	ms := &machinev1beta1.MachineSet{}
	if err := r.client.Get(ctx, req.NamespacedName, ms); err != nil {
		if apierrors.IsNotFound(err) {
			r.expectations.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !ms.DeletionTimestamp.IsZero() {
		// The garbage collector deletes its Machines through their owner
		// references; creating or adopting more would fight it.
		return ctrl.Result{}, nil
	}
	base := ms.DeepCopy()
	defer func() { result, err = r.finish(ctx, base, ms, result, err) }()

	// Whether the cache shows the set's last creations and deletions is
	// asked before its Machines are listed: asked after, the last expected
	// event could arrive between the two, and the set would count from a
	// list that misses it and create or delete a Machine twice.
	synced := r.expectations.satisfied(req.NamespacedName)
	selector, invalid := validate(ms)
	if invalid != nil {
		// Retrying cannot fix the spec; its next change wakes the set.
		ms.Status = invalidStatus(ms, invalid)
		return ctrl.Result{}, nil
	}
	owned, err := r.claimMachines(ctx, ms, selector)
	if err != nil {
		return ctrl.Result{}, err
	}
	nodes, err := r.nodesOf(ctx, owned)
	if err != nil {
		return ctrl.Result{}, err
	}
	var availableIn time.Duration
	ms.Status, availableIn = replicaStatus(ms, owned, nodes, r.clock.Now())
	result, err = r.reconcileReplicas(ctx, ms, selector, owned, synced)
	return earliest(result, ctrl.Result{RequeueAfter: availableIn}), err
}

// finish writes the status and turns a lost write race into a requeue.
func (r *Reconciler) finish(ctx context.Context, base, ms *machinev1beta1.MachineSet, result ctrl.Result, err error) (ctrl.Result, error) {
	written, patchErr := r.patchStatus(ctx, base, ms)
	if patchErr != nil {
		patchErr = fmt.Errorf("patching status of MachineSet %s: %w", klog.KObj(ms), patchErr)
	} else if written {
		r.eventInvalid(ms, base.Status, ms.Status)
	}
	switch {
	case !isRace(err) || !isRace(patchErr):
		return result, errors.Join(err, patchErr)
	case err != nil || patchErr != nil:
		return earliest(result, ctrl.Result{RequeueAfter: conflictRequeue}), nil
	}
	return result, nil
}

// isRace says whether err (nil included) only means that the reconcile
// worked from a view that has since changed: someone else wrote first, an
// object went away, or the cache lags. Looking again soon fixes it.
func isRace(err error) bool {
	return err == nil || apierrors.IsConflict(err) || apierrors.IsNotFound(err) || errors.Is(err, errStale)
}

// reconcileReplicas creates or deletes the difference between the set's
// Machines and spec.replicas, unless the cache does not show its last
// creations and deletions yet: counting then would count wrong. The
// Machines' watch events wake the set as the cache catches up; the wait
// is a safety net for events that never come.
func (r *Reconciler) reconcileReplicas(ctx context.Context, ms *machinev1beta1.MachineSet, selector labels.Selector, owned []*machinev1beta1.Machine, synced syncState) (ctrl.Result, error) {
	if !synced.ok {
		ctrl.LoggerFrom(ctx).V(1).Info("waiting for the cache to show the last changes to machines")
		return ctrl.Result{RequeueAfter: synced.wait}, nil
	}
	switch diff := len(owned) - replicasOf(ms); {
	case diff < 0:
		return ctrl.Result{}, r.createMachines(ctx, ms, -diff)
	case diff > 0:
		return r.scaleDown(ctx, ms, selector)
	}
	return ctrl.Result{}, nil
}

// scaleDown deletes the Machines a set has too many, counted and picked
// from the API server rather than the cache. Whoever shrinks a set to
// remove one Machine marks it first, then lowers spec.replicas; the two
// writes reach the cache through different watches, and the set's new
// size can arrive before the mark. Picked from the cache, the set would
// then remove a Machine nobody chose: a node in service, while the
// marked one stays.
func (r *Reconciler) scaleDown(ctx context.Context, ms *machinev1beta1.MachineSet, selector labels.Selector) (ctrl.Result, error) {
	fresh, err := r.reread(ctx, ms, "removing machines")
	if err != nil {
		return ctrl.Result{}, err
	}
	list := &machinev1beta1.MachineList{}
	if err := r.apiReader.List(ctx, list, client.InNamespace(ms.Namespace)); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing machines of MachineSet %s before removing some: %w", klog.KObj(ms), err)
	}
	c := claim(fresh, selector, list.Items)
	// Orphans it is about to adopt count, as they do in the cached count.
	machines := append(c.Owned, c.Adopt...)
	diff := len(machines) - replicasOf(fresh)
	if diff <= 0 {
		// The cache was behind: the watch events that wake the set again
		// bring it up to date.
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, r.deleteMachines(ctx, ms, machinesToDelete(machines, diff, fresh.Spec.DeletePolicy))
}

// createMachines creates n Machines from the set's template, one after the
// other, and stops at the first failure: the API server refusing one
// (quota, an invalid template) will refuse the rest.
func (r *Reconciler) createMachines(ctx context.Context, ms *machinev1beta1.MachineSet, n int) error {
	key := client.ObjectKeyFromObject(ms)
	r.expectations.expectCreations(key, n)
	for i := range n {
		m := newMachine(ms)
		if err := r.client.Create(ctx, m); err != nil {
			for range n - i {
				r.expectations.creationObserved(key) // will not happen
			}
			r.eventCreateFailed(ms, err)
			return fmt.Errorf("creating machine %d of %d for MachineSet %s: %w", i+1, n, klog.KObj(ms), err)
		}
		ctrl.LoggerFrom(ctx).Info("created machine", "machine", klog.KObj(m))
		r.eventCreated(ms, m)
	}
	return nil
}

// deleteMachines deletes the Machines picked for deletion, skipping those
// already being deleted. The Machine controller drains their Nodes and
// removes their instances before they go.
func (r *Reconciler) deleteMachines(ctx context.Context, ms *machinev1beta1.MachineSet, picked []*machinev1beta1.Machine) error {
	key := client.ObjectKeyFromObject(ms)
	var doomed []*machinev1beta1.Machine
	for _, m := range picked {
		if m.DeletionTimestamp.IsZero() {
			doomed = append(doomed, m)
			r.expectations.expectDeletions(key, m.UID)
		}
	}
	for i, m := range doomed {
		err := r.client.Delete(ctx, m, client.Preconditions{UID: &m.UID})
		switch {
		case apierrors.IsNotFound(err):
			r.expectations.deletionObserved(key, m.UID) // gone already
		case err != nil:
			for _, rest := range doomed[i:] {
				r.expectations.deletionObserved(key, rest.UID) // will not happen
			}
			r.eventDeleteFailed(ms, m, err)
			return fmt.Errorf("deleting machine %s of MachineSet %s: %w", klog.KObj(m), klog.KObj(ms), err)
		default:
			ctrl.LoggerFrom(ctx).Info("deleted machine", "machine", klog.KObj(m))
			r.eventDeleted(ms, m)
		}
	}
	return nil
}

// claimMachines returns the Machines the set owns, after adopting the
// orphans that match its selector and releasing its Machines that no
// longer do. A failed adoption fails the step: counting without the orphan
// would create a Machine too many.
func (r *Reconciler) claimMachines(ctx context.Context, ms *machinev1beta1.MachineSet, selector labels.Selector) ([]*machinev1beta1.Machine, error) {
	list := &machinev1beta1.MachineList{}
	if err := r.client.List(ctx, list, client.InNamespace(ms.Namespace)); err != nil {
		return nil, fmt.Errorf("listing machines of MachineSet %s: %w", klog.KObj(ms), err)
	}
	c := claim(ms, selector, list.Items)
	if len(c.Adopt) > 0 {
		if _, err := r.reread(ctx, ms, "adopting machines"); err != nil {
			return nil, err
		}
	}
	owned := c.Owned
	var errs []error
	for _, m := range c.Adopt {
		if err := r.setController(ctx, ms, m, true); err != nil {
			errs = append(errs, err)
			continue
		}
		owned = append(owned, m)
	}
	for _, m := range c.Release {
		errs = append(errs, r.setController(ctx, ms, m, false))
	}
	return owned, errors.Join(errs...)
}

// reread reads the set from the API server before it adopts or removes
// Machines (doing says which): a cache that has not seen its deletion
// would let it take Machines the garbage collector then deletes with it,
// and one behind its new size or its Machines' marks would remove the
// wrong ones. A set being deleted or replaced is an errStale.
func (r *Reconciler) reread(ctx context.Context, ms *machinev1beta1.MachineSet, doing string) (*machinev1beta1.MachineSet, error) {
	fresh := &machinev1beta1.MachineSet{}
	if err := r.apiReader.Get(ctx, client.ObjectKeyFromObject(ms), fresh); err != nil {
		return nil, fmt.Errorf("rereading MachineSet %s before %s: %w", klog.KObj(ms), doing, err)
	}
	if fresh.UID != ms.UID || !fresh.DeletionTimestamp.IsZero() {
		return nil, fmt.Errorf("MachineSet %s is being deleted or was replaced; not %s: %w", klog.KObj(ms), doing, errStale)
	}
	return fresh, nil
}

// setController adopts (adopt true) or releases a Machine by adding or
// removing the set's controller owner reference. The optimistic lock
// makes the write fail if the Machine changed since the cache saw it: its
// labels or owner may no longer be what the decision was based on.
func (r *Reconciler) setController(ctx context.Context, ms *machinev1beta1.MachineSet, m *machinev1beta1.Machine, adopt bool) error {
	base := m.DeepCopy()
	action, doing := "Release", "releasing"
	if adopt {
		action, doing = "Adopt", "adopting"
		m.OwnerReferences = append(m.OwnerReferences, *metav1.NewControllerRef(ms, controllerKind))
	} else {
		m.OwnerReferences = withoutOwner(m.OwnerReferences, ms.UID)
	}
	err := r.client.Patch(ctx, m, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	switch {
	case err == nil && adopt:
		r.eventAdopted(ms, m)
	case err == nil:
		r.eventReleased(ms, m)
	case apierrors.IsNotFound(err) && !adopt:
		return nil // gone: nothing to release
	case !apierrors.IsConflict(err) && !apierrors.IsNotFound(err):
		r.eventClaimFailed(ms, m, action, err)
	}
	if err != nil {
		return fmt.Errorf("%s machine %s for MachineSet %s: %w", doing, klog.KObj(m), klog.KObj(ms), err)
	}
	return nil
}

func withoutOwner(refs []metav1.OwnerReference, uid types.UID) []metav1.OwnerReference {
	var kept []metav1.OwnerReference
	for _, ref := range refs {
		if ref.UID != uid {
			kept = append(kept, ref)
		}
	}
	return kept
}

// nodesOf returns the Nodes named by the Machines' nodeRefs that exist.
func (r *Reconciler) nodesOf(ctx context.Context, machines []*machinev1beta1.Machine) (map[string]*corev1.Node, error) {
	nodes := map[string]*corev1.Node{}
	for _, m := range machines {
		if m.Status.NodeRef == nil || m.Status.NodeRef.Name == "" {
			continue
		}
		node := &corev1.Node{}
		switch err := r.client.Get(ctx, client.ObjectKey{Name: m.Status.NodeRef.Name}, node); {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("reading node %s of machine %s: %w", m.Status.NodeRef.Name, klog.KObj(m), err)
		default:
			nodes[node.Name] = node
		}
	}
	return nodes, nil
}

// earliest combines two results: the sooner requeue wins.
func earliest(a, b ctrl.Result) ctrl.Result {
	switch {
	case a.RequeueAfter == 0:
		return b
	case b.RequeueAfter == 0 || a.RequeueAfter <= b.RequeueAfter:
		return a
	}
	return b
}
