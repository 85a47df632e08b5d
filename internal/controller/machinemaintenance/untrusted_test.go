package machinemaintenance_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/maintenance"
	"github.com/pitstop-dev/pitstop/internal/plugin/trigger"
	"github.com/pitstop-dev/pitstop/internal/sim/ec2sim"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// The tests below play a node (its kubelet, or anyone with nodes/patch)
// that writes what it may write, the machine.openshift.io/machine
// annotation and, at registration, spec.providerID, to point pitstop at
// someone else's Machine or instance. None of them may get it deleted or
// rebooted, and each refusal says which links disagree.

// settle is how long a test waits to see that nothing happens.
const settle = 3 * time.Second

// runUntilFailed runs a trigger on a node, as the profile engine does,
// until it fails, and returns the error.
func runUntilFailed(t *testing.T, inst pitstopv1alpha1.TriggerInstance, nodeName, ns string) error {
	t.Helper()
	tr, err := trigger.New(inst)
	if err != nil {
		t.Fatal(err)
	}
	var failed error
	since := time.Now().Add(-time.Minute)
	eventually(t, func() error {
		node := &corev1.Node{}
		if err := env.Client.Get(t.Context(), client.ObjectKey{Name: nodeName}, node); err != nil {
			return err
		}
		done, status, err := tr.Run(t.Context(), trigger.Context{Node: node, Profile: "cloud", From: pitstopv1alpha1.StateMaintenanceRequired,
			Since: since, Now: time.Now(), Namespace: ns, Client: env.Client, Reader: env.Client})
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || err != nil && strings.Contains(err.Error(), "is not read yet") {
			return err // a race with the controller: the engine runs it again
		}
		if err != nil {
			failed = err
			return nil
		}
		return fmt.Errorf("trigger has not failed: done %v, %s", done, status)
	})
	return failed
}

// untouched checks, after settle, that a Machine is still there and not
// being deleted, and that EC2 rebooted none of ids.
func (c *cluster) untouched(m *machinev1beta1.Machine, ids ...string) {
	c.t.Helper()
	time.Sleep(settle)
	got := &machinev1beta1.Machine{}
	if err := env.Client.Get(c.t.Context(), client.ObjectKeyFromObject(m), got); err != nil || !got.DeletionTimestamp.IsZero() {
		c.t.Errorf("machine %s was deleted (%v)", m.Name, err)
	}
	for _, id := range ids {
		if n := c.ec2.Reboots(id); n != 0 {
			c.t.Errorf("instance %s was rebooted %d times", id, n)
		}
	}
}

// wantError fails the test unless err says want.
func wantError(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want one saying %q", err, want)
	}
}

// TestUntrustedNodeAnnotationDoesNotPickTheMachine: a node annotated
// machine.openshift.io/machine with another node's Machine gets neither
// that Machine replaced (deleted) nor its instance rebooted: the Machine
// is the one whose own status.nodeRef names the node, and the annotation
// that disagrees makes both triggers fail, saying so.
func TestUntrustedNodeAnnotationDoesNotPickTheMachine(t *testing.T) {
	c := newCluster(t, "untrusted-annotation")
	victim, victimID := c.machine("worker-a", nil)
	_, ownID := c.machine("worker-b", nil)
	liar := c.ns + "-worker-b"
	patchNode(t, liar, func(n *corev1.Node) { n.Annotations["machine.openshift.io/machine"] = c.ns + "/worker-a" })
	want := fmt.Sprintf("node %s's annotation machine.openshift.io/machine names machine %s/worker-a, but machine %s/worker-b names the node in status.nodeRef", liar, c.ns, c.ns)

	err := runUntilFailed(t, pitstopv1alpha1.TriggerInstance{Name: "replace", ReplaceMachine: &pitstopv1alpha1.ReplaceMachineTrigger{Surge: ptr.To(false)}}, liar, c.ns)
	wantError(t, err, want)
	playNodeMaintenances(t)
	err = runUntilFailed(t, pitstopv1alpha1.TriggerInstance{Name: "reboot", RebootInstance: &pitstopv1alpha1.RebootInstanceTrigger{}}, liar, c.ns)
	wantError(t, err, want)

	c.untouched(victim, victimID, ownID)
	var list pitstopv1alpha1.MachineMaintenanceList
	if err := env.Client.List(t.Context(), &list, client.InNamespace(c.ns)); err != nil {
		t.Fatal(err)
	}
	for _, mm := range list.Items {
		t.Errorf("MachineMaintenance %s was made (machine %q, node %q, action %+v)", mm.Name, mm.Spec.MachineName, mm.Spec.NodeName, mm.Status.Action)
	}
}

