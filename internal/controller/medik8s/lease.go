package medik8s

import (
	"context"
	"errors"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

// The medik8s coordination contract: a component acting on a node (the
// Node Maintenance Operator, Node Health Check's remediations) holds the
// Lease node-<node> in the medik8s Lease namespace while it does, and acts
// on no node whose Lease another holds. pitstop holds it the way the Node
// Maintenance Operator does, under that operator's holder identity, so that
// the other components see a maintenance whichever of the two runs it.
const (
	// LeaseNamespace holds the medik8s Leases unless Options say
	// otherwise: the default of the Node Maintenance Operator's
	// LEASE_NAMESPACE, and of the other medik8s components'.
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
	// maxLeaseErrors is how many failed attempts in a row at the Lease a
	// maintenance outlives; the attempt after fails it. It is the Node
	// Maintenance Operator's maxAllowedErrorToUpdateOwnedLease.
	maxLeaseErrors = 3
)

// leaseName is the medik8s Lease of a node.
func leaseName(node string) string { return "node-" + node }

// heldError says another component holds the node's Lease.
type heldError struct{ namespace, node, holder string }

func (e *heldError) Error() string {
	return fmt.Sprintf("the Lease %s/%s is held by %s", e.namespace, leaseName(e.node), e.holder)
}

// leases are the medik8s Leases of one namespace. They are read from the
// API server (reader): pitstop's cache holds only its own.
type leases struct {
	namespace string
	reader    client.Reader
	client    client.Client
}

// describe names a node's Lease for messages: "<namespace>/node-<node>".
func (l leases) describe(node string) string { return l.namespace + "/" + leaseName(node) }

// request takes or renews the node's Lease for pitstop, as the Node
// Maintenance Operator does: created when missing, renewed when ours,
// taken over when another's has expired, and refused (heldError) while
// another's is valid. Its namespace is created when missing.
func (l leases) request(ctx context.Context, node *corev1.Node, now time.Time) error {
	lease := &coordinationv1.Lease{}
	key := client.ObjectKey{Namespace: l.namespace, Name: leaseName(node.Name)}
	micro := metav1.NewMicroTime(now)
	owner := metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}
	err := l.reader.Get(ctx, key, lease)
	if apierrors.IsNotFound(err) {
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, OwnerReferences: []metav1.OwnerReference{owner}},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity: ptr.To(LeaseHolder), LeaseDurationSeconds: ptr.To(int32(LeaseDuration.Seconds())),
				AcquireTime: &micro, RenewTime: &micro, LeaseTransitions: ptr.To[int32](0),
			},
		}
		err := l.client.Create(ctx, lease)
		if apierrors.IsNotFound(err) {
			// No namespace yet (the chart makes it; outside a cluster,
			// pitstop does).
			if err := l.ensureNamespace(ctx); err != nil {
				return err
			}
			err = l.client.Create(ctx, lease)
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
			return &heldError{namespace: l.namespace, node: node.Name, holder: holder}
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
	return l.client.Update(ctx, lease)
}

// leaseValid: renewed, not in the future, and not expired.
func leaseValid(l *coordinationv1.Lease, now time.Time) bool {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return false
	}
	due := l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second)
	return !due.Before(now) && !l.Spec.RenewTime.After(now)
}

// invalidate gives the node's Lease up once the maintenance has ended:
// deleted if pitstop holds it; another holder's (Node Health Check's, say)
// is left alone, and does not hold the end of the maintenance up, as the
// Node Maintenance Operator ignores its AlreadyHeldError there.
func (l leases) invalidate(ctx context.Context, node string) error {
	lease := &coordinationv1.Lease{}
	if err := l.reader.Get(ctx, client.ObjectKey{Namespace: l.namespace, Name: leaseName(node)}, lease); err != nil {
		return client.IgnoreNotFound(err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != LeaseHolder {
		return nil
	}
	return client.IgnoreNotFound(l.client.Delete(ctx, lease, client.Preconditions{UID: &lease.UID, ResourceVersion: &lease.ResourceVersion}))
}

func (l leases) ensureNamespace(ctx context.Context) error {
	err := l.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: l.namespace}})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// leaseErrors is the count of failed attempts in a row at the node's Lease
// after one that ended in err, counted as the Node Maintenance Operator
// counts them: an error counts, and so does another holder once the
// maintenance has started (pitstop makes its NodeMaintenance only while it
// holds the Lease, so the Lease was pitstop's and is lost; that operator
// tells the same by drainProgress > 0). Waiting for another holder before
// the start is not counted, nor is a conflict (a look again); a Lease held
// resets the count.
func leaseErrors(count int64, err error, started bool) int64 {
	var held *heldError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &held) && !started, apierrors.IsConflict(err):
		return count
	}
	return count + 1
}

// lostLease says the maintenance failed to get its node's Lease more than
// maxLeaseErrors times in a row, and so is to fail.
func lostLease(st status) bool { return st.ErrorOnLeaseCount > maxLeaseErrors }

// failOnLostLease ends a maintenance that lost its node's Lease, as the
// Node Maintenance Operator does: the node is restored, and the object is
// Failed with that operator's lastError. The node is restored by deleting
// pitstop's NodeMaintenance, whose finalizer undoes what the maintenance
// did to it (and nothing else: a node cordoned before stays cordoned); the
// object turns Failed only once that one is gone, so that Failed says the
// node is back. The Lease is not touched here: another holder's stays
// theirs, and settle gives up pitstop's own.
func (r *Reconciler) failOnLostLease(ctx context.Context, obj *unstructured.Unstructured, s spec, prev status) (status, ctrl.Result, error) {
	msg := fmt.Sprintf("maintenance failed: lease could not be extended after %d attempts", prev.ErrorOnLeaseCount)
	nm := &pitstopv1alpha1.NodeMaintenance{}
	name := r.kind.maintenanceName(client.ObjectKeyFromObject(obj))
	switch err := r.apiReader.Get(ctx, types.NamespacedName{Name: name}, nm); {
	case apierrors.IsNotFound(err):
		return failed(prev, msg), ctrl.Result{}, nil
	case err != nil:
		err = fmt.Errorf("reading NodeMaintenance %s: %w", name, err)
		return erred(prev, err), ctrl.Result{}, err
	case !r.kind.owns(nm, obj):
		return failed(prev, msg), ctrl.Result{}, nil // not ours: this maintenance did nothing to the node
	}
	if nm.DeletionTimestamp.IsZero() {
		if err := r.client.Delete(ctx, nm, client.Preconditions{UID: &nm.UID}); client.IgnoreNotFound(err) != nil {
			err = fmt.Errorf("deleting NodeMaintenance %s of a maintenance that lost its Lease: %w", name, err)
			return erred(prev, err), ctrl.Result{}, err
		}
		ctrl.LoggerFrom(ctx).Info("restoring the node of a maintenance that lost its Lease", "nodeMaintenance", klog.KObj(nm), "node", s.NodeName, "errorOnLeaseCount", prev.ErrorOnLeaseCount)
	}
	w := prev
	w.LastError = fmt.Sprintf("%s; node %s is being restored", msg, s.NodeName)
	return w, ctrl.Result{RequeueAfter: awaitRequeue}, nil // its deletion wakes us sooner
}
