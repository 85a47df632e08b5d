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
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/controller/medik8s"
	"github.com/pitstop-dev/pitstop/internal/testutil"
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
