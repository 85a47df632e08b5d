package healthcheck

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/machineapi"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// TestDeletesTheMachineOfANodeNotReadyPastTheTimeout: a Machine whose node
// has been NotReady for longer than the timeout is deleted, with an Event
// saying why, and counted; its healthy neighbour stays.
func TestDeletesTheMachineOfANodeNotReadyPastTheTimeout(t *testing.T) {
	deleted := counted(resultDeleted)
	f := setup(t, "notready")
	sick, _ := f.machineOnNode("sick", corev1.ConditionFalse, time.Now().Add(-10*time.Minute))
	fine, _ := f.machineOnNode("fine", corev1.ConditionTrue, time.Now().Add(-10*time.Minute))
	f.healthCheck(5 * time.Minute)

	awaitDeleted(t, sick)
	note := awaitEvent(t, f.ns, sick.Name, EventMachineDeleted)
	if !strings.Contains(note, "Ready=False") {
		t.Errorf("event note %q, want it to say the node is Ready=False", note)
	}
	assertExists(t, fine)
	if got := deleted(); got != 1 {
		t.Errorf("%v deletions counted, want 1", got)
	}
}

// TestRequeuesAtTheTimeout: a node NotReady for less than the timeout
// keeps its Machine; with nothing else changing, the Machine is deleted
// once the timeout is reached, because the reconcile asked to come back
// then.
func TestRequeuesAtTheTimeout(t *testing.T) {
	f := setup(t, "requeue")
	const timeout = 5 * time.Second
	m, _ := f.machineOnNode("m", corev1.ConditionFalse, time.Now())
	n := &corev1.Node{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: m.Status.NodeRef.Name}, n); err != nil {
		t.Fatal(err)
	}
	deadline := n.Status.Conditions[0].LastTransitionTime.Add(timeout) // as stored, to the second
	mhc := f.healthCheck(timeout)

	// The first reconcile sees the node NotReady for less than the
	// timeout: the Machine is healthy. Its status write wakes no other
	// reconcile, and nothing else changes.
	got := awaitStatus(t, mhc, 1, 1)
	if time.Now().After(deadline) {
		t.Fatal("the test was too slow to look before the timeout")
	}
	assertExists(t, m)
	if c := machineapi.Condition(got.Status.Conditions, machinev1beta1.RemediationAllowedCondition); c == nil || !strings.HasPrefix(c.Message, "0 of 1 machines unhealthy") {
		t.Errorf("condition %+v, want 0 of 1 machines unhealthy", c)
	}

	gone := awaitDeleted(t, m)
	if gone.Before(deadline) {
		t.Errorf("machine deleted at %s, before the timeout at %s", gone, deadline)
	}
	if late := gone.Sub(deadline); late > 2*time.Second {
		t.Errorf("machine deleted %s after the timeout, want the requeue to act at the timeout", late)
	}
}

// TestHoldsBackWhenTooManyAreUnhealthy: with more unhealthy Machines than
// maxUnhealthy allows, none is deleted and the condition and an Event say
// why; once maxUnhealthy allows them, they are deleted.
func TestHoldsBackWhenTooManyAreUnhealthy(t *testing.T) {
	restricted := counted(resultRestricted)
	f := setup(t, "storm")
	long := time.Now().Add(-time.Hour)
	a, _ := f.machineOnNode("a", corev1.ConditionUnknown, long)
	b, _ := f.machineOnNode("b", corev1.ConditionFalse, long)
	c, _ := f.machineOnNode("c", corev1.ConditionTrue, long)
	mhc := f.healthCheck(time.Minute, withMaxUnhealthy(intstr.FromInt32(1)))

	got, cond := awaitCondition(t, mhc, machinev1beta1.TooManyUnhealthyReason)
	if cond.Status != corev1.ConditionFalse || !strings.Contains(cond.Message, "2 of 3 machines are unhealthy, more than maxUnhealthy 1 allows (1)") {
		t.Errorf("condition %+v, want False naming 2 of 3 unhealthy and maxUnhealthy 1", cond)
	}
	if got.Status.RemediationsAllowed != 0 || *got.Status.ExpectedMachines != 3 || *got.Status.CurrentHealthy != 1 {
		t.Errorf("status %+v, want 3 expected, 1 healthy, 0 remediations allowed", got.Status)
	}
	note := awaitEvent(t, f.ns, mhc.Name, EventRemediationRestricted)
	if !strings.Contains(note, "2 of 3") {
		t.Errorf("event note %q, want the counts", note)
	}
	assertExists(t, a, b, c)
	if n := restricted(); n != 1 {
		t.Errorf("%v restrictions counted, want 1", n)
	}

	update(t, mhc, func(m *machinev1beta1.MachineHealthCheck) { m.Spec.MaxUnhealthy = ptr.To(intstr.FromInt32(2)) })
	awaitDeleted(t, a)
	awaitDeleted(t, b)
	assertExists(t, c)
}

