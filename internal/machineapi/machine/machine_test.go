package machine_test

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/machineapi"
	"github.com/pitstop-dev/pitstop/internal/machineapi/machine"
	"github.com/pitstop-dev/pitstop/internal/machineapi/provider/kwok"
	"github.com/pitstop-dev/pitstop/internal/manager"
	"github.com/pitstop-dev/pitstop/internal/scheme"
	"github.com/pitstop-dev/pitstop/internal/testutil"
	"github.com/pitstop-dev/pitstop/internal/testutil/clustertest"
)

func TestAMachineGetsAKwokInstanceAndRunsOnceNodelinkLinksItsNode(t *testing.T) {
	startManager(t)
	ns := testutil.Namespace(t, env.Client, "machine-run")
	testutil.Create(t, env.Client, kwokMachine(ns, "run-0", `"zone": "zone-a", "region": "local", "instanceType": "kwok.large"`))

	m := awaitPhase(t, ns, "run-0", machinev1beta1.PhaseRunning)
	if got := ptr.Deref(m.Spec.ProviderID, ""); got != "kwok://run-0" {
		t.Errorf("providerID %q, want kwok://run-0", got)
	}
	if !controllerutil.ContainsFinalizer(m, machine.Finalizer) {
		t.Errorf("finalizers %v lack %s", m.Finalizers, machine.Finalizer)
	}
	for key, want := range map[string]string{machineapi.LabelZone: "zone-a", machineapi.LabelRegion: "local", machineapi.LabelInstanceType: "kwok.large"} {
		if m.Labels[key] != want {
			t.Errorf("label %s = %q, want %q", key, m.Labels[key], want)
		}
	}
	if got := m.Annotations[machineapi.AnnotationInstanceState]; got != "running" {
		t.Errorf("instance state %q, want running", got)
	}
	if c := condition(m, machinev1beta1.InstanceExistsCondition); c.Status != corev1.ConditionTrue {
		t.Errorf("InstanceExists %+v, want True", c)
	}
	if m.Status.ProviderStatus == nil || !strings.Contains(string(m.Status.ProviderStatus.Raw), `"nodeName":"run-0"`) {
		t.Errorf("providerStatus %v does not name the node", m.Status.ProviderStatus)
	}
	node := testutil.GetNode(t, env.Client, "run-0")
	if node.Spec.ProviderID != "kwok://run-0" || node.Labels[corev1.LabelTopologyZone] != "zone-a" || node.Labels[corev1.LabelInstanceTypeStable] != "kwok.large" {
		t.Errorf("node providerID %q labels %v", node.Spec.ProviderID, node.Labels)
	}
	var ip string
	for _, a := range m.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			ip = a.Address
		}
	}
	if addr, err := netip.ParseAddr(ip); err != nil || !netip.MustParsePrefix("10.0.0.0/10").Contains(addr) {
		t.Errorf("machine internal IP %q is not in the kwok machines' range", ip)
	}
	if ref := m.Status.NodeRef; ref == nil || ref.Name != "run-0" || ref.UID != node.UID {
		t.Errorf("nodeRef %+v, want node run-0 (%s), linked by nodelink", ref, node.UID)
	}
	if m.Status.LastUpdated == nil {
		t.Error("status.lastUpdated not set with the phase")
	}
}

