package machinemaintenance

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

// A surge's object is held by FinalizerSurge from before the set grows
// until its action is over: a delete mid-surge runs the undo first. From
// the same write on it is no longer owned by the old Machine, whose
// deletion (a health check, the cloud, a user) must not take the record,
// and the knowledge of the set's extra replica, along.

// holdForSurge adds FinalizerSurge and drops the Machine's owner
// reference, in one write, before the set grows.
func (r *Reconciler) holdForSurge(ctx context.Context, mm *pitstopv1alpha1.MachineMaintenance) error {
	if len(mm.OwnerReferences) == 0 && controllerutil.ContainsFinalizer(mm, pitstopv1alpha1.FinalizerSurge) {
		return nil
	}
	// With the resourceVersion read: the finalizers are written whole.
	patch := client.MergeFromWithOptions(mm.DeepCopy(), client.MergeFromWithOptimisticLock{})
	status := mm.Status
	mm.OwnerReferences = nil
	controllerutil.AddFinalizer(mm, pitstopv1alpha1.FinalizerSurge)
	if err := r.client.Patch(ctx, mm, patch); err != nil {
		return fmt.Errorf("holding MachineMaintenance %s/%s for its surge: %w", mm.Namespace, mm.Name, err)
	}
	mm.Status = status // the patch answers with the stored status
	return nil
}

// letGo removes FinalizerSurge, once the action is over (and with it
// the surge's record on the set).
func (r *Reconciler) letGo(ctx context.Context, mm *pitstopv1alpha1.MachineMaintenance) error {
	if !controllerutil.ContainsFinalizer(mm, pitstopv1alpha1.FinalizerSurge) {
		return nil
	}
	patch := client.MergeFromWithOptions(mm.DeepCopy(), client.MergeFromWithOptimisticLock{})
	status := mm.Status
	controllerutil.RemoveFinalizer(mm, pitstopv1alpha1.FinalizerSurge)
	if err := r.client.Patch(ctx, mm, patch); err != nil {
		return client.IgnoreNotFound(err)
	}
	mm.Status = status
	return nil
}

// release lets a deleted object go once its surge, if one is under way,
// is undone, and takes its event off its node. Only FinalizerSurge holds
// an object: it is on from before a surge's scale-up to the action's end.
func (r *Reconciler) release(ctx context.Context, mm *pitstopv1alpha1.MachineMaintenance, all []pitstopv1alpha1.MachineMaintenance, now time.Time) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(mm, pitstopv1alpha1.FinalizerSurge) {
		return ctrl.Result{}, nil
	}
	fresh := &pitstopv1alpha1.MachineMaintenance{}
	if err := r.reader.Get(ctx, client.ObjectKeyFromObject(mm), fresh); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	mm = fresh
	if busy(mm) {
		wait, err := r.act(ctx, mm, all, now)
		if apierrors.IsConflict(err) {
			return ctrl.Result{RequeueAfter: time.Second}, nil
		}
		if err != nil {
			return ctrl.Result{}, err
		}
		if busy(mm) {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
	}
	if err := r.letGo(ctx, mm); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, r.signal(ctx, mm.Spec.NodeName, all, mm)
}
