package medik8s

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

// Reconciler keeps one pitstop NodeMaintenance per medik8s NodeMaintenance
// of one kind and reports it in the medik8s object's status.
type Reconciler struct {
	kind kind
	// client reads medik8s objects from the API server (controller-runtime
	// does not cache unstructured reads) and pitstop's from the cache.
	client client.Client
	// apiReader is uncached, for the one decision that must not act on a
	// stale view: whether pitstop's object is gone.
	apiReader client.Reader
	// leases are the nodes' medik8s Leases.
	leases   leases
	recorder events.EventRecorder
	clock    clock.PassiveClock
}

// foreignRequeue is how often a medik8s NodeMaintenance whose pitstop name
// is taken by an object it does not own looks again: no watch reports that
// object going away.
const foreignRequeue = time.Minute

// Reconcile takes one medik8s NodeMaintenance one step closer to having a
// pitstop NodeMaintenance that matches it, or, when it is being deleted, to
// that one being gone. Status is written once, at the end.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := r.kind.newObject()
	if err := r.client.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, r.deleteOrphan(ctx, req.NamespacedName)
		}
		return ctrl.Result{}, err
	}
	s, specErr := r.kind.specOf(obj)
	if !obj.GetDeletionTimestamp().IsZero() {
		return r.reconcileDelete(ctx, obj, s) // needs the spec for messages only
	}
	if specErr != nil {
		return ctrl.Result{}, reconcile.TerminalError(specErr)
	}
	if !controllerutil.ContainsFinalizer(obj, Finalizer) {
		return r.addFinalizer(ctx, obj, s)
	}
	if err := r.setNodeOwner(ctx, obj, s.NodeName); err != nil {
		if apierrors.IsConflict(err) {
			return ctrl.Result{RequeueAfter: conflictRequeue}, nil
		}
		return ctrl.Result{}, err
	}

	before, err := statusOf(obj)
	if err != nil {
		return ctrl.Result{}, reconcile.TerminalError(err)
	}
	if settled(obj, before) {
		return ctrl.Result{}, nil // Failed is final until the spec changes
	}
	after, result, err := r.reconcileLeaseAndMaintenance(ctx, obj, s, before)
	after = stamp(before, after, r.clock.Now())
	if patchErr := r.patchStatus(ctx, obj, before, after); patchErr != nil {
		err = errors.Join(err, patchErr)
	} else {
		r.eventPhase(obj, s, before, after)
		if after.Phase == phaseFailed {
			if ferr := r.settle(ctx, obj, s); ferr != nil {
				err = errors.Join(err, ferr)
			} else if lostLease(after) {
				r.announceUncordon(ctx, obj, s) // the node was restored before the object failed
			}
		}
	}
	if apierrors.IsConflict(err) {
		return ctrl.Result{RequeueAfter: conflictRequeue}, nil // someone else wrote first; look again
	}
	return result, err
}

// annotationFailedGeneration records on a medik8s NodeMaintenance the
// generation of its spec that failed. As with the medik8s operator, a
// failed maintenance stays failed: pitstop does nothing more for it until
// the spec changes (a new generation) or it is deleted, so a maintenance
// that failed never runs later on its own.
const annotationFailedGeneration = "pitstop.dev/failed-generation"

// settled says obj failed in its current generation.
func settled(obj *unstructured.Unstructured, st status) bool {
	return st.Phase == phaseFailed && obj.GetAnnotations()[annotationFailedGeneration] == strconv.FormatInt(obj.GetGeneration(), 10)
}

// retried says obj failed in an earlier generation and its spec has
// changed since: a new try, which counts its own errors on the Lease.
func retried(obj *unstructured.Unstructured, st status) bool {
	g, ok := obj.GetAnnotations()[annotationFailedGeneration]
	return st.Phase == phaseFailed && ok && g != strconv.FormatInt(obj.GetGeneration(), 10)
}

// settle makes a failure final: pitstop's NodeMaintenance goes (its
// finalizer restores anything done to the node), the node's Lease is given
// up, and the failed generation is recorded.
func (r *Reconciler) settle(ctx context.Context, obj *unstructured.Unstructured, s spec) error {
	nm := &pitstopv1alpha1.NodeMaintenance{}
	switch err := r.apiReader.Get(ctx, types.NamespacedName{Name: r.kind.maintenanceName(client.ObjectKeyFromObject(obj))}, nm); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return err
	case r.kind.owns(nm, obj) && nm.DeletionTimestamp.IsZero():
		if err := r.client.Delete(ctx, nm, client.Preconditions{UID: &nm.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting NodeMaintenance %s of a failed maintenance: %w", nm.Name, err)
		}
	}
	if s.NodeName != "" {
		if err := r.leases.invalidate(ctx, s.NodeName); err != nil {
			return fmt.Errorf("giving up the Lease %s: %w", r.leases.describe(s.NodeName), err)
		}
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, annotationFailedGeneration, strconv.FormatInt(obj.GetGeneration(), 10))
	return client.IgnoreNotFound(r.client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)))
}

