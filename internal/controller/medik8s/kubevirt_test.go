package medik8s_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/controller/medik8s"
	"github.com/pitstop-dev/pitstop/internal/testutil"
	"github.com/pitstop-dev/pitstop/internal/testutil/clustertest"
)

// kubevirtNM builds a kubevirt.io/v1alpha3 NodeMaintenance as the medik8s
// operator's README shows it: named after its node, in a namespace.
func kubevirtNM(ns, node, reason string) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"reason": reason}}}
	obj.SetGroupVersionKind(medik8s.KubevirtGroupVersionKind)
	obj.SetNamespace(ns)
	obj.SetName(node)
	return obj
}

// awaitKubevirtPhase waits until the kubevirt.io NodeMaintenance reports
// phase and returns it as it was then.
func awaitKubevirtPhase(t *testing.T, ns, name, phase string, timeout time.Duration) *unstructured.Unstructured {
	t.Helper()
	var obj *unstructured.Unstructured
	testutil.Eventually(t, timeout, 50*time.Millisecond, func() error {
		obj = kubevirtNM(ns, name, "")
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		if got := str(obj, "status", "phase"); got != phase {
			return fmt.Errorf("kubevirt.io NodeMaintenance %s/%s status %v, want phase %s", ns, name, obj.Object["status"], phase)
		}
		return nil
	})
	return obj
}

// TestTheKubevirtNodeMaintenanceOfTheREADME: the medik8s operator's README
// example, a kubevirt.io/v1alpha3 NodeMaintenance named after its node,
// maintains that node as a medik8s one does: pitstop's NodeMaintenance
// drains it, the Lease is held and the medik8s taint set, status and
// Events come back under medik8s' names, and deleting the object restores
// the node before it goes.
func TestTheKubevirtNodeMaintenanceOfTheREADME(t *testing.T) {
	startManager(t)
	testutil.Kubelet(t, env.Clientset)
	ns := namespace(t, "kubevirt")
	create(t, testutil.Node("kv-node02"))
	managedPods(t, ns, "kv-node02", "web", 2)

	obj := kubevirtNM(ns, "kv-node02", "Test node maintenance")
	create(t, obj)
	got := awaitKubevirtPhase(t, ns, "kv-node02", "Succeeded", 20*time.Second)
	if progress, eviction := num(got, "status", "drainProgress"), num(got, "status", "evictionPods"); progress != 100 || eviction != 2 {
		t.Errorf("drainProgress %d evictionPods %d, want 100 and 2", progress, eviction)
	}
	if !slices.Contains(got.GetFinalizers(), medik8s.Finalizer) {
		t.Errorf("finalizers %v, want %s", got.GetFinalizers(), medik8s.Finalizer)
	}

	nm := &pitstopv1alpha1.NodeMaintenance{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: "kubevirt-" + ns + ".kv-node02"}, nm); err != nil {
		t.Fatal(err)
	}
	if nm.Spec.NodeName != "kv-node02" || nm.Spec.Reason != "Test node maintenance" || nm.Labels[pitstopv1alpha1.LabelSource] != pitstopv1alpha1.SourceKubevirt ||
		nm.Annotations[pitstopv1alpha1.AnnotationOwner] != ns+"/kv-node02" || nm.Annotations[pitstopv1alpha1.AnnotationOwnerUID] != string(got.GetUID()) {
		t.Errorf("pitstop NodeMaintenance spec %+v labels %v annotations %v, want the node, the reason, the source and the owner", nm.Spec, nm.Labels, nm.Annotations)
	}
	if len(nm.OwnerReferences) != 0 {
		t.Errorf("owner references %+v: a namespaced object cannot own a cluster-scoped one (the garbage collector would delete it)", nm.OwnerReferences)
	}
	n := node(t, "kv-node02")
	if refs := got.GetOwnerReferences(); len(refs) != 1 || refs[0].Kind != "Node" || refs[0].Name != "kv-node02" || refs[0].UID != n.UID {
		t.Errorf("owner references %+v, want the Node kv-node02 (UID %s), as a v1beta1 one's", refs, n.UID)
	}
	if !n.Spec.Unschedulable || !hasTaint(n, pitstopv1alpha1.TaintDrain) || !hasTaint(n, "medik8s.io/drain") {
		t.Errorf("node not cordoned as medik8s does: unschedulable=%v taints=%v", n.Spec.Unschedulable, n.Spec.Taints)
	}
	if left := podsOn(t, ns, "kv-node02"); len(left) != 0 {
		t.Errorf("pods left on the node: %v", left)
	}
	if l := getLease(t, "kv-node02"); l == nil || ptr.Deref(l.Spec.HolderIdentity, "") != medik8s.LeaseHolder {
		t.Errorf("Lease %+v, want node-maintenance's", l)
	}
	apiVersion := medik8s.KubevirtGroupVersionKind.GroupVersion().String()
	awaitEventsOf(t, apiVersion, "kv-node02", medik8s.EventBeginMaintenance, medik8s.EventSucceedMaintenance)

	if err := env.Client.Delete(t.Context(), obj); err != nil {
		t.Fatal(err)
	}
	awaitGone(t, obj, 20*time.Second)
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(nm), nm); !apierrors.IsNotFound(err) {
		t.Errorf("pitstop NodeMaintenance outlived the kubevirt.io one: %v", err)
	}
	n = node(t, "kv-node02")
	if n.Spec.Unschedulable || hasTaint(n, "medik8s.io/drain") || hasTaint(n, pitstopv1alpha1.TaintDrain) {
		t.Errorf("node not restored: unschedulable=%v taints=%v", n.Spec.Unschedulable, n.Spec.Taints)
	}
	if l := getLease(t, "kv-node02"); l != nil {
		t.Errorf("Lease %+v left after the maintenance ended", l)
	}
	awaitEventsOf(t, apiVersion, "kv-node02", medik8s.EventRemovedMaintenance)
	awaitEventsOf(t, "v1", "kv-node02", medik8s.EventUncordonNode)
}