// TestRoundsAPercentageMaxUnhealthyDown: 40% of 4 Machines is 1.6, which
// allows 1, so 2 unhealthy ones are held back; 50% allows them.
func TestRoundsAPercentageMaxUnhealthyDown(t *testing.T) {
	f := setup(t, "percent")
	long := time.Now().Add(-time.Hour)
	a, _ := f.machineOnNode("a", corev1.ConditionFalse, long)
	b, _ := f.machineOnNode("b", corev1.ConditionFalse, long)
	f.machineOnNode("c", corev1.ConditionTrue, long)
	f.machineOnNode("d", corev1.ConditionTrue, long)
	mhc := f.healthCheck(time.Minute, withMaxUnhealthy(intstr.FromString("40%")))

	_, cond := awaitCondition(t, mhc, machinev1beta1.TooManyUnhealthyReason)
	if !strings.Contains(cond.Message, "more than maxUnhealthy 40% allows (1)") {
		t.Errorf("condition message %q, want 40%% to allow 1", cond.Message)
	}
	assertExists(t, a, b)

	update(t, mhc, func(m *machinev1beta1.MachineHealthCheck) { m.Spec.MaxUnhealthy = ptr.To(intstr.FromString("50%")) })
	awaitDeleted(t, a)
	awaitDeleted(t, b)
}

// TestSkipsAMachineNoMachineSetControls: an unhealthy Machine without a
// MachineSet controller is counted unhealthy but not deleted, and an Event
// says so.
func TestSkipsAMachineNoMachineSetControls(t *testing.T) {
	skipped := counted(resultSkipped)
	f := setup(t, "nocontroller")
	m, _ := f.linkedMachine("orphan", false, corev1.ConditionFalse, time.Now().Add(-time.Hour))
	mhc := f.healthCheck(time.Minute)

	awaitStatus(t, mhc, 1, 0)
	awaitEvent(t, f.ns, m.Name, EventSkippedNoController)
	assertExists(t, m)
	if skipped() < 1 {
		t.Error("no skip counted")
	}
}

// TestLeavesAMachineInPlannedMaintenanceAlone: a NotReady node with a
// NodeMaintenance is being rebooted, not failing: its Machine is neither
// counted unhealthy nor deleted, and the condition and an Event say why.
// Once the maintenance is gone and the node is still NotReady, the Machine
// is deleted at once. A node held in maintenance by a profile (its state
// label) is left alone the same way.
func TestLeavesAMachineInPlannedMaintenanceAlone(t *testing.T) {
	f := setup(t, "maintenance")
	long := time.Now().Add(-time.Hour)
	rebooting, node := f.machineOnNode("rebooting", corev1.ConditionFalse, long)
	profiled, profiledNode := f.machineOnNode("profiled", corev1.ConditionFalse, long)
	update(t, profiledNode, func(n *corev1.Node) {
		n.Labels[pitstopv1alpha1.LabelState] = string(pitstopv1alpha1.StateInMaintenance)
	})
	nm := &pitstopv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: node.Name},
		Spec:       pitstopv1alpha1.NodeMaintenanceSpec{NodeName: node.Name, Reason: "kernel upgrade"},
	}
	create(t, nm)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), nm) })
	mhc := f.healthCheck(time.Minute)

	_, cond := awaitCondition(t, mhc, ReasonWithinMaxUnhealthy)
	awaitStatus(t, mhc, 2, 2)
	if !strings.Contains(cond.Message, "2 not remediated while their nodes are in planned maintenance (a reboot is not a failure): "+f.ns+"/profiled, "+f.ns+"/rebooting") {
		t.Errorf("condition message %q, want both machines named as in planned maintenance", cond.Message)
	}
	note := awaitEvent(t, f.ns, rebooting.Name, EventSkippedPlannedMaintenance)
	if !strings.Contains(note, "node "+node.Name+" is in planned maintenance") {
		t.Errorf("event note %q, want it to say the node is in planned maintenance", note)
	}
	assertExists(t, rebooting, profiled)

	if err := env.Client.Delete(t.Context(), nm); err != nil {
		t.Fatal(err)
	}
	awaitDeleted(t, rebooting)
	assertExists(t, profiled)

	update(t, profiledNode, func(n *corev1.Node) { delete(n.Labels, pitstopv1alpha1.LabelState) })
	awaitDeleted(t, profiled)
}

