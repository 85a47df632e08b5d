package machine

import (
	"context"
	"errors"
	"fmt"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/pitstop-dev/pitstop/internal/budget"
	"github.com/pitstop-dev/pitstop/internal/machineapi/provider"
)

// Keys this controller writes.
const (
	// Finalizer holds a Machine until its instance and Node are gone; the
	// Machine API's own name, so Machines made by another Machine API
	// controller keep working after the switch.
	Finalizer = machinev1beta1.MachineFinalizer
	// SourceMachine is the pitstop.dev/source label of the drains of Machines.
	SourceMachine = "machine.openshift.io"
)

// Reconciler runs Machines through their providers.
type Reconciler struct {
	client    client.Client
	reader    client.Reader // the API server, for what a cache must not answer
	providers provider.Registry
	slots     *budget.Slots
	recorder  events.EventRecorder
	clock     clock.PassiveClock
	opts      Options
}

// Reconcile brings one Machine a step closer to what it asks for: an
// instance while it exists, none and no Node once it is deleted.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	m := &machinev1beta1.Machine{}
	if err := r.client.Get(ctx, req.NamespacedName, m); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	orig := m.DeepCopy()
	now := metav1.NewTime(r.clock.Now())
	if m.DeletionTimestamp.IsZero() && !controllerutil.ContainsFinalizer(m, Finalizer) {
		// The finalizer is on before an instance can exist, so that no
		// instance outlives its Machine.
		controllerutil.AddFinalizer(m, Finalizer)
		return ctrl.Result{}, r.patchMeta(ctx, orig, m)
	}
	var result ctrl.Result
	var err error
	if m.DeletionTimestamp.IsZero() {
		result, err = r.reconcileInstance(ctx, m, now)
	} else {
		result, err = r.reconcileDelete(ctx, m, now)
	}
	if perr := r.patch(ctx, orig, m); perr != nil {
		if apierrors.IsConflict(perr) {
			return ctrl.Result{Requeue: true}, nil
		}
		return ctrl.Result{}, errors.Join(err, perr)
	}
	return result, err
}

// patch writes what the reconcile changed: the metadata and spec first
// (spec.providerID is what keeps a Machine from getting a second
// instance, so it must be stored before the phase says Provisioned), then
// the status. A finalizer being removed goes last, after the status, since
// the Machine may be gone once it is. The metadata patch carries an
// optimistic lock: finalizers and labels are lists and maps other
// controllers write too.
func (r *Reconciler) patch(ctx context.Context, orig, m *machinev1beta1.Machine) error {
	releasing := controllerutil.ContainsFinalizer(orig, Finalizer) && !controllerutil.ContainsFinalizer(m, Finalizer)
	if !releasing {
		if err := r.patchMeta(ctx, orig, m); err != nil {
			return err
		}
	}
	if !equality.Semantic.DeepEqual(orig.Status, m.Status) {
		if err := r.client.Status().Patch(ctx, m.DeepCopy(), client.MergeFrom(orig)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("patching the status of machine %s/%s: %w", m.Namespace, m.Name, err)
		}
	}
	if releasing {
		return r.patchMeta(ctx, orig, m)
	}
	return nil
}

func (r *Reconciler) patchMeta(ctx context.Context, orig, m *machinev1beta1.Machine) error {
	if equality.Semantic.DeepEqual(orig.ObjectMeta, m.ObjectMeta) && equality.Semantic.DeepEqual(orig.Spec, m.Spec) {
		return nil
	}
	err := r.client.Patch(ctx, m.DeepCopy(), client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("patching machine %s/%s: %w", m.Namespace, m.Name, err)
	}
	return nil
}

// setPhase moves the Machine to phase, stamping status.lastUpdated when it
// changes (a health check's node startup timeout counts from there).
func setPhase(m *machinev1beta1.Machine, phase string, now metav1.Time) {
	if ptr.Deref(m.Status.Phase, "") == phase {
		return
	}
	m.Status.Phase = ptr.To(phase)
	m.Status.LastUpdated = &now
}

// fail moves the Machine to Failed for good: a configuration its provider
// cannot run, or an instance that vanished.
func (r *Reconciler) fail(m *machinev1beta1.Machine, reason machinev1beta1.MachineStatusError, err error, now metav1.Time) {
	setPhase(m, machinev1beta1.PhaseFailed, now)
	m.Status.ErrorReason = ptr.To(reason)
	m.Status.ErrorMessage = ptr.To(err.Error())
	r.eventFailed(m, reason, err)
}