// addFinalizer makes sure the node is restored before the object goes away.
// Adding it is the first write; the update triggers the next reconcile.
func (r *Reconciler) addFinalizer(ctx context.Context, obj *unstructured.Unstructured, s spec) (ctrl.Result, error) {
	controllerutil.AddFinalizer(obj, Finalizer)
	if err := r.client.Update(ctx, obj); err != nil {
		if apierrors.IsConflict(err) {
			return ctrl.Result{RequeueAfter: conflictRequeue}, nil
		}
		return ctrl.Result{}, fmt.Errorf("adding finalizer %s to %s: %w", Finalizer, r.kind.describe(obj), err)
	}
	r.eventBegin(obj, s)
	return ctrl.Result{}, nil
}

// reconcileLeaseAndMaintenance holds the node's medik8s Lease, and then
// keeps pitstop's NodeMaintenance. A maintenance whose node's Lease another
// medik8s component holds (a remediation under way) does not start: its
// status says what it waits for, and it is looked at again until the Lease
// is free. Once started, the Lease is renewed every leaseRenewEvery.
//
// Failed attempts at the Lease are counted in errorOnLeaseCount
// (leaseErrors); past maxLeaseErrors the maintenance fails
// (failOnLostLease).
func (r *Reconciler) reconcileLeaseAndMaintenance(ctx context.Context, obj *unstructured.Unstructured, s spec, prev status) (status, ctrl.Result, error) {
	if retried(obj, prev) || prev.ErrorOnLeaseCount < 0 {
		prev.ErrorOnLeaseCount = 0
	}
	node := &corev1.Node{}
	switch err := r.client.Get(ctx, types.NamespacedName{Name: s.NodeName}, node); {
	case apierrors.IsNotFound(err):
		after, result, err := r.reconcileMaintenance(ctx, obj, s, prev) // refused there, naming the node
		after.ErrorOnLeaseCount = prev.ErrorOnLeaseCount
		return after, result, err
	case err != nil:
		return erred(prev, err), ctrl.Result{}, err
	}
	if lostLease(prev) {
		return r.failOnLostLease(ctx, obj, s, prev)
	}
	err := r.leases.request(ctx, node, r.clock.Now())
	var held *heldError
	isHeld := errors.As(err, &held)
	started := isHeld && r.started(ctx, obj)
	prev.ErrorOnLeaseCount = leaseErrors(prev.ErrorOnLeaseCount, err, started)
	switch {
	case isHeld && !started:
		msg := fmt.Sprintf("waiting for %s (another medik8s component acts on node %s); the maintenance starts once it is released or expires", held, s.NodeName)
		if prev.LastError != msg {
			r.recorder.Eventf(obj, nil, corev1.EventTypeWarning, EventLeaseHeld, "Wait", "%s", msg)
		}
		w := prev
		if w.Phase == "" || w.Phase == phaseFailed {
			w.Phase = phaseRunning
		}
		w.LastError = msg
		return w, ctrl.Result{RequeueAfter: leaseHeldRetry}, nil
	case isHeld:
		// Under way already: it goes on for now, and says the Lease was
		// taken.
		after, result, err := r.reconcileMaintenance(ctx, obj, s, prev)
		after.ErrorOnLeaseCount = prev.ErrorOnLeaseCount
		after.LastError = fmt.Sprintf("the maintenance goes on, but %s (failed attempt %d at the Lease; the maintenance fails after %d)", held, prev.ErrorOnLeaseCount, maxLeaseErrors+1)
		return after, shortestResult(result, ctrl.Result{RequeueAfter: leaseHeldRetry}), err
	case err != nil:
		err = fmt.Errorf("taking the Lease %s: %w", r.leases.describe(s.NodeName), err)
		return erred(prev, err), ctrl.Result{}, err
	}
	after, result, err := r.reconcileMaintenance(ctx, obj, s, prev)
	after.ErrorOnLeaseCount = 0 // a Lease held resets the count
	if after.Phase == phaseFailed {
		return after, result, err // settled by the caller
	}
	return after, shortestResult(result, ctrl.Result{RequeueAfter: leaseRenewEvery}), err
}

