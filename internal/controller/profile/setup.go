package profile

import (
	"context"
	"crypto/tls"
	"net/http"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/admission"
	"github.com/pitstop-dev/pitstop/internal/budget"
	"github.com/pitstop-dev/pitstop/internal/ctrlqueue"
	"github.com/pitstop-dev/pitstop/internal/engine"
	"github.com/pitstop-dev/pitstop/internal/fleet"
	pitstopmetrics "github.com/pitstop-dev/pitstop/internal/metrics"
	"github.com/pitstop-dev/pitstop/internal/notify"
	"github.com/pitstop-dev/pitstop/internal/plugin/check"
	"github.com/pitstop-dev/pitstop/internal/plugin/trigger"
	"github.com/pitstop-dev/pitstop/internal/seedmetrics"
)

// Options tune the profile controller.
type Options struct {
	// MaxConcurrentReconciles is how many nodes are evaluated at once.
	MaxConcurrentReconciles int
	// LeaseNamespace holds the budget slots (the manager's namespace); the
	// Secrets and Slack thread Leases of notifications are there too.
	LeaseNamespace string
	// SlackAPIURL is the Slack Web API's base URL for slackThread
	// notifications; empty means Slack's own.
	SlackAPIURL string
	// MailTLS is the TLS configuration for mail notifications; nil means
	// the system's roots.
	MailTLS *tls.Config
	// Checks are the outside services checks use: the Prometheus client
	// and the URLs it may query. The admission webhook must get the same
	// (SetupWebhook), so that it refuses what the controller would.
	Checks check.Deps
	// SeedStateLabel also writes the node's state as the
	// maintenance-controller's label (cloud.sap/maintenance-state), for
	// what still reads it (--smc-compat).
	SeedStateLabel bool
	// Clock is the time the engine, admission and budget slots judge by;
	// nil is the system's (the fault campaign sets one skewed).
	Clock clock.PassiveClock
}

// Setup registers the node controller and the profile status controller.
func Setup(mgr ctrl.Manager, opts Options) (*Reconciler, error) {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	slots := budget.NewSlots(mgr, opts.LeaseNamespace)
	slots.Clock = opts.Clock
	r := &Reconciler{
		client:    mgr.GetClient(),
		apiReader: mgr.GetAPIReader(),
		recorder:  latestWarnings{mgr.GetEventRecorder("pitstop-profile")},
		slots:     slots,
		clock:     opts.Clock,
		profiles:  fleet.NewRegistry(opts.Checks),
		records:   fleet.NewRecords(),
		written:   newWrittenNodes(),
		decisions: fleet.NewDecisions(),
		namespace: opts.LeaseNamespace,
		seedState: opts.SeedStateLabel,
	}
	if opts.SeedStateLabel {
		r.seedMetrics = seedmetrics.New(r.apiReader)
	}
	r.admission = admission.New(r.slots, r.client, r.apiReader, r.clock)
	nodes, err := fleet.InformerNodes(mgr.GetCache())
	if err != nil {
		return nil, err
	}
	r.nodes = nodes
	if r.index, err = fleet.InformerIndex(mgr.GetCache(), r.records); err != nil {
		return nil, err
	}
	dispatcher := notify.NewDispatcher(&notify.Sender{
		Secrets: mgr.GetAPIReader(), Client: budget.LiveClient(mgr.GetClient(), mgr.GetAPIReader()),
		Namespace: opts.LeaseNamespace, HTTP: &http.Client{Timeout: 30 * time.Second},
		SlackAPIURL: opts.SlackAPIURL, MailTLS: opts.MailTLS,
	}, r.recorder, mgr.GetLogger().WithName("notify"))
	r.notifier = dispatcher
	if err := mgr.Add(dispatcher); err != nil {
		return nil, err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("profile-node").
		Watches(&corev1.Node{}, nodeEvents(r.records), builder.WithPredicates(predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			return nodeChanged(e.ObjectOld.(*corev1.Node), e.ObjectNew.(*corev1.Node))
		}})).
		// A profile's spec changes every node's evaluation; its status
		// (written on every state change) changes none.
		Watches(&pitstopv1alpha1.MaintenanceProfile{}, handler.EnqueueRequestsFromMapFunc(r.allNodes), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesRawSource(source.Channel(r.admission.Wakes(), handler.Funcs{GenericFunc: func(_ context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			addFirst(q, e.Object.GetName())
		}})).
		Watches(&corev1.Node{}, handler.Funcs{UpdateFunc: r.wakeOnLeave}).
		Watches(&coordinationv1.Lease{}, handler.Funcs{UpdateFunc: r.wakeOnSlotFreed, DeleteFunc: r.wakeOnSlotDeleted}).
		Watches(&pitstopv1alpha1.NodeMaintenance{}, firstFromMapFunc(nodeOfMaintenance), builder.WithPredicates(predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			return maintenanceStepChanged(e.ObjectOld.(*pitstopv1alpha1.NodeMaintenance), e.ObjectNew.(*pitstopv1alpha1.NodeMaintenance))
		}})).
		Watches(&pitstopv1alpha1.NodeMaintenance{}, handler.Funcs{UpdateFunc: r.wakeOnMaintenanceEnding, DeleteFunc: r.wakeOnMaintenanceDeleted}).
		WithOptions(ctrlqueue.ControllerOptions(mgr.GetLogger(), opts.MaxConcurrentReconciles))
	// The step of a replacement or reboot a trigger asked for wakes its
	// node (where the API server serves MachineMaintenances: a cluster
	// whose CRDs predate them polls instead).
	gvk := pitstopv1alpha1.GroupVersion.WithKind("MachineMaintenance")
	r.watched = map[string]bool{trigger.WaitsOnNodeMaintenance: true}
	if _, err := mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
		r.watched[trigger.WaitsOnMachineMaintenance] = true
		b = b.Watches(&pitstopv1alpha1.MachineMaintenance{}, firstFromMapFunc(nodeOfMachineMaintenance), builder.WithPredicates(predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			return actionStepChanged(e.ObjectOld.(*pitstopv1alpha1.MachineMaintenance), e.ObjectNew.(*pitstopv1alpha1.MachineMaintenance))
		}}))
	}
	err = b.Complete(r)
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(manager.RunnableFunc(r.sweep)); err != nil {
		return nil, err
	}
	// Hands the woken nodes on to the controller and keeps the budgets'
	// lines.
	if err := mgr.Add(manager.RunnableFunc(r.admission.Run)); err != nil {
		return nil, err
	}
	if err := pitstopmetrics.Replace(newFleetCollector(mgr.GetClient(), r.records, r.profiles, r.slots, r.clock)); err != nil {
		return nil, err
	}
	status := newStatusReconciler(mgr.GetClient(), r.nodes, r.profiles, r.records, r.clock)
	err = ctrl.NewControllerManagedBy(mgr).
		Named("profile-status").
		For(&pitstopv1alpha1.MaintenanceProfile{}).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(status.allProfiles), builder.WithPredicates(predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.GetLabels()[pitstopv1alpha1.LabelState] != e.ObjectNew.GetLabels()[pitstopv1alpha1.LabelState]
		}})).
		WithOptions(ctrlqueue.ControllerOptions(mgr.GetLogger(), 1)).
		Complete(status)
	return r, err
}

