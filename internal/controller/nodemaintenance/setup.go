package nodemaintenance

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/budget"
	"github.com/pitstop-dev/pitstop/internal/ctrlqueue"
	"github.com/pitstop-dev/pitstop/internal/drain"
	"github.com/pitstop-dev/pitstop/internal/maintenance"
	pitstopmetrics "github.com/pitstop-dev/pitstop/internal/metrics"
	"github.com/pitstop-dev/pitstop/internal/nodeview"
	"github.com/pitstop-dev/pitstop/internal/podcache"
)

// indexMaintenanceNode is the field index of NodeMaintenances by their
// node; pods are indexed by maintenance.IndexPodNode.
const indexMaintenanceNode = "spec.nodeName"

// controllerName names the controller in logs, metrics and Events.
const controllerName = "nodemaintenance"

// Setup registers the controller, its cache indexes and its metrics with
// the manager. The webhook is registered separately (SetupWebhook) because
// it needs a serving certificate.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	indexer := mgr.GetFieldIndexer()
	if err := maintenance.IndexPods(ctx, indexer); err != nil {
		return err
	}
	if err := indexer.IndexField(ctx, &pitstopv1alpha1.NodeMaintenance{}, indexMaintenanceNode, func(o client.Object) []string {
		return []string{o.(*pitstopv1alpha1.NodeMaintenance).Spec.NodeName}
	}); err != nil {
		return err
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	evictions, err := evictionClient(mgr)
	if err != nil {
		return err
	}
	limiter := drain.NewLimiter(opts.Evictions)
	executor := &drain.Executor{Client: evictions, Concurrency: opts.EvictionConcurrency, Limiter: limiter}
	// Answers to a drain's evictions wake its reconcile through answered.
	answered := make(chan event.GenericEvent, 1024)
	wake := func(name string) {
		select {
		case answered <- event.GenericEvent{Object: &pitstopv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: name}}}:
		case <-ctx.Done():
		}
	}
	r := &Reconciler{
		client:     mgr.GetClient(),
		apiReader:  mgr.GetAPIReader(),
		recorder:   mgr.GetEventRecorder("pitstop-" + controllerName),
		executor:   executor,
		queue:      drain.NewQueue(ctx, executor, wake),
		clock:      opts.Clock,
		opts:       opts,
		evicted:    newExpectations(),
		writes:     newWritePacer(),
		drainClock: newDrainClock(),
		turns:      budget.NewSlots(mgr, opts.LeaseNamespace),
		gate:       newBudgetGate(opts.Clock, opts.BudgetSettle),
		podEvents:  flowcontrol.NewTokenBucketRateLimiter(opts.PodEventRate, max(opts.PodEventBurst, 1)),
	}
	if err := r.gate.watchBudgets(ctx, mgr); err != nil {
		return err
	}
	if err := pitstopmetrics.Replace(newMaintenancesCollector(mgr.GetClient(), r.clock)); err != nil {
		return err
	}
	if err := pitstopmetrics.Replace(newEvictionQueueCollector(r.queue, limiter)); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(controllerName).
		// A status write of its own would only wake the reconcile that
		// wrote it: whatever it still waits for comes back through a watch
		// or its requeue.
		For(&pitstopv1alpha1.NodeMaintenance{}, builder.WithPredicates(ctrlPredicate(maintenanceChanged))).
		Watches(&pitstopv1alpha1.NodeMaintenance{}, handler.Funcs{CreateFunc: startFirst, UpdateFunc: restoreFirst}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.maintenancesForPod), builder.WithPredicates(ctrlPredicate(podChanged))).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.maintenancesForNode), builder.WithPredicates(ctrlPredicate(nodeChanged))).
		Watches(&policyv1.PodDisruptionBudget{}, r.budgetEvents()).
		WatchesRawSource(source.Channel(answered, &handler.EnqueueRequestForObject{})).
		WithOptions(ctrlqueue.ControllerOptions(mgr.GetLogger(), opts.MaxConcurrentReconciles)).
		Complete(r)
}

// urgentPriority puts the steps that start and end a maintenance ahead of
// the drains under way in the queue: the cordon of a NodeMaintenance just
// created and the restore of one being deleted. A drain's reconciles come
// with every pod that leaves its node; on a fleet draining a hundred nodes
// at once they would otherwise make a node that is done wait its turn
// behind all of them, and the next node's start with it.
const urgentPriority = 10

// startFirst queues a NodeMaintenance just created ahead of the drains
// under way; those found when the manager starts keep the queue's low
// priority for its first list.
func startFirst(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if !e.IsInInitialList {
		addUrgent(q, e.Object)
	}
}

