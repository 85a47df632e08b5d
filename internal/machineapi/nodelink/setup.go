package nodelink

import (
	"context"
	"fmt"
	"slices"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/pitstop-dev/pitstop/internal/ctrlqueue"
)

// controllerName names the controller in logs and Events.
const controllerName = "nodelink"

// Field indexes on the manager's cache, on both Nodes and Machines. The
// names carry the package's so that they never collide with an index
// another controller registers on the same type (the cache refuses a name
// twice).
const (
	// indexProviderID holds the spec.providerID, when set.
	indexProviderID = "nodelink.providerID"
	// indexInternalIP holds each InternalIP address: a Node's
	// status.addresses, a Machine's status.addresses.
	indexInternalIP = "nodelink.internalIP"
)

// Setup registers the controller and its cache indexes with the manager.
func Setup(mgr ctrl.Manager) error {
	// IndexField only looks the informer up; it does not wait for it, so a
	// context of its own is enough.
	if err := registerIndexes(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	r := &Reconciler{
		client:   mgr.GetClient(),
		recorder: mgr.GetEventRecorder("pitstop-" + controllerName),
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(controllerName).
		For(&corev1.Node{}).
		// A Machine created, given its providerID or its addresses, or
		// deleted (which may end an ambiguity) wakes the Nodes it matches.
		Watches(&machinev1beta1.Machine{}, handler.EnqueueRequestsFromMapFunc(r.nodesOfMachine)).
		// A Node that goes away or changes what it matches by may end the
		// ambiguity that kept the Nodes it shared a Machine with unlinked.
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.rivalsOfNode), builder.WithPredicates(identityChanged)).
		WithOptions(ctrlqueue.ControllerOptions(mgr.GetLogger(), 1)).
		Complete(r)
}

func registerIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	indexes := []struct {
		obj     client.Object
		field   string
		extract client.IndexerFunc
	}{
		{&corev1.Node{}, indexProviderID, func(o client.Object) []string { return nonEmpty(nodeProviderID(o.(*corev1.Node))) }},
		{&corev1.Node{}, indexInternalIP, func(o client.Object) []string { return internalIPs(o.(*corev1.Node).Status.Addresses) }},
		{&machinev1beta1.Machine{}, indexProviderID, func(o client.Object) []string {
			return nonEmpty(machineProviderID(o.(*machinev1beta1.Machine)))
		}},
		{&machinev1beta1.Machine{}, indexInternalIP, func(o client.Object) []string {
			return internalIPs(o.(*machinev1beta1.Machine).Status.Addresses)
		}},
	}
	for _, i := range indexes {
		if err := indexer.IndexField(ctx, i.obj, i.field, i.extract); err != nil {
			return fmt.Errorf("indexing %T by %s: %w", i.obj, i.field, err)
		}
	}
	return nil
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// nodesOfMachine maps a Machine to every Node with its providerID or one of
// its internal IPs, whichever evidence will decide: each Node weighs its
// candidates itself.
func (r *Reconciler) nodesOfMachine(ctx context.Context, o client.Object) []reconcile.Request {
	m := o.(*machinev1beta1.Machine)
	return r.nodesSharing(ctx, machineProviderID(m), internalIPs(m.Status.Addresses), "")
}

// rivalsOfNode maps a Node to the other Nodes with its providerID or one of
// its internal IPs.
func (r *Reconciler) rivalsOfNode(ctx context.Context, o client.Object) []reconcile.Request {
	n := o.(*corev1.Node)
	return r.nodesSharing(ctx, nodeProviderID(n), internalIPs(n.Status.Addresses), n.Name)
}

// nodesSharing returns requests for the Nodes with providerID or one of
// ips, except the one named except. A failed lookup maps to nothing (the
// cache does not fail lookups of registered indexes).
func (r *Reconciler) nodesSharing(ctx context.Context, providerID string, ips []string, except string) []reconcile.Request {
	sameID, sameIP, err := sharing(providerID, ips, r.listNodes(ctx))
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "mapping an event to nodes")
		return nil
	}
	var reqs []reconcile.Request
	for _, n := range append(sameID, sameIP...) {
		req := reconcile.Request{NamespacedName: types.NamespacedName{Name: n.Name}}
		if n.Name != except && !slices.Contains(reqs, req) {
			reqs = append(reqs, req)
		}
	}
	return reqs
}

// identityChanged passes the Node events that can change which Nodes a
// Machine matches: creation, deletion (graceful or not), and a change of
// providerID or internal IPs. Heartbeats do not.
var identityChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		before, ok1 := e.ObjectOld.(*corev1.Node)
		after, ok2 := e.ObjectNew.(*corev1.Node)
		return ok1 && ok2 && (before.Spec.ProviderID != after.Spec.ProviderID ||
			!slices.Equal(internalIPs(before.Status.Addresses), internalIPs(after.Status.Addresses)) ||
			before.DeletionTimestamp.IsZero() != after.DeletionTimestamp.IsZero())
	},
}