// TestUntrustedNodeProviderIDDoesNotPickTheInstance: a node whose
// spec.providerID names an instance that is not its own does not get that
// instance rebooted: not a node without a Machine that names another
// Machine's instance, not a node whose Machine has another instance, and
// not a node without a Machine whose instance EC2 knows under another
// name. The first two fail in the trigger; the third reaches the
// reboot's object, which fails with a TargetRefused Event.
func TestUntrustedNodeProviderIDDoesNotPickTheInstance(t *testing.T) {
	c := newCluster(t, "untrusted-providerid")
	victim, victimID := c.machine("worker-a", nil)
	playNodeMaintenances(t)
	reboot := pitstopv1alpha1.TriggerInstance{Name: "reboot", RebootInstance: &pitstopv1alpha1.RebootInstanceTrigger{}}

	// A node without a Machine that registered with worker-a's instance.
	lone := c.node("lone", "aws:///us-east-1a/"+victimID)
	err := runUntilFailed(t, reboot, lone.Name, c.ns)
	wantError(t, err, fmt.Sprintf("node %s's spec.providerID %q names the instance of machine %s/worker-a, whose status.nodeRef names node %s-worker-a",
		lone.Name, lone.Spec.ProviderID, c.ns, c.ns))

	// A node of machine worker-b that registered with worker-a's instance.
	ownID, ownProviderID := c.instance("worker-b")
	b := &machinev1beta1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: "worker-b"},
		Spec:       machinev1beta1.MachineSpec{ProviderID: ptr.To(ownProviderID), ProviderSpec: machinev1beta1.ProviderSpec{Value: awsSpec()}},
	}
	testutil.Create(t, env.Client, b)
	liar := c.node("worker-b", "aws:///us-east-1a/"+victimID)
	eventually(t, func() error {
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(b), b); err != nil {
			return err
		}
		base := b.DeepCopy()
		b.Status.Phase = ptr.To(machinev1beta1.PhaseRunning)
		b.Status.NodeRef = &corev1.ObjectReference{Kind: "Node", Name: liar.Name}
		return env.Client.Status().Patch(t.Context(), b, client.MergeFrom(base))
	})
	err = runUntilFailed(t, reboot, liar.Name, c.ns)
	wantError(t, err, fmt.Sprintf("node %s's spec.providerID %q is not machine %s/worker-b's spec.providerID %q", liar.Name, liar.Spec.ProviderID, c.ns, ownProviderID))

	// A node without a Machine whose instance EC2 knows as another
	// node's.
	otherID := c.ec2.AddInstance(ec2sim.Instance{ID: uniqueInstanceID(), Zone: "us-east-1a", PrivateDNS: "ip-10-0-9-9.ec2.internal"})
	forged := c.node("forged", "aws:///us-east-1a/"+otherID)
	err = runUntilFailed(t, reboot, forged.Name, c.ns)
	wantDNS := fmt.Sprintf("node %s's spec.providerID %q names instance %s, which aws names ip-10-0-9-9.ec2.internal (its private DNS name), not %s",
		forged.Name, forged.Spec.ProviderID, otherID, forged.Name)
	wantError(t, err, wantDNS)

	c.untouched(victim, victimID, ownID, otherID)
	var list pitstopv1alpha1.MachineMaintenanceList
	if err := env.Client.List(t.Context(), &list, client.InNamespace(c.ns)); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Spec.NodeName != forged.Name {
		t.Fatalf("%d MachineMaintenances, want the forged node's reboot only", len(list.Items))
	}
	mm := phaseIs(t, c.ns, list.Items[0].Name, pitstopv1alpha1.EventFailed)
	if a := mm.Status.Action; a == nil || !strings.Contains(a.Message, wantDNS) {
		t.Errorf("action %+v, want its message to say %q", a, wantDNS)
	}
	if !hasEventSaying(t, c.ns, "TargetRefused", wantDNS) {
		t.Error("no TargetRefused Event on the MachineMaintenance")
	}
}