// nodeChanged ignores heartbeats.
func nodeChanged(old, new *corev1.Node) bool {
	return !equality.Semantic.DeepEqual(old.Labels, new.Labels) ||
		!equality.Semantic.DeepEqual(old.Annotations, new.Annotations) ||
		!equality.Semantic.DeepEqual(old.Spec, new.Spec) ||
		!conditionsEqual(old.Status.Conditions, new.Status.Conditions)
}

func conditionsEqual(a, b []corev1.NodeCondition) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Type != b[i].Type || a[i].Status != b[i].Status {
			return false
		}
	}
	return true
}

func (r *Reconciler) allNodes(ctx context.Context, _ client.Object) []reconcile.Request {
	list := &corev1.NodeList{}
	if err := r.client.List(ctx, list); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, n := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: n.Name}})
	}
	return reqs
}

// Priorities in the node queue. pipelinePriority puts the nodes that hold
// budget slots, or are woken to take one, ahead of the rest: the nodes
// draining, in maintenance and leaving it, and the waiters a freed slot
// wakes; their number is bounded by the budgets. followUpPriority is the
// next evaluation of a node that just changed state (its next transition
// may be due at once: a node just marked maintenance-required takes a free
// slot). Everything else — new requests, rechecks of waiting nodes — comes
// after both. When every node of a large fleet is asked for maintenance at
// once, the wave of new requests then neither holds up the nodes under way
// nor keeps free slots from being taken.
const (
	pipelinePriority = 10
	followUpPriority = 5
)

// addFirst queues the node's evaluation ahead of the nodes that are not
// under way (a plain Add when the queue has no priorities).
func addFirst(q workqueue.TypedRateLimitingInterface[reconcile.Request], node string) {
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: node}}
	if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
		pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(pipelinePriority)}, req)
		return
	}
	q.Add(req)
}

// nodeEvents queues a node's evaluation when the node changes: ahead of the
// nodes not under way when its record says it is in maintenance (the
// restore of its drain, say, lets it out), as a change of its
// NodeMaintenance does; otherwise as the queue orders any change, the
// nodes of the first list after the rest.
func nodeEvents(records *fleet.Records) handler.EventHandler {
	return onEveryEvent(func(_ context.Context, o client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		node, ok := o.(*corev1.Node)
		if !ok {
			return
		}
		if record, err := records.Read(node); err == nil && record.Holding() {
			addFirst(q, node.Name)
			return
		}
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: node.Name}})
	})
}

// firstFromMapFunc is handler.EnqueueRequestsFromMapFunc with addFirst.
func firstFromMapFunc(fn handler.MapFunc) handler.EventHandler {
	return onEveryEvent(func(ctx context.Context, o client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		for _, req := range fn(ctx, o) {
			addFirst(q, req.Name)
		}
	})
}

