package healthcheck

import (
	"context"
	"slices"
	"strings"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/ctrlqueue"
	"github.com/pitstop-dev/pitstop/internal/machineapi"
	pitstopmetrics "github.com/pitstop-dev/pitstop/internal/metrics"
)

// controllerName names the controller in logs, metrics and Events.
const controllerName = "machinehealthcheck"

// conflictRequeue is how soon a reconcile whose status write lost a race
// looks again.
const conflictRequeue = time.Second

// Options configure the MachineHealthCheck controller.
type Options struct {
	// Clock tells the time health is judged at; nil is the real clock.
	// Requeues wait in real time whatever the clock says.
	Clock clock.PassiveClock
}

// Setup registers the MachineHealthCheck controller with the manager.
func Setup(mgr ctrl.Manager, opts Options) error {
	// Registered by the controller, so that a manager without the Machine
	// API does not export it.
	if err := pitstopmetrics.Replace(remediations); err != nil {
		return err
	}
	clk := opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	r := &Reconciler{
		client:    mgr.GetClient(),
		apiReader: mgr.GetAPIReader(),
		recorder:  mgr.GetEventRecorder("pitstop-" + controllerName),
		clock:     clk,
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(controllerName).
		// Its own status writes do not wake a health check: only its spec
		// and annotations (the pause) change what it decides.
		For(&machinev1beta1.MachineHealthCheck{}, builder.WithPredicates(
			predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Watches(&machinev1beta1.Machine{}, handler.EnqueueRequestsFromMapFunc(r.checksOfMachine)).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.checksOfNode),
			builder.WithPredicates(nodeHealthChanged())).
		// The start and the end of a planned maintenance change whether its
		// node's Machine may be remediated.
		Watches(&pitstopv1alpha1.NodeMaintenance{}, handler.EnqueueRequestsFromMapFunc(r.checksOfMaintenance)).
		WithOptions(ctrlqueue.ControllerOptions(mgr.GetLogger(), 1)).
		Complete(r)
}

// checksOfMachine maps a Machine to the health checks selecting it. On an
// update it is called with the old and the new Machine, so a health check
// the Machine's labels no longer match hears of it too.
func (r *Reconciler) checksOfMachine(ctx context.Context, obj client.Object) []reconcile.Request {
	m, ok := obj.(*machinev1beta1.Machine)
	if !ok {
		return nil
	}
	return r.checksSelecting(ctx, m)
}

// checksOfNode maps a Node to the health checks of its Machine.
func (r *Reconciler) checksOfNode(ctx context.Context, obj client.Object) []reconcile.Request {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return nil
	}
	return r.checksSelecting(ctx, r.machinesOfNode(ctx, node.Name, node)...)
}

// checksOfMaintenance maps a NodeMaintenance to the health checks of its
// node's Machine.
func (r *Reconciler) checksOfMaintenance(ctx context.Context, obj client.Object) []reconcile.Request {
	nm, ok := obj.(*pitstopv1alpha1.NodeMaintenance)
	if !ok {
		return nil
	}
	node := &corev1.Node{}
	if err := r.client.Get(ctx, types.NamespacedName{Name: nm.Spec.NodeName}, node); err != nil {
		node = nil // its Machine may still name it in nodeRef
	}
	return r.checksSelecting(ctx, r.machinesOfNode(ctx, nm.Spec.NodeName, node)...)
}

// machinesOfNode finds the Machines of a node: the one its
// machine.openshift.io/machine annotation names or, before that annotation
// is set, those whose nodeRef names the node.
func (r *Reconciler) machinesOfNode(ctx context.Context, name string, node *corev1.Node) []*machinev1beta1.Machine {
	if node != nil {
		if ns, machineName, ok := strings.Cut(node.Annotations[machineapi.AnnotationMachine], "/"); ok {
			m := &machinev1beta1.Machine{}
			if err := r.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: machineName}, m); err == nil {
				return []*machinev1beta1.Machine{m}
			}
		}
	}
	list := &machinev1beta1.MachineList{}
	if err := r.client.List(ctx, list); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing Machines of a node failed", "node", name)
		return nil
	}
	var machines []*machinev1beta1.Machine
	for i := range list.Items {
		if nodeName(&list.Items[i]) == name {
			machines = append(machines, &list.Items[i])
		}
	}
	return machines
}

// checksSelecting returns the health checks that select any of the
// Machines: those of its namespace whose selector matches its labels.
func (r *Reconciler) checksSelecting(ctx context.Context, machines ...*machinev1beta1.Machine) []reconcile.Request {
	var reqs []reconcile.Request
	for _, m := range machines {
		list := &machinev1beta1.MachineHealthCheckList{}
		if err := r.client.List(ctx, list, client.InNamespace(m.Namespace)); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Listing MachineHealthChecks of a Machine failed", "machine", klog.KObj(m))
			continue
		}
		for i := range list.Items {
			mhc := &list.Items[i]
			sel, err := metav1.LabelSelectorAsSelector(&mhc.Spec.Selector)
			if err != nil || !sel.Matches(labels.Set(m.Labels)) {
				continue // an invalid selector is reported by the health check's own reconcile
			}
			req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(mhc)}
			if !slices.Contains(reqs, req) {
				reqs = append(reqs, req)
			}
		}
	}
	return reqs
}

// nodeHealthChanged lets through the Node updates that can change a health
// check's answer: conditions, the maintenance state label, the Machine
// annotation. A kubelet's heartbeats, which only move lastHeartbeatTime,
// are dropped.
func nodeHealthChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		before, okBefore := e.ObjectOld.(*corev1.Node)
		after, okAfter := e.ObjectNew.(*corev1.Node)
		if !okBefore || !okAfter {
			return true
		}
		return before.Labels[pitstopv1alpha1.LabelState] != after.Labels[pitstopv1alpha1.LabelState] ||
			before.Annotations[machineapi.AnnotationMachine] != after.Annotations[machineapi.AnnotationMachine] ||
			!sameConditions(before.Status.Conditions, after.Status.Conditions)
	}}
}

// sameConditions compares what health is judged on: each condition's type,
// status and last transition.
func sameConditions(a, b []corev1.NodeCondition) bool {
	return slices.EqualFunc(a, b, func(x, y corev1.NodeCondition) bool {
		return x.Type == y.Type && x.Status == y.Status && x.LastTransitionTime.Equal(&y.LastTransitionTime)
	})
}