// restoreFirst queues a NodeMaintenance whose deletion just started ahead
// of the drains under way.
func restoreFirst(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if e.ObjectOld.GetDeletionTimestamp().IsZero() && !e.ObjectNew.GetDeletionTimestamp().IsZero() {
		addUrgent(q, e.ObjectNew)
	}
}

func addUrgent(q workqueue.TypedRateLimitingInterface[reconcile.Request], o client.Object) {
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: o.GetName()}}
	if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
		pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(urgentPriority)}, req)
		return
	}
	q.Add(req)
}

// maintenancesOn returns requests for the NodeMaintenances of a node.
func (r *Reconciler) maintenancesOn(ctx context.Context, node string) []reconcile.Request {
	if node == "" {
		return nil
	}
	list := &pitstopv1alpha1.NodeMaintenanceList{}
	if err := r.client.List(ctx, list, client.MatchingFields{indexMaintenanceNode: node}); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, nm := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: nm.Name}})
	}
	return reqs
}

func (r *Reconciler) maintenancesForPod(ctx context.Context, o client.Object) []reconcile.Request {
	return r.maintenancesOn(ctx, podcache.NodeName(o))
}

func (r *Reconciler) maintenancesForNode(ctx context.Context, o client.Object) []reconcile.Request {
	return r.maintenancesOn(ctx, o.GetName())
}

// maintenancesBlockedBy wakes the drains a budget is blocking, so they retry
// as soon as it allows a disruption instead of at the next retry interval.
func (r *Reconciler) maintenancesBlockedBy(ctx context.Context, o client.Object) []reconcile.Request {
	key := o.GetNamespace() + "/" + o.GetName()
	list := &pitstopv1alpha1.NodeMaintenanceList{}
	if err := r.client.List(ctx, list); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, nm := range list.Items {
		for _, b := range nm.Status.Blockers {
			if b.PodDisruptionBudget == key {
				reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: nm.Name}})
				break
			}
		}
	}
	return reqs
}

// ctrlPredicate passes creates and deletes, and updates for which changed
// returns true.
func ctrlPredicate[T client.Object](changed func(old, new T) bool) predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, ok1 := e.ObjectOld.(T)
			new, ok2 := e.ObjectNew.(T)
			return ok1 && ok2 && changed(old, new)
		},
	}
}

// podChanged: what a drain waits for is a pod terminating, finishing,
// moving or going away. The cache keeps pods as podcache.Pods, which
// the handlers see as they are stored.
func podChanged(old, new client.Object) bool {
	return (old.GetDeletionTimestamp() == nil) != (new.GetDeletionTimestamp() == nil) ||
		podcache.Phase(old) != podcache.Phase(new) ||
		podcache.NodeName(old) != podcache.NodeName(new)
}

// maintenanceChanged passes the changes of a NodeMaintenance other than
// to its status: its spec (the generation), its deletion, its finalizers,
// labels, annotations and owners.
func maintenanceChanged(old, new *pitstopv1alpha1.NodeMaintenance) bool {
	return old.Generation != new.Generation ||
		old.DeletionTimestamp.IsZero() != new.DeletionTimestamp.IsZero() ||
		!slices.Equal(old.Finalizers, new.Finalizers) ||
		!equality.Semantic.DeepEqual(old.Labels, new.Labels) ||
		!equality.Semantic.DeepEqual(old.Annotations, new.Annotations) ||
		!equality.Semantic.DeepEqual(old.OwnerReferences, new.OwnerReferences)
}

// nodeChanged ignores heartbeats: only what maintenance sets, or readiness,
// matters. The profile engine's own record and state label, written on
// every move and check result of every profile, are none of a drain's
// business.
func nodeChanged(old, new *corev1.Node) bool {
	return old.Spec.Unschedulable != new.Spec.Unschedulable ||
		!equality.Semantic.DeepEqual(old.Spec.Taints, new.Spec.Taints) ||
		!equalExcept(old.Annotations, new.Annotations, pitstopv1alpha1.AnnotationMaintenanceData) ||
		!equalExcept(old.Labels, new.Labels, pitstopv1alpha1.LabelState) ||
		nodeview.Ready(old) != nodeview.Ready(new)
}

// equalExcept says a and b hold the same keys and values, key aside.
func equalExcept(a, b map[string]string, key string) bool {
	_, inA := a[key]
	_, inB := b[key]
	n := len(a)
	if inA {
		n--
	}
	if inB {
		n++
	}
	if n != len(b) {
		return false
	}
	for k, v := range a {
		if k == key {
			continue
		}
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