// TestNodeStartupTimeout: a Machine without a node is deleted once
// nodeStartupTimeout has passed since it was created; with the timeout "0"
// another one, created at the same time, stays.
func TestNodeStartupTimeout(t *testing.T) {
	f := setup(t, "startup")
	off := namespace(t, "startup-off")
	disabled := &fixture{t: t, ns: off, cache: f.cache}
	disabled.machineSet = f.machineSet.DeepCopy()
	disabled.machineSet.Namespace, disabled.machineSet.ResourceVersion, disabled.machineSet.UID = off, "", ""
	create(t, disabled.machineSet)

	offCheck := disabled.healthCheck(time.Minute, withNodeStartupTimeout(0))
	f.healthCheck(time.Minute, withNodeStartupTimeout(2*time.Second))
	waiting := disabled.machine("waiting", true)
	late := f.machine("late", true)

	gone := awaitDeleted(t, late)
	if age := gone.Sub(late.CreationTimestamp.Time); age < 2*time.Second {
		t.Errorf("machine deleted %s after its creation, before nodeStartupTimeout 2s", age)
	}
	awaitEvent(t, f.ns, late.Name, EventMachineDeleted)
	assertExists(t, waiting)
	awaitStatus(t, offCheck, 1, 1)
}

// TestDeletesAFailedMachine: a Machine in phase Failed is unhealthy even
// with a Ready node.
func TestDeletesAFailedMachine(t *testing.T) {
	f := setup(t, "failed")
	m, _ := f.machineOnNode("m", corev1.ConditionTrue, time.Now().Add(-time.Hour))
	f.updateMachineStatus(m, func(s *machinev1beta1.MachineStatus) {
		s.Phase = ptr.To(machinev1beta1.PhaseFailed)
		s.ErrorMessage = ptr.To("instance i-0123 terminated")
	})
	f.healthCheck(time.Minute)

	awaitDeleted(t, m)
	if note := awaitEvent(t, f.ns, m.Name, EventMachineDeleted); !strings.Contains(note, "phase is Failed: instance i-0123 terminated") {
		t.Errorf("event note %q, want the phase and the machine's error", note)
	}
}

// TestDeletesAMachineWhoseNodeIsGone: a healthy Machine whose Node is
// deleted is unhealthy at once.
func TestDeletesAMachineWhoseNodeIsGone(t *testing.T) {
	f := setup(t, "nodegone")
	m, n := f.machineOnNode("m", corev1.ConditionTrue, time.Now().Add(-time.Hour))
	mhc := f.healthCheck(time.Minute)
	awaitStatus(t, mhc, 1, 1)
	assertExists(t, m)

	if err := env.Client.Delete(t.Context(), n); err != nil {
		t.Fatal(err)
	}
	awaitDeleted(t, m)
	if note := awaitEvent(t, f.ns, m.Name, EventMachineDeleted); !strings.Contains(note, "node "+n.Name+" is gone") {
		t.Errorf("event note %q, want it to say the node is gone", note)
	}
}