func TestDeletionWaitsForTheHooksDrainsThroughANodeMaintenanceAndRemovesInstanceAndNode(t *testing.T) {
	startManager(t)
	testutil.Kubelet(t, env.Clientset)
	ns := testutil.Namespace(t, env.Client, "machine-delete")
	m := kwokMachine(ns, "del-0", `"deleteDelay": "1s"`)
	m.Spec.LifecycleHooks = machinev1beta1.LifecycleHooks{
		PreDrain:     []machinev1beta1.LifecycleHook{{Name: "backup", Owner: "team-a"}},
		PreTerminate: []machinev1beta1.LifecycleHook{{Name: "detach", Owner: "storage"}},
	}
	testutil.Create(t, env.Client, m)
	m = awaitPhase(t, ns, "del-0", machinev1beta1.PhaseRunning)
	testutil.ManagedPods(t, env.Client, ns, "del-0", "app", 3)

	if err := env.Client.Delete(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	awaitCondition(t, ns, "del-0", machinev1beta1.MachineDrainable, corev1.ConditionFalse, "backup (team-a)")
	if nm := maintenanceOf(t, "del-0"); nm != nil {
		t.Fatalf("NodeMaintenance %s created while a preDrain hook holds the drain", nm.Name)
	}
	if got := ptr.Deref(getMachine(t, ns, "del-0").Status.Phase, ""); got != machinev1beta1.PhaseDeleting {
		t.Errorf("phase %q while deleting, want Deleting", got)
	}

	removeHooks(t, ns, "del-0", func(h *machinev1beta1.LifecycleHooks) { h.PreDrain = nil })
	awaitCondition(t, ns, "del-0", machinev1beta1.MachineDrained, corev1.ConditionTrue, "drained by NodeMaintenance machine-del-0")
	awaitCondition(t, ns, "del-0", machinev1beta1.MachineTerminable, corev1.ConditionFalse, "detach (storage)")
	node := testutil.GetNode(t, env.Client, "del-0")
	if !node.Spec.Unschedulable {
		t.Error("the node is not cordoned after the drain")
	}
	if pods := testutil.PodsOn(t, env.Client, ns, "del-0"); len(pods) != 0 {
		t.Errorf("pods %v still on the drained node", pods)
	}
	if _, deleting := node.Annotations[pitstopv1alpha1.AnnotationKwokDeleteAt]; deleting {
		t.Error("the instance is being deleted while a preTerminate hook holds it")
	}

	released := time.Now()
	removeHooks(t, ns, "del-0", func(h *machinev1beta1.LifecycleHooks) { h.PreTerminate = nil })
	awaitGone(t, m, 20*time.Second)
	if took := time.Since(released); took < time.Second {
		t.Errorf("machine gone %s after the last hook, before the instance's 1s deleteDelay", took)
	}
	awaitGone(t, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "del-0"}}, 5*time.Second)
	awaitGone(t, &pitstopv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "machine-del-0"}}, 5*time.Second)
}

func TestAMachineOfAnUnreachableNodeGoesOnceItsPodsAreEvicted(t *testing.T) {
	startManager(t)
	ns := testutil.Namespace(t, env.Client, "machine-unreachable")
	m := kwokMachine(ns, "lost-0", "")
	testutil.Create(t, env.Client, m)
	m = awaitPhase(t, ns, "lost-0", machinev1beta1.PhaseRunning)
	// No kubelet runs here: the pods are Running because the test says
	// so, and once evicted they stay terminating, as on a dead node.
	for i := range 2 {
		pod := testutil.Pod(ns, fmt.Sprintf("stuck-%d", i), testutil.OnNode("lost-0"), testutil.OwnedBy("ReplicaSet", "stuck"))
		pod.Finalizers = []string{"test.pitstop.dev/kubelet-gone"}
		testutil.Create(t, env.Client, pod)
		pod.Status.Phase = corev1.PodRunning
		if err := env.Client.Status().Update(t.Context(), pod); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			patch := client.MergeFrom(pod.DeepCopy())
			pod.Finalizers = nil
			_ = env.Client.Patch(context.Background(), pod, patch)
		})
	}
	setReady(t, "lost-0", corev1.ConditionUnknown)

	if err := env.Client.Delete(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	awaitGone(t, m, 30*time.Second)
	pods := &corev1.PodList{}
	if err := env.Client.List(t.Context(), pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			t.Errorf("pod %s was not evicted before the machine went", p.Name)
		}
	}
}

