package nodelink

import (
	"context"
	"fmt"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Reconciler links one Node to its Machine per reconcile.
type Reconciler struct {
	// client reads Nodes and Machines from the cache, through its indexes.
	client   client.Client
	recorder events.EventRecorder
}

// conflictRequeue is how soon a Node whose patch lost a race looks again.
// A safety net: the write that won wakes the Node sooner.
const conflictRequeue = time.Second

// Reconcile links the Node named by req to its Machine: it finds the
// Machine, points the Machine's status.nodeRef at the Node, then annotates
// the Node and copies the Machine's labels, annotations and taints onto it.
// Each write happens only when it changes something.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	node := &corev1.Node{}
	if err := r.client.Get(ctx, req.NamespacedName, node); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !node.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // a Node on its way out gains no link
	}
	m, by, err := r.findMachine(ctx, node)
	if err != nil || m == nil {
		return ctrl.Result{}, err
	}
	if err := r.reconcileNodeRef(ctx, m, node, by); err != nil {
		return ctrl.Result{}, err
	}
	return r.reconcileNode(ctx, node, m)
}

// findMachine returns the Node's Machine and what ties them, or nil when
// there is none. A Node and a Machine are linked only when each is the
// other's only match by its strongest evidence: a Node that matches two
// Machines, or whose Machine matches two Nodes, is linked to none, with a
// Warning Event, rather than to whichever the cache listed first. The
// second check also keeps two Nodes from taking turns at one Machine's
// nodeRef.
func (r *Reconciler) findMachine(ctx context.Context, node *corev1.Node) (*machinev1beta1.Machine, evidence, error) {
	sameID, sameIP, err := sharing(nodeProviderID(node), internalIPs(node.Status.Addresses), r.listMachines(ctx))
	if err != nil {
		return nil, "", fmt.Errorf("finding the Machine of node %s: %w", node.Name, err)
	}
	machines, by := pick(nodeProviderID(node), sameID, sameIP, machineProviderID)
	switch {
	case len(machines) == 0:
		return nil, "", nil
	case len(machines) > 1:
		r.eventAmbiguousMachine(node, machines, by)
		return nil, "", nil
	}
	m := machines[0]
	nodesByID, nodesByIP, err := sharing(machineProviderID(m), internalIPs(m.Status.Addresses), r.listNodes(ctx))
	if err != nil {
		return nil, "", fmt.Errorf("finding the Nodes of Machine %s: %w", klog.KObj(m), err)
	}
	nodes, nodesBy := pick(machineProviderID(m), nodesByID, nodesByIP, nodeProviderID)
	switch {
	case len(nodes) > 1:
		r.eventAmbiguousNode(node, m, nodes, nodesBy)
		return nil, "", nil
	case len(nodes) == 0 || nodes[0].UID != node.UID:
		// The Machine's own evidence points elsewhere (another Node has its
		// providerID) or the cache has not seen this Node yet.
		ctrl.LoggerFrom(ctx).V(1).Info("machine belongs to another node", "machine", klog.KObj(m), "by", nodesBy)
		return nil, "", nil
	}
	return m, by, nil
}

// sharing collects, through list, the objects with providerID (when set)
// and those with one of ips.
func sharing[T any](providerID string, ips []string, list func(field, value string) ([]*T, error)) (sameID, sameIP []*T, err error) {
	if providerID != "" {
		if sameID, err = list(indexProviderID, providerID); err != nil {
			return nil, nil, err
		}
	}
	for _, ip := range ips {
		found, err := list(indexInternalIP, ip)
		if err != nil {
			return nil, nil, err
		}
		sameIP = append(sameIP, found...)
	}
	return sameID, sameIP, nil
}

// listMachines lists the Machines whose index field holds value.
func (r *Reconciler) listMachines(ctx context.Context) func(field, value string) ([]*machinev1beta1.Machine, error) {
	return func(field, value string) ([]*machinev1beta1.Machine, error) {
		list := &machinev1beta1.MachineList{}
		if err := r.client.List(ctx, list, client.MatchingFields{field: value}); err != nil {
			return nil, fmt.Errorf("listing Machines by %s %s: %w", field, value, err)
		}
		return pointers(list.Items), nil
	}
}

// listNodes lists the Nodes whose index field holds value, leaving out
// Nodes being deleted: they are linked no more, so they must not make the
// Node replacing them ambiguous.
func (r *Reconciler) listNodes(ctx context.Context) func(field, value string) ([]*corev1.Node, error) {
	return func(field, value string) ([]*corev1.Node, error) {
		list := &corev1.NodeList{}
		if err := r.client.List(ctx, list, client.MatchingFields{field: value}); err != nil {
			return nil, fmt.Errorf("listing Nodes by %s %s: %w", field, value, err)
		}
		var live []*corev1.Node
		for _, n := range pointers(list.Items) {
			if n.DeletionTimestamp.IsZero() {
				live = append(live, n)
			}
		}
		return live, nil
	}
}

func pointers[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}

// reconcileNodeRef points the Machine's status.nodeRef at the Node. The
// write is a merge patch of the status subresource holding nodeRef alone,
// so it cannot undo what the Machine controller writes to the rest of the
// status at the same time.
func (r *Reconciler) reconcileNodeRef(ctx context.Context, m *machinev1beta1.Machine, node *corev1.Node, by evidence) error {
	if isLinkedTo(m, node) {
		return nil
	}
	before := m.DeepCopy()
	m.Status.NodeRef = nodeRef(node)
	if err := r.client.Status().Patch(ctx, m, client.MergeFrom(before)); err != nil {
		if apierrors.IsNotFound(err) {
			return nil // its deletion wakes the Node again
		}
		return fmt.Errorf("setting status.nodeRef of Machine %s to node %s: %w", klog.KObj(m), node.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("linked machine to node", "machine", klog.KObj(m), "by", by)
	r.eventLinked(m, node, by)
	return nil
}

// reconcileNode annotates the Node with its Machine and adds the Machine's
// labels, annotations and taints. Labels and annotations are map entries,
// which a merge patch sets one by one; taints are a list, which it
// replaces whole, so a patch that adds taints carries the resourceVersion
// it was computed from: if the Node changed since (another taint added by
// someone else), the API server refuses it and the Node is looked at again.
func (r *Reconciler) reconcileNode(ctx context.Context, node *corev1.Node, m *machinev1beta1.Machine) (ctrl.Result, error) {
	linked, taintsAdded := linkedNode(node, m)
	if !nodeChanged(node, linked) {
		return ctrl.Result{}, nil
	}
	patch := client.MergeFrom(node)
	if taintsAdded {
		patch = client.MergeFromWithOptions(node, client.MergeFromWithOptimisticLock{})
	}
	err := r.client.Patch(ctx, linked, patch)
	switch {
	case apierrors.IsConflict(err):
		return ctrl.Result{RequeueAfter: conflictRequeue}, nil
	case apierrors.IsNotFound(err):
		return ctrl.Result{}, nil
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("linking node %s to Machine %s: %w", node.Name, klog.KObj(m), err)
	}
	ctrl.LoggerFrom(ctx).V(1).Info("copied machine metadata to node", "machine", klog.KObj(m), "taintsAdded", taintsAdded)
	return ctrl.Result{}, nil
}
