package medik8s_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/controller/medik8s"
	"github.com/pitstop-dev/pitstop/internal/manager"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// TestMaintainsThroughPitstopAndRestoresOnDelete is the whole life of a
// medik8s NodeMaintenance: pitstop's NodeMaintenance is created for it and
// drains the node, its status comes back under medik8s' names, and deleting
// the medik8s object restores the node before the object goes.
func TestMaintainsThroughPitstopAndRestoresOnDelete(t *testing.T) {
	startManager(t)
	testutil.Kubelet(t, env.Clientset)
	ns := namespace(t, "upgrade")
	create(t, testutil.Node("upgrade-1"))
	agent := testutil.Pod(ns, "agent", testutil.OnNode("upgrade-1"), testutil.OwnedBy("DaemonSet", "agent"))
	create(t, agent)
	awaitRunning(t, agent)
	managedPods(t, ns, "upgrade-1", "web", 3)

	create(t, medik8sNM("upgrade", "upgrade-1", "kernel upgrade"))
	obj := awaitPhase(t, "upgrade", "Succeeded", 20*time.Second)

	if got := num(obj, "status", "drainProgress"); got != 100 {
		t.Errorf("drainProgress %d, want 100", got)
	}
	if total, eviction := num(obj, "status", "totalpods"), num(obj, "status", "evictionPods"); total != 4 || eviction != 3 {
		t.Errorf("totalpods %d evictionPods %d, want 4 and 3 (3 web pods and the DaemonSet pod, which stays)", total, eviction)
	}
	if str(obj, "status", "lastUpdate") == "" {
		t.Error("lastUpdate not set")
	}
	if pending, found, _ := unstructured.NestedSlice(obj.Object, "status", "pendingPods"); found || str(obj, "status", "lastError") != "" {
		t.Errorf("pendingPods %v lastError %q after success, want none", pending, str(obj, "status", "lastError"))
	}
	if !slices.Contains(obj.GetFinalizers(), medik8s.Finalizer) {
		t.Errorf("finalizers %v, want %s", obj.GetFinalizers(), medik8s.Finalizer)
	}

	nm := &pitstopv1alpha1.NodeMaintenance{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: "medik8s-upgrade"}, nm); err != nil {
		t.Fatal(err)
	}
	if nm.Spec.NodeName != "upgrade-1" || nm.Spec.Reason != "kernel upgrade" || nm.Labels[pitstopv1alpha1.LabelSource] != medik8s.SourceMedik8s {
		t.Errorf("pitstop NodeMaintenance spec %+v labels %v, want node upgrade-1, the reason and the source label", nm.Spec, nm.Labels)
	}
	if nm.Spec.Drain.UnmanagedPods != pitstopv1alpha1.UnmanagedPodsDelete {
		t.Errorf("unmanagedPods %s, want Delete as medik8s' forced drain", nm.Spec.Drain.UnmanagedPods)
	}
	if refs := nm.OwnerReferences; len(refs) != 1 || refs[0].UID != obj.GetUID() || refs[0].Kind != "NodeMaintenance" ||
		refs[0].APIVersion != "nodemaintenance.medik8s.io/v1beta1" || !*refs[0].Controller || !*refs[0].BlockOwnerDeletion {
		t.Errorf("owner references %+v, want the medik8s object as controller, blocking its deletion", refs)
	}
	n := node(t, "upgrade-1")
	if !n.Spec.Unschedulable || !hasTaint(n, pitstopv1alpha1.TaintDrain) {
		t.Errorf("node not cordoned: unschedulable=%v taints=%v", n.Spec.Unschedulable, n.Spec.Taints)
	}
	if left := podsOn(t, ns, "upgrade-1"); !slices.Equal(left, []string{"agent"}) {
		t.Errorf("pods left on the node: %v, want the DaemonSet pod", left)
	}
	awaitEvents(t, "upgrade", medik8s.EventBeginMaintenance, medik8s.EventSucceedMaintenance)

	// medik8s lets the reason change; pitstop's follows.
	if err := unstructured.SetNestedField(obj.Object, "firmware", "spec", "reason"); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Update(t.Context(), obj); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, 50*time.Millisecond, func() error {
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(nm), nm); err != nil {
			return err
		}
		if nm.Spec.Reason != "firmware" {
			return fmt.Errorf("pitstop reason %q, want firmware", nm.Spec.Reason)
		}
		return nil
	})

	// A finalizer of the test's own holds pitstop's object after pitstop has
	// restored the node, so that the medik8s object can be seen waiting.
	const hold = "test.pitstop.dev/hold"
	testutil.Eventually(t, 5*time.Second, 20*time.Millisecond, func() error {
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(nm), nm); err != nil {
			return err
		}
		nm.Finalizers = append(nm.Finalizers, hold)
		return env.Client.Update(t.Context(), nm)
	})
	if err := env.Client.Delete(t.Context(), obj); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, 50*time.Millisecond, func() error {
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(nm), nm); err != nil {
			return err
		}
		if nm.DeletionTimestamp.IsZero() || !slices.Equal(nm.Finalizers, []string{hold}) {
			return fmt.Errorf("pitstop NodeMaintenance deletion %v finalizers %v, want deleted and released by pitstop", nm.DeletionTimestamp, nm.Finalizers)
		}
		return nil
	})
	n = node(t, "upgrade-1")
	if n.Spec.Unschedulable || hasTaint(n, pitstopv1alpha1.TaintDrain) || hasTaint(n, corev1.TaintNodeUnschedulable) {
		t.Errorf("node not restored: unschedulable=%v taints=%v", n.Spec.Unschedulable, n.Spec.Taints)
	}
	if waiting := getMedik8s(t, "upgrade"); !slices.Contains(waiting.GetFinalizers(), medik8s.Finalizer) {
		t.Fatalf("medik8s NodeMaintenance let go of %s while pitstop's still exists", medik8s.Finalizer)
	}

	nm.Finalizers = nil
	if err := env.Client.Update(t.Context(), nm); err != nil {
		t.Fatal(err)
	}
	awaitGone(t, obj, 20*time.Second)
	awaitEvents(t, "upgrade", medik8s.EventRemovedMaintenance)
}