func TestTheExcludeNodeDrainingAnnotationSkipsTheDrain(t *testing.T) {
	startManager(t)
	ns := testutil.Namespace(t, env.Client, "machine-exclude")
	m := kwokMachine(ns, "excl-0", "")
	m.Annotations = map[string]string{machineapi.AnnotationExcludeNodeDraining: ""}
	m.Spec.LifecycleHooks.PreTerminate = []machinev1beta1.LifecycleHook{{Name: "hold", Owner: "test"}}
	testutil.Create(t, env.Client, m)
	m = awaitPhase(t, ns, "excl-0", machinev1beta1.PhaseRunning)

	if err := env.Client.Delete(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	awaitCondition(t, ns, "excl-0", machinev1beta1.MachineTerminable, corev1.ConditionFalse, "hold (test)")
	if c := condition(getMachine(t, ns, "excl-0"), machinev1beta1.MachineDrained); c.Status != corev1.ConditionTrue || c.Reason != machine.ReasonDrainSkipped {
		t.Errorf("Drained %+v, want True/%s", c, machine.ReasonDrainSkipped)
	}
	if nm := maintenanceOf(t, "excl-0"); nm != nil {
		t.Errorf("NodeMaintenance %s created for a machine excluded from draining", nm.Name)
	}
	if testutil.GetNode(t, env.Client, "excl-0").Spec.Unschedulable {
		t.Error("node cordoned although the drain is skipped")
	}
	removeHooks(t, ns, "excl-0", func(h *machinev1beta1.LifecycleHooks) { h.PreTerminate = nil })
	awaitGone(t, m, 10*time.Second)
}

func TestOneControlPlaneMachineDrainsAtATime(t *testing.T) {
	startManager(t)
	testutil.Kubelet(t, env.Clientset)
	ns := testutil.Namespace(t, env.Client, "machine-cp")
	// Five control-plane machines, three deleted at once: the drains'
	// quorum guard alone would let two of them drain together (three of
	// five stay Ready, a quorum); one at a time is the Machine API's rule,
	// however long a drain takes.
	var names []string
	for i := range 5 {
		name := fmt.Sprintf("cp-%d", i)
		names = append(names, name)
		m := kwokMachine(ns, name, `"labels": {"node-role.kubernetes.io/control-plane": ""}`)
		testutil.Create(t, env.Client, m)
		m = awaitPhase(t, ns, name, machinev1beta1.PhaseRunning)
		markReady(t, name)
	}
	deleted := names[:3]
	// Each deleted node holds a pod whose budget allows no disruption: a
	// drain that starts cannot finish until the test lets it.
	var pdbs []*policyv1.PodDisruptionBudget
	for _, name := range deleted {
		testutil.ManagedPods(t, env.Client, ns, name, "guard-"+name, 1)
		pdbs = append(pdbs, testutil.PDB(t, env.Client, ns, "guard-"+name, 1, 0))
	}
	most := watchMachineDrains(t)

	for _, name := range deleted {
		if err := env.Client.Delete(t.Context(), getMachine(t, ns, name)); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, 20*time.Second, 100*time.Millisecond, func() error {
		waiting := 0
		for _, name := range deleted {
			if c := condition(getMachine(t, ns, name), machinev1beta1.MachineDrained); c.Reason == machine.ReasonWaitingForControlPlane {
				waiting++
			}
		}
		if waiting != 2 {
			return fmt.Errorf("%d control-plane machines wait for their turn, want 2", waiting)
		}
		return nil
	})
	// The turn stays with the drain that has it past the grace after which
	// the profiles' sweep frees a slot whose holder is in no profile's
	// maintenance (15 s unchanged, swept every 5 s): it is the Machine
	// controller's to give back.
	for range 25 {
		time.Sleep(time.Second)
		if got := most(); got != 1 {
			t.Fatalf("%d control-plane drains at once while the first is blocked, want 1", got)
		}
	}
	for _, pdb := range pdbs {
		testutil.SetAllowed(t, env.Client, pdb, 1, 1)
	}
	for _, name := range deleted {
		awaitGone(t, &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, 60*time.Second)
	}
	if got := most(); got != 1 {
		t.Errorf("at most %d control-plane drains at once, want 1", got)
	}
}

// markReady reports the node Ready, as its kubelet would.
func markReady(t *testing.T, name string) { t.Helper(); setReady(t, name, corev1.ConditionTrue) }

// setReady sets the node's Ready condition, as its kubelet (True) or the
// node lifecycle controller (Unknown, once heartbeats stop) would.
func setReady(t *testing.T, name string, status corev1.ConditionStatus) {
	t.Helper()
	testutil.Eventually(t, 5*time.Second, 50*time.Millisecond, func() error {
		n := testutil.GetNode(t, env.Client, name)
		patch := client.MergeFrom(n.DeepCopy())
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, Reason: "Test", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		return env.Client.Status().Patch(t.Context(), n, patch)
	})
}

func TestAProviderSpecNoProviderServesWaitsAndAnInvalidOneFails(t *testing.T) {
	startManager(t)
	ns := testutil.Namespace(t, env.Client, "machine-invalid")
	unserved := kwokMachine(ns, "unserved-0", "")
	unserved.Spec.ProviderSpec.Value.Raw = []byte(`{"apiVersion": "example.com/v1", "kind": "NopeMachineProviderConfig"}`)
	invalid := kwokMachine(ns, "invalid-0", `"podz": 3`)
	testutil.Create(t, env.Client, unserved, invalid)

	m := awaitPhase(t, ns, "invalid-0", machinev1beta1.PhaseFailed)
	if ptr.Deref(m.Status.ErrorReason, "") != machinev1beta1.InvalidConfigurationMachineError || !strings.Contains(ptr.Deref(m.Status.ErrorMessage, ""), "podz") {
		t.Errorf("failed with %v: %v, want InvalidConfiguration naming the field podz", ptr.Deref(m.Status.ErrorReason, ""), ptr.Deref(m.Status.ErrorMessage, ""))
	}
	awaitCondition(t, ns, "unserved-0", machinev1beta1.InstanceExistsCondition, corev1.ConditionUnknown, `"NopeMachineProviderConfig"`)
	m = getMachine(t, ns, "unserved-0")
	if c := condition(m, machinev1beta1.InstanceExistsCondition); c.Reason != machine.ReasonProviderNotServed || !strings.Contains(c.Message, kwok.Kind) {
		t.Errorf("InstanceExists %+v, want %s naming the served kind %s", c, machine.ReasonProviderNotServed, kwok.Kind)
	}
	if phase := ptr.Deref(m.Status.Phase, ""); phase == machinev1beta1.PhaseFailed {
		t.Error("a machine no provider of this manager serves failed; it must wait")
	}

	// The invalid machine never had an instance: it goes at once. The
	// unserved one may have one that only its provider can delete: it stays.
	if err := env.Client.Delete(t.Context(), invalid); err != nil {
		t.Fatal(err)
	}
	awaitGone(t, invalid, 10*time.Second)
	if err := env.Client.Delete(t.Context(), unserved); err != nil {
		t.Fatal(err)
	}
	awaitPhase(t, ns, "unserved-0", machinev1beta1.PhaseDeleting)
	time.Sleep(time.Second) // give a wrong implementation time to drop the finalizer
	if m := getMachine(t, ns, "unserved-0"); !controllerutil.ContainsFinalizer(m, machine.Finalizer) {
		t.Fatal("the finalizer of a machine whose instance nobody can delete was removed")
	}
	m = getMachine(t, ns, "unserved-0")
	patch := client.MergeFrom(m.DeepCopy())
	controllerutil.RemoveFinalizer(m, machine.Finalizer)
	if err := env.Client.Patch(t.Context(), m, patch); err != nil {
		t.Fatal(err)
	}
}

func TestANodeOfTheMachinesNameThatIsNotItsFailsTheMachine(t *testing.T) {
	startManager(t)
	ns := testutil.Namespace(t, env.Client, "machine-taken")
	testutil.Create(t, env.Client, testutil.Node("taken-0"))
	testutil.Create(t, env.Client, kwokMachine(ns, "taken-0", ""))
	m := awaitPhase(t, ns, "taken-0", machinev1beta1.PhaseFailed)
	if msg := ptr.Deref(m.Status.ErrorMessage, ""); !strings.Contains(msg, "not this machine's") {
		t.Errorf("error message %q, want it to say the node is not the machine's", msg)
	}
	if got := testutil.GetNode(t, env.Client, "taken-0"); got.Spec.ProviderID != "" {
		t.Errorf("the existing node was changed: providerID %q", got.Spec.ProviderID)
	}
}

func TestAnInstanceDeletedOutsideTheMachineAPIFailsTheMachine(t *testing.T) {
	startManager(t)
	ns := testutil.Namespace(t, env.Client, "machine-vanish")
	testutil.Create(t, env.Client, kwokMachine(ns, "vanish-0", ""))
	awaitPhase(t, ns, "vanish-0", machinev1beta1.PhaseRunning)
	if err := env.Client.Delete(t.Context(), testutil.GetNode(t, env.Client, "vanish-0")); err != nil {
		t.Fatal(err)
	}
	m := awaitPhase(t, ns, "vanish-0", machinev1beta1.PhaseFailed)
	if got := ptr.Deref(m.Status.ErrorReason, ""); got != "InstanceMissing" {
		t.Errorf("errorReason %q, want InstanceMissing", got)
	}
}

func TestARestartMidDeletionResumesWithoutASecondDrain(t *testing.T) {
	mgr := startManager(t)
	testutil.Kubelet(t, env.Clientset)
	ns := testutil.Namespace(t, env.Client, "machine-restart")
	m := kwokMachine(ns, "restart-0", "")
	testutil.Create(t, env.Client, m)
	m = awaitPhase(t, ns, "restart-0", machinev1beta1.PhaseRunning)
	testutil.ManagedPods(t, env.Client, ns, "restart-0", "held", 1)
	pdb := testutil.PDB(t, env.Client, ns, "held", 1, 0)
	created := countCreations(t, "machine-restart-0")

	if err := env.Client.Delete(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	awaitCondition(t, ns, "restart-0", machinev1beta1.MachineDrained, corev1.ConditionFalse, "draining node restart-0")
	mgr.Stop()
	startManager(t)
	testutil.SetAllowed(t, env.Client, pdb, 1, 1)
	awaitGone(t, m, 30*time.Second)
	if n := created(); n != 1 {
		t.Errorf("NodeMaintenance machine-restart-0 created %d times, want 1", n)
	}
}

// awaitCondition waits until the Machine's condition has the status and a
// message containing msg.
func awaitCondition(t *testing.T, ns, name string, ct machinev1beta1.ConditionType, status corev1.ConditionStatus, msg string) {
	t.Helper()
	testutil.Eventually(t, 20*time.Second, 50*time.Millisecond, func() error {
		c := condition(getMachine(t, ns, name), ct)
		if c.Status != status || !strings.Contains(c.Message, msg) {
			return fmt.Errorf("machine %s condition %s is %s %q (%s), want %s containing %q", name, ct, c.Status, c.Message, c.Reason, status, msg)
		}
		return nil
	})
}

// removeHooks edits the Machine's lifecycle hooks.
func removeHooks(t *testing.T, ns, name string, edit func(*machinev1beta1.LifecycleHooks)) {
	t.Helper()
	testutil.Eventually(t, 5*time.Second, 50*time.Millisecond, func() error {
		m := getMachine(t, ns, name)
		patch := client.MergeFromWithOptions(m.DeepCopy(), client.MergeFromWithOptimisticLock{})
		edit(&m.Spec.LifecycleHooks)
		return env.Client.Patch(t.Context(), m, patch)
	})
}

// maintenanceOf returns the NodeMaintenance of a node, or nil.
func maintenanceOf(t *testing.T, node string) *pitstopv1alpha1.NodeMaintenance {
	t.Helper()
	list := &pitstopv1alpha1.NodeMaintenanceList{}
	if err := env.Client.List(t.Context(), list); err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		if list.Items[i].Spec.NodeName == node {
			return &list.Items[i]
		}
	}
	return nil
}

// watchMachineDrains watches the NodeMaintenances of Machines' drains and
// returns a function telling the most that were draining at once.
func watchMachineDrains(t *testing.T) func() int {
	t.Helper()
	w, err := watcher(t).Watch(t.Context(), &pitstopv1alpha1.NodeMaintenanceList{}, client.MatchingLabels{pitstopv1alpha1.LabelSource: machine.SourceMachine})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	live, most := map[string]bool{}, 0
	go func() {
		for ev := range w.ResultChan() {
			nm, ok := ev.Object.(*pitstopv1alpha1.NodeMaintenance)
			if !ok {
				continue
			}
			mu.Lock()
			// A NodeMaintenance being deleted has finished its drain: its
			// node is gone, and only its own clean-up is left.
			if ev.Type == watch.Deleted || !nm.DeletionTimestamp.IsZero() {
				delete(live, nm.Name)
			} else {
				live[nm.Name] = true
			}
			most = max(most, len(live))
			mu.Unlock()
		}
	}()
	t.Cleanup(w.Stop)
	return func() int { mu.Lock(); defer mu.Unlock(); return most }
}

// countCreations counts how often a NodeMaintenance of that name is
// created from now on.
func countCreations(t *testing.T, name string) func() int {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	w, err := watcher(t).Watch(ctx, &pitstopv1alpha1.NodeMaintenanceList{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	n := 0
	go func() {
		for ev := range w.ResultChan() {
			if nm, ok := ev.Object.(*pitstopv1alpha1.NodeMaintenance); ok && ev.Type == watch.Added && nm.Name == name {
				mu.Lock()
				n++
				mu.Unlock()
			}
		}
	}()
	return func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// watcher is a client that can watch.
func watcher(t *testing.T) client.WithWatch {
	t.Helper()
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestADrainBlockedPastTheMachineDrainTimeoutIsForcedWhenToldTo: with
// --machine-drain-timeout and --machine-drain-on-timeout=ForceDelete, the
// drain of a deleted Machine's node that a PodDisruptionBudget blocks gives
// up waiting after the timeout, deletes the pods past the budget (recorded
// by the NodeMaintenance's Events and status), and the Machine goes.
func TestADrainBlockedPastTheMachineDrainTimeoutIsForcedWhenToldTo(t *testing.T) {
	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{Tune: func(o *manager.Options) {
		o.MachineAPI = true
		o.MachineProviders = []string{"kwok"}
		o.MachineDrainTimeout = 2 * time.Second
		o.MachineDrainOnTimeout = string(pitstopv1alpha1.DrainTimeoutForceDelete)
	}})
	testutil.Kubelet(t, env.Clientset)
	ns := testutil.Namespace(t, env.Client, "machine-drain-timeout")
	m := kwokMachine(ns, "slow-0", "")
	testutil.Create(t, env.Client, m)
	m = awaitPhase(t, ns, "slow-0", machinev1beta1.PhaseRunning)
	testutil.ManagedPods(t, env.Client, ns, "slow-0", "guarded", 2)
	testutil.PDB(t, env.Client, ns, "guarded", 2, 0) // no disruption allowed

	if err := env.Client.Delete(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	var nm *pitstopv1alpha1.NodeMaintenance
	testutil.Eventually(t, 10*time.Second, 50*time.Millisecond, func() error {
		if nm = maintenanceOf(t, "slow-0"); nm == nil {
			return fmt.Errorf("no NodeMaintenance for slow-0 yet")
		}
		return nil
	})
	if d := nm.Spec.Drain; d.Timeout == nil || d.Timeout.Duration != 2*time.Second || d.OnTimeout != pitstopv1alpha1.DrainTimeoutForceDelete {
		t.Errorf("the Machine's drain has timeout %v and onTimeout %s, want 2s and ForceDelete", d.Timeout, d.OnTimeout)
	}
	awaitGone(t, m, 30*time.Second)
}