// TestUntrustedActionOnAnotherNodesMachineIsRefused: a replacement asked
// on an object that names one node and another node's Machine (as an
// earlier pitstop that trusted the node's annotation made them) is
// refused when it would start, from what the API server says: the
// Machine stays, the object fails and a TargetRefused Event says why.
func TestUntrustedActionOnAnotherNodesMachineIsRefused(t *testing.T) {
	c := newCluster(t, "untrusted-action")
	victim, victimID := c.machine("worker-a", nil)
	c.machine("worker-b", nil)
	mm := &pitstopv1alpha1.MachineMaintenance{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: "worker-b-replace",
			Labels: map[string]string{pitstopv1alpha1.LabelMachineMaintenanceNode: c.ns + "-worker-b"}},
		Spec: pitstopv1alpha1.MachineMaintenanceSpec{Provider: "pitstop", Code: "replace", InstanceID: victimID,
			NodeName: c.ns + "-worker-b", MachineName: victim.Name},
	}
	testutil.Create(t, env.Client, mm)
	eventually(t, func() error {
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(mm), mm); err != nil {
			return err
		}
		base := mm.DeepCopy()
		mm.Status.Action = &pitstopv1alpha1.MachineAction{Type: pitstopv1alpha1.ActionReplace, Profile: "cloud",
			Step: pitstopv1alpha1.StepRequested, StartTime: &metav1.Time{Time: time.Now()}}
		return env.Client.Status().Patch(t.Context(), mm, client.MergeFrom(base))
	})
	want := fmt.Sprintf("MachineMaintenance %s/worker-b-replace names machine worker-a for node %s-worker-b, but the machine that names the node in status.nodeRef is %s/worker-b",
		c.ns, c.ns, c.ns)
	got := phaseIs(t, c.ns, mm.Name, pitstopv1alpha1.EventFailed)
	if a := got.Status.Action; a == nil || !strings.Contains(a.Message, want) {
		t.Errorf("action %+v, want its message to say %q", a, want)
	}
	if !hasEventSaying(t, c.ns, "TargetRefused", want) {
		t.Error("no TargetRefused Event on the MachineMaintenance")
	}
	c.untouched(victim, victimID)
}