// started says pitstop's NodeMaintenance for obj exists.
func (r *Reconciler) started(ctx context.Context, obj *unstructured.Unstructured) bool {
	name := r.kind.maintenanceName(client.ObjectKeyFromObject(obj))
	return r.client.Get(ctx, types.NamespacedName{Name: name}, &pitstopv1alpha1.NodeMaintenance{}) == nil
}

// shortestResult is the sooner of two results' requeues.
func shortestResult(a, b ctrl.Result) ctrl.Result {
	if a.RequeueAfter == 0 || (b.RequeueAfter != 0 && b.RequeueAfter < a.RequeueAfter) {
		a.RequeueAfter = b.RequeueAfter
	}
	return a
}

// reconcileMaintenance makes sure pitstop's NodeMaintenance for obj exists
// and matches it, and returns the status that reports it.
func (r *Reconciler) reconcileMaintenance(ctx context.Context, obj *unstructured.Unstructured, s spec, prev status) (status, ctrl.Result, error) {
	nm := &pitstopv1alpha1.NodeMaintenance{}
	name := r.kind.maintenanceName(client.ObjectKeyFromObject(obj))
	switch err := r.client.Get(ctx, types.NamespacedName{Name: name}, nm); {
	case apierrors.IsNotFound(err):
		return r.createMaintenance(ctx, obj, s, prev)
	case err != nil:
		err = fmt.Errorf("reading NodeMaintenance %s: %w", name, err)
		return erred(prev, err), ctrl.Result{}, err
	}
	if !r.kind.owns(nm, obj) {
		w := prev
		if w.Phase == "" {
			w.Phase = phaseRunning
		}
		w.LastError = fmt.Sprintf("waiting for pitstop NodeMaintenance %s, which does not belong to this object, to be deleted; the maintenance starts then", name)
		return w, ctrl.Result{RequeueAfter: foreignRequeue}, nil
	}
	if nm.Spec.NodeName != s.NodeName {
		// medik8s' webhook refuses this change; pitstop's CRD refuses it on
		// its own object, so the maintenance cannot follow.
		msg := fmt.Sprintf("spec.nodeName changed from %s to %s: a maintenance cannot move to another node; delete this NodeMaintenance and create a new one", nm.Spec.NodeName, s.NodeName)
		return failed(mirror(nm), msg), ctrl.Result{}, nil
	}
	if nm.Spec.Reason != s.Reason {
		before := nm.DeepCopy()
		nm.Spec.Reason = s.Reason
		if err := r.client.Patch(ctx, nm, client.MergeFrom(before)); err != nil {
			return writeFailure(mirror(before), err, "updating spec.reason of NodeMaintenance "+name)
		}
	}
	return mirror(nm), ctrl.Result{}, nil
}

// createMaintenance creates pitstop's NodeMaintenance for obj. A refusal
// (the node does not exist, it is already in maintenance, quorum, an invalid
// field) fails the medik8s object with the refusal as lastError, as medik8s
// fails one for a missing node, and is not retried until the object changes.
func (r *Reconciler) createMaintenance(ctx context.Context, obj *unstructured.Unstructured, s spec, prev status) (status, ctrl.Result, error) {
	nm := r.kind.newMaintenance(obj, s)
	err := r.client.Create(ctx, nm)
	switch {
	case err == nil:
		ctrl.LoggerFrom(ctx).Info("created NodeMaintenance", "nodeMaintenance", klog.KObj(nm), "node", s.NodeName)
		return mirror(nm), ctrl.Result{}, nil
	case apierrors.IsAlreadyExists(err):
		return prev, ctrl.Result{RequeueAfter: conflictRequeue}, nil // the cache has not seen it yet
	}
	return writeFailure(prev, err, "creating NodeMaintenance "+nm.Name)
}

// writeFailure reports a write to pitstop's NodeMaintenance that did not
// happen: a refusal fails the maintenance for good, anything else is
// retried with backoff. lastError is the API server's own message.
func writeFailure(prev status, err error, action string) (status, ctrl.Result, error) {
	wrapped := fmt.Errorf("%s: %w", action, err)
	if isRefusal(err) {
		return failed(prev, err.Error()), ctrl.Result{}, reconcile.TerminalError(wrapped)
	}
	return erred(prev, err), ctrl.Result{}, wrapped
}

