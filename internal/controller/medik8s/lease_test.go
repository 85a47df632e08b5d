package medik8s_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/controller/medik8s"
	"github.com/pitstop-dev/pitstop/internal/manager"
	"github.com/pitstop-dev/pitstop/internal/testutil"
	"github.com/pitstop-dev/pitstop/internal/testutil/clustertest"
)

// getLease reads a node's medik8s Lease (nil when there is none).
func getLease(t *testing.T, node string) *coordinationv1.Lease {
	t.Helper()
	l := &coordinationv1.Lease{}
	err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: medik8s.LeaseNamespace, Name: "node-" + node}, l)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestTheNodesLeaseIsHeldAndTaintedAsMedik8sDoes: while pitstop maintains
// a node for a medik8s object it holds the node's Lease in medik8s-leases
// as the Node Maintenance Operator does (holder node-maintenance, one
// hour, owned by the Node) and the node carries medik8s.io/drain beside
// pitstop's taint; once the object is deleted and the node restored, the
// Lease is gone, and so is the taint.
func TestTheNodesLeaseIsHeldAndTaintedAsMedik8sDoes(t *testing.T) {
	startManager(t)
	testutil.Kubelet(t, env.Clientset)
	create(t, testutil.Node("leased-1"))
	create(t, medik8sNM("leased", "leased-1", "firmware"))
	obj := awaitPhase(t, "leased", "Succeeded", 20*time.Second)

	l := getLease(t, "leased-1")
	n := node(t, "leased-1")
	if l == nil || ptr.Deref(l.Spec.HolderIdentity, "") != medik8s.LeaseHolder || ptr.Deref(l.Spec.LeaseDurationSeconds, 0) != 3600 ||
		l.Spec.AcquireTime == nil || l.Spec.RenewTime == nil || len(l.OwnerReferences) != 1 || l.OwnerReferences[0].Kind != "Node" || l.OwnerReferences[0].UID != n.UID {
		t.Fatalf("Lease %+v, want node-maintenance's for an hour, owned by the Node", l)
	}
	if !hasTaint(n, "medik8s.io/drain") || !hasTaint(n, pitstopv1alpha1.TaintDrain) {
		t.Errorf("taints %v, want medik8s.io/drain and %s", n.Spec.Taints, pitstopv1alpha1.TaintDrain)
	}

	if err := env.Client.Delete(t.Context(), obj); err != nil {
		t.Fatal(err)
	}
	awaitGone(t, obj, 20*time.Second)
	if l := getLease(t, "leased-1"); l != nil {
		t.Errorf("Lease %+v left after the maintenance ended", l)
	}
	n = node(t, "leased-1")
	if n.Spec.Unschedulable || hasTaint(n, "medik8s.io/drain") {
		t.Errorf("node not restored: unschedulable %v, taints %v", n.Spec.Unschedulable, n.Spec.Taints)
	}
}

// TestALeaseHeldByAnotherComponentHoldsTheMaintenanceBack: a node whose
// Lease Node Health Check holds (a remediation under way) is not touched:
// the object says what it waits for (Running, never Failed), a Warning
// Event says it once, no pitstop NodeMaintenance is made. Once the Lease
// is released, the maintenance runs and holds it.
func TestALeaseHeldByAnotherComponentHoldsTheMaintenanceBack(t *testing.T) {
	startManager(t)
	testutil.Kubelet(t, env.Clientset)
	create(t, testutil.Node("remediated-1"))
	if err := env.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: medik8s.LeaseNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	now := metav1.NewMicroTime(time.Now())
	other := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: medik8s.LeaseNamespace, Name: "node-remediated-1"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("node-healthcheck"), LeaseDurationSeconds: ptr.To[int32](3600),
			AcquireTime: &now, RenewTime: &now},
	}
	create(t, other)
	create(t, medik8sNM("remediated", "remediated-1", "upgrade"))

	testutil.Eventually(t, 10*time.Second, 50*time.Millisecond, func() error {
		obj := getMedik8s(t, "remediated")
		if phase, msg := str(obj, "status", "phase"), str(obj, "status", "lastError"); phase != "Running" ||
			!strings.Contains(msg, "waiting for the Lease medik8s-leases/node-remediated-1 is held by node-healthcheck") {
			return fmt.Errorf("phase %q, lastError %q", phase, msg)
		}
		return nil
	})
	awaitEvents(t, "remediated", medik8s.EventLeaseHeld)
	time.Sleep(time.Second)
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: "medik8s-remediated"}, &pitstopv1alpha1.NodeMaintenance{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a pitstop NodeMaintenance while another holds the Lease: %v", err)
	}
	if n := node(t, "remediated-1"); n.Spec.Unschedulable {
		t.Fatal("the node was cordoned while another component held its Lease")
	}

	if err := env.Client.Delete(t.Context(), other); err != nil {
		t.Fatal(err)
	}
	awaitPhase(t, "remediated", "Succeeded", 30*time.Second)
	if l := getLease(t, "remediated-1"); l == nil || ptr.Deref(l.Spec.HolderIdentity, "") != medik8s.LeaseHolder {
		t.Errorf("Lease %+v, want pitstop's once released", l)
	}
}