// onEveryEvent calls add with the object of every event (the new one of
// an update).
func onEveryEvent(add func(context.Context, client.Object, workqueue.TypedRateLimitingInterface[reconcile.Request])) handler.EventHandler {
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, e.Object, q)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, e.ObjectNew, q)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, e.Object, q)
		},
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, e.Object, q)
		},
	}
}

// maintenanceStepChanged says a NodeMaintenance's change matters to the
// profile engine: its Ready condition changed status or reason (the drain
// is done, or failed, or moved to another step), or its deletion started.
// The progress a drain reports about once a second does not: on a fleet
// draining a hundred nodes at once it would evaluate each of them every
// second, for nothing.
func maintenanceStepChanged(old, new *pitstopv1alpha1.NodeMaintenance) bool {
	if old.DeletionTimestamp.IsZero() != new.DeletionTimestamp.IsZero() {
		return true
	}
	o := meta.FindStatusCondition(old.Status.Conditions, pitstopv1alpha1.ConditionReady)
	n := meta.FindStatusCondition(new.Status.Conditions, pitstopv1alpha1.ConditionReady)
	if o == nil || n == nil {
		return o != n
	}
	return o.Status != n.Status || o.Reason != n.Reason
}

// actionStepChanged says a MachineMaintenance's action moved to another
// step: the trigger that asked for it may be done.
func actionStepChanged(old, cur *pitstopv1alpha1.MachineMaintenance) bool {
	o, n := old.Status.Action, cur.Status.Action
	if o == nil || n == nil {
		return o != n
	}
	return o.Step != n.Step
}

func nodeOfMachineMaintenance(_ context.Context, o client.Object) []reconcile.Request {
	node := o.(*pitstopv1alpha1.MachineMaintenance).Spec.NodeName
	if node == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: node}}}
}

func nodeOfMaintenance(_ context.Context, o client.Object) []reconcile.Request {
	if _, ok := o.GetLabels()[pitstopv1alpha1.LabelProfile]; !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.(*pitstopv1alpha1.NodeMaintenance).Spec.NodeName}}}
}

// wakeOnSlotDeleted wakes the nodes waiting on a budget once the cache
// sees one of its slots given back.
func (r *Reconciler) wakeOnSlotDeleted(_ context.Context, e event.DeleteEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if lease, ok := e.Object.(*coordinationv1.Lease); ok {
		r.admission.SlotDeleted(lease)
	}
}

// wakeOnSlotFreed wakes the nodes waiting on a budget once the cache sees
// one of its slots change hands or lose its holder.
func (r *Reconciler) wakeOnSlotFreed(_ context.Context, e event.UpdateEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	oldLease, okOld := e.ObjectOld.(*coordinationv1.Lease)
	newLease, okNew := e.ObjectNew.(*coordinationv1.Lease)
	if okOld && okNew {
		r.admission.SlotChanged(oldLease, newLease)
	}
}

// wakeOnMaintenanceEnding wakes the nodes waiting on budgets shared by
// every profile once the cache sees a NodeMaintenance's deletion start:
// its node no longer counts against them.
func (r *Reconciler) wakeOnMaintenanceEnding(_ context.Context, e event.UpdateEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if e.ObjectOld.GetDeletionTimestamp().IsZero() && !e.ObjectNew.GetDeletionTimestamp().IsZero() {
		r.admission.MaintenanceEnded()
	}
}

// wakeOnMaintenanceDeleted does the same for a NodeMaintenance deleted at
// once (no finalizer held it).
func (r *Reconciler) wakeOnMaintenanceDeleted(_ context.Context, e event.DeleteEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if e.Object.GetDeletionTimestamp().IsZero() {
		r.admission.MaintenanceEnded()
	}
}

// wakeOnLeave wakes the nodes waiting on what a node's state change frees,
// once the cache holds the change.
func (r *Reconciler) wakeOnLeave(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	oldNode, newNode := e.ObjectOld.(*corev1.Node), e.ObjectNew.(*corev1.Node)
	if oldNode.Annotations[pitstopv1alpha1.AnnotationMaintenanceData] == newNode.Annotations[pitstopv1alpha1.AnnotationMaintenanceData] {
		return
	}
	before, err := engine.ReadRecord(oldNode)
	if err != nil {
		return
	}
	after, err := r.records.Read(newNode)
	if err != nil {
		return
	}
	wake := func(key string) {
		for _, n := range r.admission.WakeOnChange(key, newNode.Name) {
			addFirst(q, n)
		}
	}
	for name, was := range before.Profiles {
		now := after.Profiles[name]
		if now.Current == was.Current {
			continue
		}
		wake(admission.ProfileWakeKey(name))
		c := r.profiles.Last(name)
		if c == nil || was.Current != pitstopv1alpha1.StateInMaintenance {
			continue
		}
		for _, b := range admission.MaxMaintenanceBudgets(c.Admission(), newNode) {
			wake(b.WakeKey())
		}
	}
}