// reconcileDelete deletes pitstop's NodeMaintenance, waits until its own
// finalizer has restored the node and it is gone, and only then lets obj
// go. Whether it is gone is read from the API server: a cache that has not
// seen it yet would let the finalizer go while the node is still cordoned.
func (r *Reconciler) reconcileDelete(ctx context.Context, obj *unstructured.Unstructured, s spec) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(obj, Finalizer) {
		return ctrl.Result{}, nil
	}
	nm := &pitstopv1alpha1.NodeMaintenance{}
	name := r.kind.maintenanceName(client.ObjectKeyFromObject(obj))
	switch err := r.apiReader.Get(ctx, types.NamespacedName{Name: name}, nm); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("reading NodeMaintenance %s: %w", name, err)
	case r.kind.owns(nm, obj):
		if nm.DeletionTimestamp.IsZero() {
			err := r.client.Delete(ctx, nm, client.Preconditions{UID: &nm.UID})
			if apierrors.IsConflict(err) {
				return ctrl.Result{RequeueAfter: conflictRequeue}, nil
			}
			if client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, fmt.Errorf("deleting NodeMaintenance %s: %w", name, err)
			}
		}
		return ctrl.Result{RequeueAfter: awaitRequeue}, nil // its deletion wakes us sooner
	}
	// The node is restored: the Lease goes.
	if err := r.leases.invalidate(ctx, s.NodeName); err != nil {
		return ctrl.Result{}, fmt.Errorf("giving up the Lease %s: %w", r.leases.describe(s.NodeName), err)
	}
	controllerutil.RemoveFinalizer(obj, Finalizer)
	if err := r.client.Update(ctx, obj); err != nil {
		switch {
		case apierrors.IsNotFound(err):
			return ctrl.Result{}, nil
		case apierrors.IsConflict(err):
			return ctrl.Result{RequeueAfter: conflictRequeue}, nil
		}
		return ctrl.Result{}, fmt.Errorf("removing finalizer %s from %s: %w", Finalizer, r.kind.describe(obj), err)
	}
	if st, err := statusOf(obj); err != nil || !settled(obj, st) {
		r.announceUncordon(ctx, obj, s) // a settled failure restored the node, and said so, then
	}
	r.eventRemoved(obj, s)
	return ctrl.Result{}, nil
}

// announceUncordon emits UncordonNode on obj's node once its maintenance
// has ended, when the node is schedulable: a node someone else had
// cordoned before the maintenance stays cordoned, and a missing one gets
// no Event. The node is read from the API server, since the cache may not
// have seen its restore yet. The Event is a report, not a step: when the
// node cannot be read, there is none.
func (r *Reconciler) announceUncordon(ctx context.Context, obj *unstructured.Unstructured, s spec) {
	if s.NodeName == "" {
		return
	}
	node := &corev1.Node{}
	if err := r.apiReader.Get(ctx, types.NamespacedName{Name: s.NodeName}, node); err != nil {
		ctrl.LoggerFrom(ctx).V(1).Info("not reporting the node uncordoned: it cannot be read", "node", s.NodeName, "error", err.Error())
		return
	}
	if !node.Spec.Unschedulable {
		r.eventUncordon(obj, node)
	}
}

// deleteOrphan deletes pitstop's NodeMaintenance for an object of the
// namespaced kind that is gone without its finalizer having run (someone
// removed it): for the other kind the garbage collector does.
func (r *Reconciler) deleteOrphan(ctx context.Context, key types.NamespacedName) error {
	if !r.kind.namespaced {
		return nil
	}
	nm := &pitstopv1alpha1.NodeMaintenance{}
	if err := r.apiReader.Get(ctx, types.NamespacedName{Name: r.kind.maintenanceName(key)}, nm); err != nil {
		return client.IgnoreNotFound(err)
	}
	if owner, ok := r.kind.ownerKey(nm); !ok || owner != key || !nm.DeletionTimestamp.IsZero() {
		return nil
	}
	ctrl.LoggerFrom(ctx).Info("deleting NodeMaintenance whose owner is gone", "nodeMaintenance", klog.KObj(nm))
	return client.IgnoreNotFound(r.client.Delete(ctx, nm, client.Preconditions{UID: &nm.UID}))
}

// patchStatus writes status once, only when it changed, with optimistic
// locking so a stale reconcile cannot overwrite a newer one.
func (r *Reconciler) patchStatus(ctx context.Context, obj *unstructured.Unstructured, before, after status) error {
	if equality.Semantic.DeepEqual(before, after) {
		return nil
	}
	base := obj.DeepCopy()
	if err := setStatus(obj, after); err != nil {
		return err
	}
	return r.client.Status().Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}
