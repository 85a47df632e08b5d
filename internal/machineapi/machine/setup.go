package machine

import (
	"context"
	"strings"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/budget"
	"github.com/pitstop-dev/pitstop/internal/ctrlqueue"
	"github.com/pitstop-dev/pitstop/internal/machineapi"
	"github.com/pitstop-dev/pitstop/internal/machineapi/provider"
)

// controllerName names the controller in logs and Events.
const controllerName = "machine"

// Options configure the Machine controller.
type Options struct {
	// Providers serve the Machines' providerSpec kinds.
	Providers provider.Registry
	// LeaseNamespace holds the Lease that lets one control-plane machine
	// drain at a time (the manager's namespace).
	LeaseNamespace string
	// MaxConcurrentReconciles is how many Machines are reconciled at once.
	MaxConcurrentReconciles int
	// DrainTimeout bounds the drain of a deleted Machine's node; zero: the
	// drain waits as long as it takes.
	DrainTimeout time.Duration
	// DrainOnTimeout is what happens when DrainTimeout passes, as
	// NodeMaintenance spec.drain.onTimeout: Fail leaves the Machine's
	// deletion waiting on a failed drain; ForceDelete deletes the remaining
	// pods past their PodDisruptionBudgets and lets the deletion go on.
	DrainOnTimeout pitstopv1alpha1.DrainTimeoutPolicy
	// Clock is the real clock unless a test sets one.
	Clock clock.PassiveClock
}

// +kubebuilder:rbac:groups=machine.openshift.io,resources=machines,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=machine.openshift.io,resources=machines/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups=pitstop.dev,resources=nodemaintenances,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Setup registers the Machine controller with the manager.
func Setup(mgr ctrl.Manager, opts Options) error {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	r := &Reconciler{
		client:    mgr.GetClient(),
		providers: opts.Providers,
		slots:     budget.NewSlots(mgr, opts.LeaseNamespace),
		reader:    mgr.GetAPIReader(),
		recorder:  mgr.GetEventRecorder("pitstop-" + controllerName),
		clock:     opts.Clock,
		opts:      opts,
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(controllerName).
		For(&machinev1beta1.Machine{}).
		// The drain's progress wakes the Machine whose deletion waits on it.
		Watches(&pitstopv1alpha1.NodeMaintenance{}, handler.EnqueueRequestsFromMapFunc(machineOfMaintenance)).
		// A Node deleted outside the Machine API may be an instance gone;
		// other Node changes (heartbeats) do not concern Machines.
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(machineOfNode), builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(event.CreateEvent) bool { return false },
			UpdateFunc: func(event.UpdateEvent) bool { return false },
		})).
		WithOptions(ctrlqueue.ControllerOptions(mgr.GetLogger(), opts.MaxConcurrentReconciles)).
		Complete(r)
}

// machineOfMaintenance maps a NodeMaintenance made for a Machine's drain
// back to the Machine.
func machineOfMaintenance(_ context.Context, obj client.Object) []reconcile.Request {
	m, ok := machineOf(obj)
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: m}}
}

// machineOf names the Machine whose drain a NodeMaintenance is, if it is one.
func machineOf(nm client.Object) (types.NamespacedName, bool) {
	ns, name, ok := strings.Cut(nm.GetAnnotations()[pitstopv1alpha1.AnnotationMachine], "/")
	return types.NamespacedName{Namespace: ns, Name: name}, ok
}

// machineOfNode maps a Node to its Machine, by the annotation nodelink sets
// (or the kwok provider's, for a Node not linked yet).
func machineOfNode(_ context.Context, obj client.Object) []reconcile.Request {
	for _, key := range []string{machineapi.AnnotationMachine, pitstopv1alpha1.AnnotationKwokMachine} {
		if ns, name, ok := strings.Cut(obj.GetAnnotations()[key], "/"); ok {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
		}
	}
	return nil
}

// Requeue intervals of slow things.
const (
	// pollInstance is how often a starting or stopping instance is looked
	// at when its provider does not say.
	pollInstance = 20 * time.Second
	// pollDeleting is how often an instance being deleted is looked at
	// when its provider does not say.
	pollDeleting = 2 * time.Second
	// resync looks at running instances now and then, so one deleted
	// outside the Machine API is noticed (the Machine fails, and a health
	// check can replace it).
	resync = 10 * time.Minute
	// awaitControlPlane is how often a control-plane machine waiting for
	// another's drain asks again.
	awaitControlPlane = 5 * time.Second
	// retryDrain is how long a failed drain waits before it is looked at
	// again.
	retryDrain = 30 * time.Second
)
