package medik8s

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The medik8s coordination contract: a component acting on a node (the
// Node Maintenance Operator, Node Health Check's remediations) holds the
// Lease node-<node> in medik8s-leases while it does, and acts on no node
// whose Lease another holds. pitstop holds it the way the Node Maintenance
// Operator does, under that operator's holder identity, so that the other
// components see a maintenance whichever of the two runs it.
const (
	// LeaseNamespace holds the medik8s Leases.
	LeaseNamespace = "medik8s-leases"
	// LeaseHolder is the Node Maintenance Operator's holder identity.
	LeaseHolder = "node-maintenance"
	// LeaseDuration is how long a Lease is valid after its renewal.
	LeaseDuration = time.Hour
	// leaseRenewEvery is how often a held Lease is renewed, well within
	// its duration.
	leaseRenewEvery = 10 * time.Minute
	// leaseHeldRetry is how soon a maintenance waiting for another
	// holder's Lease looks again.
	leaseHeldRetry = 10 * time.Second
)

// leaseName is the medik8s Lease of a node.
func leaseName(node string) string { return "node-" + node }

// heldError says another component holds the node's Lease.
type heldError struct{ node, holder string }

func (e *heldError) Error() string {
	return fmt.Sprintf("the Lease %s/%s is held by %s", LeaseNamespace, leaseName(e.node), e.holder)
}

// requestLease takes or renews the node's Lease for pitstop, as the Node
// Maintenance Operator does: created when missing, renewed when ours,
// taken over when another's has expired, and refused (heldError) while
// another's is valid. Its namespace is created when missing. Leases are
// read from the API server (reader): pitstop's cache holds only its own.
func requestLease(ctx context.Context, reader client.Reader, c client.Client, node *corev1.Node, now time.Time) error {
	lease := &coordinationv1.Lease{}
	key := client.ObjectKey{Namespace: LeaseNamespace, Name: leaseName(node.Name)}
	micro := metav1.NewMicroTime(now)
	owner := metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}
	err := reader.Get(ctx, key, lease)
	if apierrors.IsNotFound(err) {
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, OwnerReferences: []metav1.OwnerReference{owner}},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity: ptr.To(LeaseHolder), LeaseDurationSeconds: ptr.To(int32(LeaseDuration.Seconds())),
				AcquireTime: &micro, RenewTime: &micro, LeaseTransitions: ptr.To[int32](0),
			},
		}
		err := c.Create(ctx, lease)
		if apierrors.IsNotFound(err) {
			// No namespace yet (the chart makes it; outside a cluster,
			// pitstop does).
			if err := ensureNamespace(ctx, c); err != nil {
				return err
			}
			err = c.Create(ctx, lease)
		}
		return err
	}
	if err != nil {
		return err
	}
	ours := lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity == LeaseHolder
	if !ours {
		if leaseValid(lease, now) {
			holder := "an unknown holder"
			if lease.Spec.HolderIdentity != nil {
				holder = *lease.Spec.HolderIdentity
			}
			return &heldError{node: node.Name, holder: holder}
		}
		lease.Spec.AcquireTime = &micro
		lease.Spec.LeaseTransitions = ptr.To(ptr.Deref(lease.Spec.LeaseTransitions, 0) + 1)
	} else if lease.Spec.RenewTime != nil && now.Sub(lease.Spec.RenewTime.Time) < leaseRenewEvery/2 {
		return nil // renewed a moment ago
	}
	lease.OwnerReferences = []metav1.OwnerReference{owner}
	lease.Spec.HolderIdentity = ptr.To(LeaseHolder)
	lease.Spec.LeaseDurationSeconds = ptr.To(int32(LeaseDuration.Seconds()))
	lease.Spec.RenewTime = &micro
	return c.Update(ctx, lease)
}

// leaseValid: renewed, not in the future, and not expired.
func leaseValid(l *coordinationv1.Lease, now time.Time) bool {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return false
	}
	due := l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second)
	return !due.Before(now) && !l.Spec.RenewTime.After(now)
}

// invalidateLease gives the node's Lease up once the maintenance has
// ended: deleted if pitstop holds it; another holder's is left alone.
func invalidateLease(ctx context.Context, reader client.Reader, c client.Client, node string) error {
	lease := &coordinationv1.Lease{}
	if err := reader.Get(ctx, client.ObjectKey{Namespace: LeaseNamespace, Name: leaseName(node)}, lease); err != nil {
		return client.IgnoreNotFound(err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != LeaseHolder {
		return nil
	}
	return client.IgnoreNotFound(c.Delete(ctx, lease, client.Preconditions{UID: &lease.UID, ResourceVersion: &lease.ResourceVersion}))
}

func ensureNamespace(ctx context.Context, c client.Client) error {
	err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: LeaseNamespace}})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}