// TestReportsABlockedDrainAsMedik8sDoes: while a budget refuses the
// evictions the medik8s object is Running with the pods pending, by name
// and by reference, and the budget in lastError; once it allows them the
// object succeeds and the lists are cleared.
func TestReportsABlockedDrainAsMedik8sDoes(t *testing.T) {
	startManager(t)
	testutil.Kubelet(t, env.Clientset)
	ns := namespace(t, "blocked")
	create(t, testutil.Node("blocked-1"))
	managedPods(t, ns, "blocked-1", "web", 2)
	budget := pdb(t, ns, "web", 0)

	create(t, medik8sNM("blocked", "blocked-1", ""))
	var obj *unstructured.Unstructured
	testutil.Eventually(t, 10*time.Second, 50*time.Millisecond, func() error {
		obj = getMedik8s(t, "blocked")
		if !strings.Contains(str(obj, "status", "lastError"), "PodDisruptionBudget blocked/web") {
			return fmt.Errorf("status %v, want lastError naming the budget", obj.Object["status"])
		}
		return nil
	})
	if phase := str(obj, "status", "phase"); phase != "Running" {
		t.Errorf("phase %s, want Running", phase)
	}
	pending, _, _ := unstructured.NestedStringSlice(obj.Object, "status", "pendingPods")
	slices.Sort(pending)
	if !slices.Equal(pending, []string{"web-0", "web-1"}) {
		t.Errorf("pendingPods %v, want web-0 and web-1", pending)
	}
	refs, _, _ := unstructured.NestedSlice(obj.Object, "status", "pendingPodsRefs")
	var refNames []string
	for _, r := range refs {
		m := r.(map[string]any)
		refNames = append(refNames, fmt.Sprintf("%s/%s", m["namespace"], m["name"]))
	}
	slices.Sort(refNames)
	if !slices.Equal(refNames, []string{"blocked/web-0", "blocked/web-1"}) {
		t.Errorf("pendingPodsRefs %v, want blocked/web-0 and blocked/web-1", refs)
	}
	if progress, eviction := num(obj, "status", "drainProgress"), num(obj, "status", "evictionPods"); progress != 0 || eviction != 2 {
		t.Errorf("drainProgress %d evictionPods %d, want 0 and 2", progress, eviction)
	}

	setAllowed(t, budget, 5)
	obj = awaitPhase(t, "blocked", "Succeeded", 15*time.Second)
	if _, found, _ := unstructured.NestedFieldNoCopy(obj.Object, "status", "pendingPodsRefs"); found || str(obj, "status", "lastError") != "" {
		t.Errorf("status %v after success, want no pending pods and no lastError", obj.Object["status"])
	}
}