// TestUntrustedEventOnAnInstanceNoMachineOwnsStaysOffTheNode: the
// scheduled events of an instance reach a node through the Machine whose
// instance it is and that Machine's status.nodeRef. A node that
// registered with another Machine's instance does not get that Machine's
// event; a node without a Machine whose instance EC2 knows under another
// name gets no event of that instance: neither is put into maintenance,
// and each gets an UntrustedInstance Event saying why.
func TestUntrustedEventOnAnInstanceNoMachineOwnsStaysOffTheNode(t *testing.T) {
	c := newCluster(t, "untrusted-event")
	_, machineID := c.machine("worker-a", nil)
	otherID := c.ec2.AddInstance(ec2sim.Instance{ID: uniqueInstanceID(), Zone: "us-east-1a", PrivateDNS: "ip-10-0-9-9.ec2.internal"})
	forged := c.node("forged", "aws:///us-east-1a/"+otherID)
	copycat := c.node("zz-copycat", "aws:///us-east-1a/"+machineID) // listed after worker-a
	soon := time.Now().Add(48 * time.Hour)
	c.ec2.ScheduleEvent(otherID, ec2sim.ScheduledEvent{ID: "instance-event-f", Code: "instance-retirement", NotBefore: soon})
	c.ec2.ScheduleEvent(machineID, ec2sim.ScheduledEvent{ID: "instance-event-m", Code: "instance-retirement", NotBefore: soon})

	machineEvent := maintenance.MachineMaintenanceName(machineID, "instance-event-m")
	c.awaitEventOnNode(machineEvent)
	mm := withStartBy(t, c.ns, machineEvent)
	if mm.Spec.NodeName != c.ns+"-worker-a" {
		t.Errorf("worker-a's event is on node %q, want %s-worker-a", mm.Spec.NodeName, c.ns)
	}
	c.poll()
	time.Sleep(settle)
	for _, ns := range []string{c.ns, "default"} {
		var list pitstopv1alpha1.MachineMaintenanceList
		if err := env.Client.List(t.Context(), &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, o := range list.Items {
			if o.Spec.InstanceID == otherID || o.Spec.NodeName == forged.Name || o.Spec.NodeName == copycat.Name {
				t.Errorf("MachineMaintenance %s/%s puts instance %s's %s on node %q", o.Namespace, o.Name, o.Spec.InstanceID, o.Spec.Code, o.Spec.NodeName)
			}
		}
	}
	for _, n := range []*corev1.Node{forged, copycat} {
		got := &corev1.Node{}
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(n), got); err != nil {
			t.Fatal(err)
		}
		if code, ok := got.Labels[pitstopv1alpha1.LabelScheduledEvent]; ok {
			t.Errorf("node %s carries %s=%s", n.Name, pitstopv1alpha1.LabelScheduledEvent, code)
		}
	}
	if !hasNodeEvent(t, forged.Name, "UntrustedInstance", fmt.Sprintf("names instance %s, which aws names ip-10-0-9-9.ec2.internal (its private DNS name), not %s", otherID, forged.Name)) {
		t.Errorf("no UntrustedInstance Event on node %s", forged.Name)
	}
	if !hasNodeEvent(t, copycat.Name, "UntrustedInstance", fmt.Sprintf("names the instance of machine %s/worker-a, whose status.nodeRef names node %s-worker-a", c.ns, c.ns)) {
		t.Errorf("no UntrustedInstance Event on node %s", copycat.Name)
	}
}

// hasEventSaying waits for an Event of the reason in ns whose note says
// want.
func hasEventSaying(t *testing.T, ns, reason, want string) bool {
	t.Helper()
	return findEvent(t, func(e *eventsv1.Event) bool {
		return e.Namespace == ns && e.Reason == reason && strings.Contains(e.Note, want)
	})
}

// hasNodeEvent waits for an Event of the reason about a node whose note
// says want.
func hasNodeEvent(t *testing.T, node, reason, want string) bool {
	t.Helper()
	return findEvent(t, func(e *eventsv1.Event) bool {
		return e.Regarding.Kind == "Node" && e.Regarding.Name == node && e.Reason == reason && strings.Contains(e.Note, want)
	})
}

func findEvent(t *testing.T, match func(*eventsv1.Event) bool) bool {
	t.Helper()
	var notes []string
	err := func() error {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			var list eventsv1.EventList
			if err := env.Client.List(t.Context(), &list); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			notes = notes[:0]
			for i := range list.Items {
				if match(&list.Items[i]) {
					return nil
				}
				if e := &list.Items[i]; e.Type == corev1.EventTypeWarning {
					notes = append(notes, e.Reason+" "+e.Regarding.Name+": "+e.Note)
				}
			}
			time.Sleep(interval)
		}
		return fmt.Errorf("not found")
	}()
	if err != nil {
		t.Logf("Warning Events seen:\n%s", strings.Join(notes, "\n"))
		return false
	}
	return true
}