// TestALostLeaseFailsTheMaintenanceAndRestoresTheNode: as with the medik8s
// operator, a count of failed attempts at the Lease that operator left is
// taken over, and a Lease held resets it; once the maintenance has started,
// a Lease another component took counts as a failed attempt each time, and
// past 3 the maintenance fails: the node is restored (uncordoned,
// untainted, and an UncordonNode Event says so), the object is Failed with
// that operator's lastError, and the other component's Lease is left as it
// is, and does not hold up the object's deletion.
func TestALostLeaseFailsTheMaintenanceAndRestoresTheNode(t *testing.T) {
	startManager(t)
	testutil.Kubelet(t, env.Clientset)
	create(t, testutil.Node("lost-1"))
	obj := medik8sNM("lost", "lost-1", "firmware")
	create(t, obj)
	awaitPhase(t, "lost", "Succeeded", 20*time.Second)

	// A count the medik8s operator left is reset once the Lease is held.
	patch := []byte(`{"status":{"errorOnLeaseCount":2}}`)
	if err := env.Client.Status().Patch(t.Context(), obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, 50*time.Millisecond, func() error {
		if n := num(getMedik8s(t, "lost"), "status", "errorOnLeaseCount"); n != 0 {
			return fmt.Errorf("errorOnLeaseCount %d, want 0 once the Lease is held", n)
		}
		return nil
	})

	// Node Health Check takes the Lease (as it may once it has expired).
	l := getLease(t, "lost-1")
	if l == nil {
		t.Fatal("no Lease for node lost-1 while its maintenance runs")
	}
	now := metav1.NewMicroTime(time.Now())
	l.Spec.HolderIdentity, l.Spec.AcquireTime, l.Spec.RenewTime = ptr.To("node-healthcheck"), &now, &now
	if err := env.Client.Update(t.Context(), l); err != nil {
		t.Fatal(err)
	}
	// Nothing watches the Lease: a change of the object makes pitstop look.
	patch = []byte(`{"metadata":{"annotations":{"test.pitstop.dev/look":"now"}}}`)
	if err := env.Client.Patch(t.Context(), obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	got := awaitPhase(t, "lost", "Failed", 30*time.Second)
	if msg := str(got, "status", "lastError"); msg != "maintenance failed: lease could not be extended after 4 attempts" {
		t.Errorf("lastError %q, want the medik8s operator's", msg)
	}
	if n := num(got, "status", "errorOnLeaseCount"); n != 4 {
		t.Errorf("errorOnLeaseCount %d, want 4", n)
	}
	n := node(t, "lost-1")
	if n.Spec.Unschedulable || hasTaint(n, "medik8s.io/drain") || hasTaint(n, pitstopv1alpha1.TaintDrain) || hasTaint(n, corev1.TaintNodeUnschedulable) {
		t.Errorf("node not restored: unschedulable %v, taints %v", n.Spec.Unschedulable, n.Spec.Taints)
	}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: "medik8s-lost"}, &pitstopv1alpha1.NodeMaintenance{}); !apierrors.IsNotFound(err) {
		t.Errorf("pitstop NodeMaintenance of a maintenance that lost its Lease: %v, want none", err)
	}
	if l := getLease(t, "lost-1"); l == nil || ptr.Deref(l.Spec.HolderIdentity, "") != "node-healthcheck" {
		t.Errorf("Lease %+v, want Node Health Check's, untouched", l)
	}
	awaitEvents(t, "lost", medik8s.EventFailedMaintenance)
	awaitEventsOf(t, "v1", "lost-1", medik8s.EventUncordonNode)

	if err := env.Client.Delete(t.Context(), obj); err != nil {
		t.Fatal(err)
	}
	awaitGone(t, obj, 20*time.Second)
	if l := getLease(t, "lost-1"); l == nil || ptr.Deref(l.Spec.HolderIdentity, "") != "node-healthcheck" {
		t.Errorf("Lease %+v after the deletion, want Node Health Check's, untouched", l)
	}
}

// TestTheLeasesAreInTheConfiguredNamespace: with another Lease namespace
// (the medik8s components' LEASE_NAMESPACE, --medik8s-lease-namespace),
// pitstop creates that namespace, holds the node's Lease there and not in
// medik8s-leases, and gives it up there at the end. The manager runs as
// the cluster's admin: the chart's Role is in its default namespace.
func TestTheLeasesAreInTheConfiguredNamespace(t *testing.T) {
	const ns = "remediation-leases"
	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{
		Medik8sCompat: true,
		Tune:          func(o *manager.Options) { o.Medik8sLeaseNamespace = ns },
	})
	testutil.Kubelet(t, env.Clientset)
	create(t, testutil.Node("elsewhere-1"))
	obj := medik8sNM("elsewhere", "elsewhere-1", "")
	create(t, obj)
	awaitPhase(t, "elsewhere", "Succeeded", 20*time.Second)

	l := &coordinationv1.Lease{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "node-elsewhere-1"}, l); err != nil {
		t.Fatalf("the Lease in %s: %v", ns, err)
	}
	if ptr.Deref(l.Spec.HolderIdentity, "") != medik8s.LeaseHolder {
		t.Errorf("Lease %s/node-elsewhere-1 held by %q, want %s", ns, ptr.Deref(l.Spec.HolderIdentity, ""), medik8s.LeaseHolder)
	}
	if l := getLease(t, "elsewhere-1"); l != nil {
		t.Errorf("a Lease in %s too: %+v", medik8s.LeaseNamespace, l)
	}

	if err := env.Client.Delete(t.Context(), obj); err != nil {
		t.Fatal(err)
	}
	awaitGone(t, obj, 20*time.Second)
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "node-elsewhere-1"}, l); !apierrors.IsNotFound(err) {
		t.Errorf("the Lease in %s after the maintenance ended: %v, want none", ns, err)
	}
}