// TestMissingNodeFails: as with medik8s, maintenance of a node that does not
// exist fails with the node named in lastError, and the object can still be
// deleted.
func TestMissingNodeFails(t *testing.T) {
	startManager(t)
	obj := medik8sNM("ghost", "ghost-1", "test")
	create(t, obj)
	got := awaitPhase(t, "ghost", "Failed", 10*time.Second)
	if msg := str(got, "status", "lastError"); !strings.Contains(msg, "ghost-1") {
		t.Errorf("lastError %q does not name the node", msg)
	}
	awaitEvents(t, "ghost", medik8s.EventFailedMaintenance)

	// Failed is final: the node appearing later does not start it.
	create(t, testutil.Node("ghost-1"))
	time.Sleep(2 * time.Second)
	if got := getMedik8s(t, "ghost"); str(got, "status", "phase") != "Failed" {
		t.Fatalf("phase %q after the node appeared, want still Failed", str(got, "status", "phase"))
	}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: "medik8s-ghost"}, &pitstopv1alpha1.NodeMaintenance{}); !apierrors.IsNotFound(err) {
		t.Fatalf("pitstop NodeMaintenance of a failed maintenance: %v, want none", err)
	}
	if n := node(t, "ghost-1"); n.Spec.Unschedulable {
		t.Fatal("a failed maintenance cordoned the node")
	}
	// A change of the spec is a new try.
	testutil.Eventually(t, 10*time.Second, 50*time.Millisecond, func() error {
		obj := getMedik8s(t, "ghost")
		if err := unstructured.SetNestedField(obj.Object, "test again", "spec", "reason"); err != nil {
			return err
		}
		return env.Client.Update(t.Context(), obj)
	})
	awaitPhase(t, "ghost", "Succeeded", 20*time.Second)

	if err := env.Client.Delete(t.Context(), obj); err != nil {
		t.Fatal(err)
	}
	awaitGone(t, obj, 10*time.Second)
	err := env.Client.Get(t.Context(), client.ObjectKey{Name: "medik8s-ghost"}, &pitstopv1alpha1.NodeMaintenance{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("pitstop NodeMaintenance outlived the medik8s one: %v", err)
	}
}

