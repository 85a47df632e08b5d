package machinemaintenance

import (
	"context"
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
	"github.com/pitstop-dev/pitstop/internal/cloud"
	"github.com/pitstop-dev/pitstop/internal/ctrlqueue"
	"github.com/pitstop-dev/pitstop/internal/engine"
	"github.com/pitstop-dev/pitstop/internal/nodeview"
	"github.com/pitstop-dev/pitstop/internal/notify"
)

// Options configure the poller and the reconciler.
type Options struct {
	// Cloud is the provider of scheduled events.
	Cloud cloud.Events
	// Namespace is pitstop's: it holds the MachineMaintenances of Nodes
	// without a Machine.
	Namespace string
	// Interval between two polls (default 5m).
	Interval time.Duration
	// Machines says whether the Machine API is served.
	Machines bool
	// Retention is how long a finished MachineMaintenance is kept.
	Retention time.Duration
	// Margin is kept free between the end of an action and the event's
	// start when the latest safe start is computed.
	Margin time.Duration
	// WarnBefore: DeadlineAtRisk is raised this long before the latest
	// safe start of an event no profile has taken up.
	WarnBefore time.Duration
	// ReplaceTime and RebootTime are what an action is expected to take
	// until the cluster has finished some.
	ReplaceTime, RebootTime time.Duration
	// ReplacementTimeout bounds a surge's wait for its new Machine when
	// the trigger sets no timeout (default DefaultReplacementTimeout).
	ReplacementTimeout time.Duration
	// Outlook says what the profile engine last decided for a node, per
	// profile: whether a transition is taken, and when a check's answer
	// can next change by itself. Nil: no prediction (DeadlineAtRisk only
	// from the warning and the latest safe start).
	Outlook func(node string) map[string]engine.Decision
	// Notify sends the deadlineAtRisk notifications of the profiles that
	// select the node of an event just found at risk. Nil: none.
	Notify func(ctx context.Context, node *corev1.Node, e notify.Event) error
	// Clock is the real clock unless a test sets one.
	Clock clock.WithTicker
}

func (o *Options) defaults() {
	if o.Interval <= 0 {
		o.Interval = 5 * time.Minute
	}
	if o.Retention <= 0 {
		o.Retention = DefaultRetention
	}
	if o.Margin < 0 {
		o.Margin = 0
	}
	if o.WarnBefore <= 0 {
		o.WarnBefore = DefaultWarnBefore
	}
	if o.ReplaceTime <= 0 {
		o.ReplaceTime = DefaultReplaceTime
	}
	if o.RebootTime <= 0 {
		o.RebootTime = DefaultRebootTime
	}
	if o.ReplacementTimeout <= 0 {
		o.ReplacementTimeout = DefaultReplacementTimeout
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
}

// +kubebuilder:rbac:groups=pitstop.dev,resources=machinemaintenances,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=pitstop.dev,resources=machinemaintenances/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=nodes/status,verbs=patch
// +kubebuilder:rbac:groups=machine.openshift.io,resources=machines,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups=machine.openshift.io,resources=machinesets,verbs=get;list;watch;update
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Setup registers the poller and the MachineMaintenance controller.
func Setup(mgr ctrl.Manager, opts Options) (*Poller, error) {
	opts.defaults()
	recorder := mgr.GetEventRecorder("pitstop-cloud-events")
	p := &Poller{
		Client: mgr.GetClient(), Cloud: opts.Cloud, Namespace: opts.Namespace, Interval: opts.Interval,
		Machines: opts.Machines, Clock: opts.Clock, Recorder: recorder, Log: mgr.GetLogger().WithName("cloud-events"),
	}
	if err := mgr.Add(p); err != nil {
		return nil, err
	}
	r := &Reconciler{client: mgr.GetClient(), reader: mgr.GetAPIReader(), cloud: opts.Cloud, recorder: recorder, clock: opts.Clock, opts: opts}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("machinemaintenance").
		For(&pitstopv1alpha1.MachineMaintenance{}).
		// A node's state (a profile took the event up), its readiness and
		// its boot ID (a reboot is over) concern its events, and a
		// replacement waiting for a new node.
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.ofNode), builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				return nodeChanged(e.ObjectOld.(*corev1.Node), e.ObjectNew.(*corev1.Node))
			},
		}))
	if opts.Machines {
		b = b.Watches(&machinev1beta1.Machine{}, handler.EnqueueRequestsFromMapFunc(r.ofMachine))
	}
	// An action that ends lets the one waiting its turn (control-plane
	// machines go one at a time) go at once.
	b = b.Watches(&pitstopv1alpha1.MachineMaintenance{}, handler.EnqueueRequestsFromMapFunc(r.waitingTurn), builder.WithPredicates(predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			a := e.ObjectNew.(*pitstopv1alpha1.MachineMaintenance).Status.Action
			before := e.ObjectOld.(*pitstopv1alpha1.MachineMaintenance).Status.Action
			return a != nil && actionOver(a) && (before == nil || !actionOver(before))
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}))
	if err := b.WithOptions(ctrlqueue.ControllerOptions(mgr.GetLogger(), 1)).Complete(r); err != nil {
		return nil, err
	}
	return p, nil
}

