package medik8s

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// setNodeOwner makes obj's Node one of its owners, as the Node Maintenance
// Operator does, so that the garbage collector deletes obj with its Node
// (and obj's finalizer then gives up the node's Lease). A node that does
// not exist is left to the maintenance to report. The write is locked on
// obj's resourceVersion, so that it replaces no owner written meanwhile.
func (r *Reconciler) setNodeOwner(ctx context.Context, obj *unstructured.Unstructured, nodeName string) error {
	if nodeName == "" {
		return nil
	}
	node := &corev1.Node{}
	if err := r.client.Get(ctx, types.NamespacedName{Name: nodeName}, node); err != nil {
		return client.IgnoreNotFound(err)
	}
	refs, changed := withNodeOwner(obj.GetOwnerReferences(), node)
	if !changed {
		return nil
	}
	// The garbage collector deletes obj, ending the maintenance, if the
	// UID names no Node: a cached Node that was deleted and created again
	// under its name must not give it one. The API server's copy does.
	if err := r.apiReader.Get(ctx, types.NamespacedName{Name: nodeName}, node); err != nil {
		return client.IgnoreNotFound(err)
	}
	if refs, changed = withNodeOwner(obj.GetOwnerReferences(), node); !changed {
		return nil
	}
	base := obj.DeepCopy()
	obj.SetOwnerReferences(refs)
	if err := r.client.Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("setting Node %s as an owner of %s: %w", nodeName, r.kind.describe(obj), err)
	}
	return nil
}

// withNodeOwner returns refs with node among them, as the Node Maintenance
// Operator writes it: neither controller nor blocking the Node's deletion
// (the Node must go whatever its maintenances), and whether that changed
// refs. A reference to an earlier Node of the same name (another UID) is
// replaced; other owners stay.
func withNodeOwner(refs []metav1.OwnerReference, node *corev1.Node) ([]metav1.OwnerReference, bool) {
	kept := make([]metav1.OwnerReference, 0, len(refs)+1)
	for _, ref := range refs {
		if ref.APIVersion != "v1" || ref.Kind != "Node" || ref.Name != node.Name {
			kept = append(kept, ref)
			continue
		}
		if ref.UID == node.UID {
			return refs, false
		}
	}
	return append(kept, metav1.OwnerReference{
		APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID,
		BlockOwnerDeletion: ptr.To(false), Controller: ptr.To(false),
	}), true
}