// TestPausedAnnotationStopsRemediation: a paused health check still
// reports its Machines' health but deletes none; without the annotation
// it remediates.
func TestPausedAnnotationStopsRemediation(t *testing.T) {
	f := setup(t, "paused")
	m, _ := f.machineOnNode("m", corev1.ConditionFalse, time.Now().Add(-time.Hour))
	mhc := f.healthCheck(time.Minute, paused())

	_, cond := awaitCondition(t, mhc, ReasonPaused)
	awaitStatus(t, mhc, 1, 0)
	if cond.Status != corev1.ConditionFalse || !strings.Contains(cond.Message, "1 of 1 machines unhealthy") {
		t.Errorf("condition %+v, want False with the counts", cond)
	}
	assertExists(t, m)

	update(t, mhc, func(m *machinev1beta1.MachineHealthCheck) { m.Annotations = nil })
	awaitDeleted(t, m)
}

// TestExternalRemediationIsNotReplacedByDeletion: a health check asking for
// a remediation pitstop does not run (a template, or the bare-metal
// strategy annotation) deletes nothing and says why.
func TestExternalRemediationIsNotReplacedByDeletion(t *testing.T) {
	f := setup(t, "external")
	m, _ := f.machineOnNode("m", corev1.ConditionFalse, time.Now().Add(-time.Hour))
	mhc := f.healthCheck(time.Minute, func(h *machinev1beta1.MachineHealthCheck) {
		h.Spec.RemediationTemplate = &corev1.ObjectReference{APIVersion: "infrastructure.cluster.x-k8s.io/v1beta1", Kind: "Metal3RemediationTemplate", Name: "reboot"}
	})
	_, cond := awaitCondition(t, mhc, ReasonPaused)
	if !strings.Contains(cond.Message, "Metal3RemediationTemplate reboot") || !strings.Contains(cond.Message, "1 of 1 machines unhealthy") {
		t.Errorf("condition %+v, want it to name the template and the counts", cond)
	}
	assertExists(t, m)

	update(t, mhc, func(h *machinev1beta1.MachineHealthCheck) {
		h.Spec.RemediationTemplate = nil
		h.Annotations = map[string]string{"machine.openshift.io/remediation-strategy": "external-baremetal"}
	})
	testutil.Eventually(t, 10*time.Second, 50*time.Millisecond, func() error {
		_, cond = awaitCondition(t, mhc, ReasonPaused)
		if !strings.Contains(cond.Message, "external-baremetal") {
			return fmt.Errorf("condition message %q does not name the strategy", cond.Message)
		}
		return nil
	})
	assertExists(t, m)

	update(t, mhc, func(h *machinev1beta1.MachineHealthCheck) { h.Annotations = nil })
	awaitDeleted(t, m)
}

// TestStatusCounts: expectedMachines counts the selected Machines not being
// deleted, currentHealthy those not unhealthy, remediationsAllowed what is
// left of maxUnhealthy; they follow a node's condition.
func TestStatusCounts(t *testing.T) {
	f := setup(t, "counts")
	long := time.Now().Add(-time.Hour)
	// No MachineSet controls these two, so they stay when unhealthy.
	_, healthyNode := f.linkedMachine("healthy", false, corev1.ConditionTrue, long)
	f.linkedMachine("sick", false, corev1.ConditionFalse, long)
	leaving := f.machine("leaving", true)
	update(t, leaving, func(m *machinev1beta1.Machine) { m.Finalizers = []string{"test.pitstop.dev/hold"} })
	if err := env.Client.Delete(t.Context(), leaving); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // t.Context() has ended by now
		patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
		if err := env.Client.Patch(context.Background(), leaving, patch); err != nil {
			t.Error(err)
		}
	})
	other := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "other", Labels: map[string]string{"pool": "infra"}}}
	create(t, other)
	mhc := f.healthCheck(time.Minute, withMaxUnhealthy(intstr.FromInt32(3)))

	got := awaitStatus(t, mhc, 2, 1)
	if got.Status.RemediationsAllowed != 2 {
		t.Errorf("remediationsAllowed %d, want 3 - 1 = 2", got.Status.RemediationsAllowed)
	}

	f.setReady(healthyNode, corev1.ConditionUnknown, long)
	got = awaitStatus(t, mhc, 2, 0)
	if got.Status.RemediationsAllowed != 1 {
		t.Errorf("remediationsAllowed %d, want 3 - 2 = 1", got.Status.RemediationsAllowed)
	}
}

func create(t *testing.T, objs ...client.Object) { t.Helper(); testutil.Create(t, env.Client, objs...) }

func ptrTo[T any](v T) *T { return &v }