// TestAKubevirtNodeMaintenanceGoneWithoutItsFinalizer: when someone removes
// pitstop's finalizer and the object goes, pitstop's NodeMaintenance (which
// the garbage collector cannot tie to a namespaced owner) is deleted and
// the node restored all the same; one that belongs to another object of
// the same name is left alone.
func TestAKubevirtNodeMaintenanceGoneWithoutItsFinalizer(t *testing.T) {
	startManager(t)
	testutil.Kubelet(t, env.Clientset)
	ns := namespace(t, "kvorphan")
	create(t, testutil.Node("kv-orphan-1"))
	obj := kubevirtNM(ns, "kv-orphan-1", "")
	create(t, obj)
	awaitKubevirtPhase(t, ns, "kv-orphan-1", "Succeeded", 20*time.Second)

	patch := []byte(`{"metadata":{"finalizers":null}}`)
	if err := env.Client.Patch(t.Context(), obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(t.Context(), obj); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	awaitGone(t, &pitstopv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt-" + ns + ".kv-orphan-1"}}, 20*time.Second)
	testutil.Eventually(t, 20*time.Second, 50*time.Millisecond, func() error {
		if n := node(t, "kv-orphan-1"); n.Spec.Unschedulable || hasTaint(n, "medik8s.io/drain") {
			return fmt.Errorf("node not restored: unschedulable=%v taints=%v", n.Spec.Unschedulable, n.Spec.Taints)
		}
		return nil
	})
}

// TestKubevirtAdmissionRefusesAsTheMedik8sOperator: with the webhook, a
// kubevirt.io NodeMaintenance of a missing node is refused, and so is one
// for a node a medik8s NodeMaintenance already maintains, and the other
// way round, with the medik8s operator's messages.
func TestKubevirtAdmissionRefusesAsTheMedik8sOperator(t *testing.T) {
	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{Medik8sCompat: true, Webhook: true, AsServiceAccount: true})
	testutil.Kubelet(t, env.Clientset)
	ns := namespace(t, "kvadmit")
	create(t, testutil.Node("kv-admit-1"), testutil.Node("kv-admit-2"))

	refused := func(obj *unstructured.Unstructured, want string) {
		t.Helper()
		err := env.Client.Create(t.Context(), obj)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("creating %s %s: %v, want a refusal saying %q", obj.GetAPIVersion(), obj.GetName(), err, want)
		}
	}
	refused(kubevirtNM(ns, "kv-admit-nowhere", ""), "invalid nodeName, no node with name kv-admit-nowhere found")

	create(t, medik8sNM("kv-admit-first", "kv-admit-1", ""))
	refused(kubevirtNM(ns, "kv-admit-1", ""), "invalid nodeName, a NodeMaintenance for node kv-admit-1 already exists")

	create(t, kubevirtNM(ns, "kv-admit-2", ""))
	refused(medik8sNM("kv-admit-second", "kv-admit-2", ""), "invalid nodeName, a NodeMaintenance for node kv-admit-2 already exists")
	other := namespace(t, "kvadmit-other")
	refused(kubevirtNM(other, "kv-admit-2", ""), "invalid nodeName, a NodeMaintenance for node kv-admit-2 already exists")

	// The reason may change; the node (the name) cannot.
	testutil.Eventually(t, 10*time.Second, 50*time.Millisecond, func() error {
		obj := kubevirtNM(ns, "kv-admit-2", "")
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		if err := unstructured.SetNestedField(obj.Object, "firmware", "spec", "reason"); err != nil {
			return err
		}
		return env.Client.Update(t.Context(), obj)
	})
	obj := kubevirtNM(ns, "kv-admit-2", "")
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatal(err)
	}
	if got := str(obj, "spec", "reason"); got != "firmware" {
		t.Errorf("reason %q, want firmware", got)
	}
}