// nodeChanged says whether a node update concerns its events: its state,
// its readiness, its boot ID, or the signal itself.
func nodeChanged(old, cur *corev1.Node) bool {
	return old.Labels[pitstopv1alpha1.LabelState] != cur.Labels[pitstopv1alpha1.LabelState] ||
		old.Labels[pitstopv1alpha1.LabelScheduledEvent] != cur.Labels[pitstopv1alpha1.LabelScheduledEvent] ||
		nodeview.Ready(old) != nodeview.Ready(cur) ||
		old.Status.NodeInfo.BootID != cur.Status.NodeInfo.BootID
}

// ofNode maps a node to its events and to the replacements under way.
func (r *Reconciler) ofNode(ctx context.Context, o client.Object) []reconcile.Request {
	return r.requests(ctx, func(mm *pitstopv1alpha1.MachineMaintenance) bool {
		return mm.Spec.NodeName == o.GetName() || busy(mm)
	})
}

// ofMachine maps a Machine to the events of its namespace with an action
// under way (a replacement waits for a new Machine, or for the old one to
// go) and to its own.
func (r *Reconciler) ofMachine(ctx context.Context, o client.Object) []reconcile.Request {
	return r.requests(ctx, func(mm *pitstopv1alpha1.MachineMaintenance) bool {
		return mm.Namespace == o.GetNamespace() && (mm.Spec.MachineName == o.GetName() || busy(mm))
	}, client.InNamespace(o.GetNamespace()))
}

// waitingTurn maps an ended action to the actions still at Requested.
func (r *Reconciler) waitingTurn(ctx context.Context, _ client.Object) []reconcile.Request {
	return r.requests(ctx, func(mm *pitstopv1alpha1.MachineMaintenance) bool {
		return mm.Status.Action != nil && mm.Status.Action.Step == pitstopv1alpha1.StepRequested
	})
}

// requests lists the MachineMaintenances (with opts) and asks for a
// reconcile of those that match.
func (r *Reconciler) requests(ctx context.Context, match func(*pitstopv1alpha1.MachineMaintenance) bool, opts ...client.ListOption) []reconcile.Request {
	var list pitstopv1alpha1.MachineMaintenanceList
	if err := r.client.List(ctx, &list, opts...); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if mm := &list.Items[i]; match(mm) {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: mm.Namespace, Name: mm.Name}})
		}
	}
	return reqs
}

// busy says whether an object's action is asked for and not over.
func busy(mm *pitstopv1alpha1.MachineMaintenance) bool {
	return mm.Status.Action != nil && !actionOver(mm.Status.Action)
}

// underWay says whether an object's action has started and is not over:
// it has acted on the cluster, and runs to its end even once its event
// has.
func underWay(mm *pitstopv1alpha1.MachineMaintenance) bool {
	return busy(mm) && mm.Status.Action.Step != pitstopv1alpha1.StepRequested
}
