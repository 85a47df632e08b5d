package healthcheck

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/machineapi"
)

// Reconciler checks the Machines of one MachineHealthCheck, reports their
// health in its status and deletes the unhealthy ones.
type Reconciler struct {
	// client reads from the manager's cache and writes to the API server.
	client client.Client
	// apiReader is uncached, to make sure a node missing from the cache is
	// really gone before its Machine is deleted for it.
	apiReader client.Reader
	recorder  events.EventRecorder
	clock     clock.PassiveClock
}

// Reconcile checks the health check's Machines, remediates the unhealthy
// ones when it may, writes the status once and comes back when a verdict
// could next change by time alone (a condition reaching its timeout):
// every other change reaches it through a watch.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	mhc := &machinev1beta1.MachineHealthCheck{}
	if err := r.client.Get(ctx, req.NamespacedName, mhc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !mhc.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // it holds no finalizer and nothing to clean up
	}
	targets, err := r.targets(ctx, mhc)
	if err != nil {
		return ctrl.Result{}, err
	}
	now := r.clock.Now()
	a, err := assess(targets, mhc.Spec, now)
	if err != nil {
		return ctrl.Result{}, reconcile.TerminalError(fmt.Errorf("MachineHealthCheck %s: %w", klog.KObj(mhc), err))
	}
	hold := holdReason(mhc)

	before := mhc.DeepCopy()
	setStatus(&mhc.Status, a, hold, metav1.NewTime(now))
	r.reportPlannedMaintenance(mhc, a)
	remediateErr := r.remediate(ctx, mhc, a.toRemediate(hold != ""))
	if err := r.patchStatus(ctx, before, mhc); err != nil {
		if apierrors.IsConflict(err) && remediateErr == nil {
			return ctrl.Result{RequeueAfter: conflictRequeue}, nil // someone else wrote first; look again
		}
		return ctrl.Result{}, errors.Join(remediateErr, err)
	}
	if r.eventRestricted(mhc, before.Status.Conditions, mhc.Status.Conditions) {
		remediations.WithLabelValues(resultRestricted).Inc()
	}
	if remediateErr != nil {
		return ctrl.Result{}, remediateErr // retried with backoff
	}
	return ctrl.Result{RequeueAfter: a.nextCheck()}, nil
}

// targets gathers the snapshot health is judged on: the Machines the
// health check selects, except those being deleted (already on their way
// out, neither unhealthy nor to remediate), each with its node and whether
// that node is in planned maintenance.
func (r *Reconciler) targets(ctx context.Context, mhc *machinev1beta1.MachineHealthCheck) ([]target, error) {
	sel, err := metav1.LabelSelectorAsSelector(&mhc.Spec.Selector)
	if err != nil {
		return nil, reconcile.TerminalError(fmt.Errorf("spec.selector of MachineHealthCheck %s: %w", klog.KObj(mhc), err))
	}
	machines := &machinev1beta1.MachineList{}
	if err := r.client.List(ctx, machines, client.InNamespace(mhc.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, fmt.Errorf("listing Machines of MachineHealthCheck %s: %w", klog.KObj(mhc), err)
	}
	// Maintenances are few and cluster-wide; InPlannedMaintenance picks
	// each node's own.
	maintenances := &pitstopv1alpha1.NodeMaintenanceList{}
	if err := r.client.List(ctx, maintenances); err != nil {
		return nil, fmt.Errorf("listing NodeMaintenances for MachineHealthCheck %s: %w", klog.KObj(mhc), err)
	}
	var targets []target
	for i := range machines.Items {
		m := &machines.Items[i]
		if !m.DeletionTimestamp.IsZero() {
			continue
		}
		node, err := r.nodeOf(ctx, m)
		if err != nil {
			return nil, err
		}
		targets = append(targets, target{machine: m, node: node, plannedMaintenance: machineapi.InPlannedMaintenance(node, maintenances.Items)})
	}
	// The cache lists in no particular order; messages name Machines in a
	// stable one.
	slices.SortFunc(targets, func(a, b target) int { return strings.Compare(a.machine.Name, b.machine.Name) })
	return targets, nil
}

// nodeOf returns the Machine's node, or nil when it has no nodeRef or the
// node it names is gone. A node the cache has not seen is looked up on the
// API server before it is called gone: a node that has just joined would
// otherwise get its healthy Machine deleted.
func (r *Reconciler) nodeOf(ctx context.Context, m *machinev1beta1.Machine) (*corev1.Node, error) {
	name := nodeName(m)
	if name == "" {
		return nil, nil
	}
	node := &corev1.Node{}
	key := client.ObjectKey{Name: name}
	err := r.client.Get(ctx, key, node)
	if apierrors.IsNotFound(err) {
		err = r.apiReader.Get(ctx, key, node)
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading node %s of Machine %s: %w", name, klog.KObj(m), err)
	}
	return node, nil
}

// reportPlannedMaintenance tells, on each Machine that would be unhealthy
// but for its node's planned maintenance, why it is left alone.
func (r *Reconciler) reportPlannedMaintenance(mhc *machinev1beta1.MachineHealthCheck, a assessment) {
	for _, t := range a.with(inMaintenance) {
		r.eventSkippedPlannedMaintenance(mhc, t)
	}
}

// remediate deletes each unhealthy Machine a MachineSet controls, for the
// MachineSet to replace, and skips the others. Deletion is conditional on
// the Machine's UID so that a new Machine of the same name is not deleted
// for its predecessor's health.
func (r *Reconciler) remediate(ctx context.Context, mhc *machinev1beta1.MachineHealthCheck, targets []assessed) error {
	log := ctrl.LoggerFrom(ctx)
	var errs []error
	for _, t := range targets {
		if !isControlledByMachineSet(t.machine) {
			r.eventSkippedNoController(mhc, t)
			remediations.WithLabelValues(resultSkipped).Inc()
			continue
		}
		err := r.client.Delete(ctx, t.machine, client.Preconditions{UID: &t.machine.UID})
		switch {
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
			// Gone already, or replaced by a Machine of the same name that
			// the next reconcile judges on its own.
		case err != nil:
			r.eventDeletionFailed(mhc, t, err)
			remediations.WithLabelValues(resultFailed).Inc()
			errs = append(errs, fmt.Errorf("deleting unhealthy Machine %s: %w", klog.KObj(t.machine), err))
		default:
			log.Info("Deleted unhealthy Machine", "machine", klog.KObj(t.machine), "reason", t.health.reason)
			r.eventDeleted(mhc, t)
			remediations.WithLabelValues(resultDeleted).Inc()
		}
	}
	return errors.Join(errs...)
}