// TestRefusedMaintenanceFails: when pitstop's NodeMaintenance cannot be
// created, the refusal is the medik8s object's lastError. The object here
// already carries medik8s' finalizer, as one created while the medik8s
// operator ran would.
func TestRefusedMaintenanceFails(t *testing.T) {
	startManager(t)
	obj := medik8sNM("refused", "", "") // medik8s' schema allows an empty nodeName, pitstop's does not
	obj.SetFinalizers([]string{medik8s.Finalizer})
	create(t, obj)
	got := awaitPhase(t, "refused", "Failed", 10*time.Second)
	if msg := str(got, "status", "lastError"); !strings.Contains(msg, "spec.nodeName") {
		t.Errorf("lastError %q does not carry the API server's refusal", msg)
	}
	err := env.Client.Get(t.Context(), client.ObjectKey{Name: "medik8s-refused"}, &pitstopv1alpha1.NodeMaintenance{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("pitstop NodeMaintenance: %v, want none", err)
	}

	if err := env.Client.Delete(t.Context(), obj); err != nil {
		t.Fatal(err)
	}
	awaitGone(t, obj, 10*time.Second)
}

// TestSetupFailsWithoutTheCRD: --medik8s-compat against an API server that
// does not serve medik8s' API stops the manager from starting, with an
// error naming the CRD and the flag.
func TestSetupFailsWithoutTheCRD(t *testing.T) {
	bare, err := testutil.StartEnv()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := bare.Stop(); err != nil {
			t.Error(err)
		}
	})
	opts := manager.DefaultOptions()
	opts.MetricsAddr, opts.HealthAddr = "0", "0"
	opts.LeaderElection = false
	opts.Webhook.Port = 0
	opts.Medik8sCompat = true
	_, err = manager.New(t.Context(), bare.Config, opts, testr.New(t))
	if !errors.Is(err, medik8s.ErrCRDNotInstalled) {
		t.Fatalf("error %v, want ErrCRDNotInstalled", err)
	}
	for _, want := range []string{medik8s.CRDName, "--medik8s-compat", "kubectl apply -f config/crd/medik8s/"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

// TestTheNodeOwnsItsMedik8sNodeMaintenance: as the medik8s operator does,
// pitstop makes the Node an owner of its medik8s NodeMaintenance, neither
// controller nor blocking the Node's deletion, so that the garbage
// collector deletes the maintenance with the Node. (envtest runs no garbage
// collector: this checks the reference, by the Node's UID, not the
// collection.)
func TestTheNodeOwnsItsMedik8sNodeMaintenance(t *testing.T) {
	startManager(t)
	testutil.Kubelet(t, env.Clientset)
	create(t, testutil.Node("owned-1"))
	create(t, medik8sNM("owned", "owned-1", ""))
	obj := awaitPhase(t, "owned", "Succeeded", 20*time.Second)

	n := node(t, "owned-1")
	refs := obj.GetOwnerReferences()
	if len(refs) != 1 || refs[0].APIVersion != "v1" || refs[0].Kind != "Node" || refs[0].Name != "owned-1" || refs[0].UID != n.UID ||
		refs[0].Controller == nil || *refs[0].Controller || refs[0].BlockOwnerDeletion == nil || *refs[0].BlockOwnerDeletion {
		t.Errorf("owner references %+v, want the Node owned-1 (UID %s), not controller, not blocking its deletion", refs, n.UID)
	}
}

// TestTheNodeIsToldWhenItIsUncordoned: when a maintenance ends and its node
// takes pods again, an UncordonNode Event on the Node says so, as the
// medik8s operator's does; a node that stays cordoned, because someone
// else had cordoned it before the maintenance, gets none.
func TestTheNodeIsToldWhenItIsUncordoned(t *testing.T) {
	startManager(t)
	testutil.Kubelet(t, env.Clientset)
	create(t, testutil.Node("uncordoned-1"), testutil.Node("kept-cordoned-1", testutil.Unschedulable()))
	back, kept := medik8sNM("uncordoned", "uncordoned-1", ""), medik8sNM("kept-cordoned", "kept-cordoned-1", "")
	create(t, back, kept)
	awaitPhase(t, "uncordoned", "Succeeded", 20*time.Second)
	awaitPhase(t, "kept-cordoned", "Succeeded", 20*time.Second)

	for _, obj := range []*unstructured.Unstructured{back, kept} {
		if err := env.Client.Delete(t.Context(), obj); err != nil {
			t.Fatal(err)
		}
		awaitGone(t, obj, 20*time.Second)
	}
	if n := node(t, "uncordoned-1"); n.Spec.Unschedulable {
		t.Fatal("node uncordoned-1 not uncordoned")
	}
	awaitEventsOf(t, "v1", "uncordoned-1", medik8s.EventUncordonNode)
	// Emitted just before RemovedMaintenance (each is sent on its own):
	// an UncordonNode for the node kept cordoned would be there within a
	// moment of that.
	awaitEvents(t, "kept-cordoned", medik8s.EventRemovedMaintenance)
	time.Sleep(time.Second)
	if n := node(t, "kept-cordoned-1"); !n.Spec.Unschedulable {
		t.Fatal("node kept-cordoned-1, cordoned before the maintenance, was uncordoned")
	}
	if reasons := eventReasons(t, "v1", "kept-cordoned-1"); slices.Contains(reasons, medik8s.EventUncordonNode) {
		t.Errorf("Events of node kept-cordoned-1 %v: UncordonNode for a node that stays cordoned", reasons)
	}
}
