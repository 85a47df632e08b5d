package machinemaintenance_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/controller/machinemaintenance"
	"github.com/pitstop-dev/pitstop/internal/engine"
	"github.com/pitstop-dev/pitstop/internal/explain"
	"github.com/pitstop-dev/pitstop/internal/fleet"
	"github.com/pitstop-dev/pitstop/internal/maintenance"
	"github.com/pitstop-dev/pitstop/internal/nodeview"
	"github.com/pitstop-dev/pitstop/internal/notify"
	"github.com/pitstop-dev/pitstop/internal/plugin/check"
	"github.com/pitstop-dev/pitstop/internal/sim/ec2sim"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// TestEventsBecomeMachineMaintenancesAndNodeSignals: an instance with two
// events gets two objects, beside its Machine and owned by it; a Node
// without a Machine gets one in pitstop's namespace; the events are read
// in one call per credentials. The node carries the earliest event's code, its start and its
// latest safe start, and the ScheduledEvent condition. An event the
// provider cancels ends Canceled, one that disappears after its start with
// nothing done ends Missed, and the node's signal moves to what is left.
func TestEventsBecomeMachineMaintenancesAndNodeSignals(t *testing.T) {
	c := newCluster(t, "notice")
	m, id := c.machine("worker-a", nil)
	_, quiet := c.machine("worker-b", nil)
	loneID, loneProviderID := c.instance("lone")
	lone := c.node("lone", loneProviderID)
	_ = quiet

	now := time.Now().UTC().Truncate(time.Second)
	retire := now.Add(72 * time.Hour)
	reboot := now.Add(48 * time.Hour)
	c.ec2.ScheduleEvent(id, ec2sim.ScheduledEvent{ID: "instance-event-0aa", Code: "instance-retirement", Description: "The instance is running on degraded hardware", NotBefore: retire})
	c.ec2.ScheduleEvent(id, ec2sim.ScheduledEvent{ID: "instance-event-0bb", Code: "system-reboot", Description: "scheduled reboot", NotBefore: reboot, NotAfter: reboot.Add(2 * time.Hour)})
	c.ec2.ScheduleEvent(loneID, ec2sim.ScheduledEvent{ID: "instance-event-0cc", Code: "system-maintenance", Description: "network maintenance", NotBefore: now.Add(-time.Minute).Add(30 * time.Minute)})

	var calls int
	eventually(t, func() error {
		sum := c.poll()
		if sum.Targets != 3 {
			return fmt.Errorf("poll saw %d instances, want 3 (2 Machines, 1 Node)", sum.Targets)
		}
		calls = sum.Calls
		return nil
	})
	retireName := maintenance.MachineMaintenanceName(id, "instance-event-0aa")
	rebootName := maintenance.MachineMaintenanceName(id, "instance-event-0bb")
	loneName := maintenance.MachineMaintenanceName(loneID, "instance-event-0cc")
	mm := withStartBy(t, c.ns, retireName)
	if mm.Spec.Provider != "aws" || mm.Spec.InstanceID != id || mm.Spec.Code != "instance-retirement" || mm.Spec.MachineName != m.Name ||
		mm.Spec.NodeName != c.ns+"-worker-a" || !mm.Spec.NotBefore.Time.Equal(retire) || mm.Labels[pitstopv1alpha1.LabelMachineMaintenanceNode] != mm.Spec.NodeName {
		t.Errorf("spec = %+v, labels %v", mm.Spec, mm.Labels)
	}
	if refs := mm.OwnerReferences; len(refs) != 1 || refs[0].Kind != "Machine" || refs[0].Name != m.Name {
		t.Errorf("owner = %v, want Machine %s", mm.OwnerReferences, m.Name)
	}
	// Replacement (the default expectation for a retirement) 30m and the
	// margin 1h before the start.
	if want := retire.Add(-90 * time.Minute); mm.Status.LatestSafeStart == nil || !mm.Status.LatestSafeStart.Time.Equal(want) {
		t.Errorf("latest safe start = %v, want %v", mm.Status.LatestSafeStart, want)
	}
	rb := withStartBy(t, c.ns, rebootName)
	if want := reboot.Add(-75 * time.Minute); !rb.Status.LatestSafeStart.Time.Equal(want) {
		t.Errorf("a reboot's latest safe start = %v, want %v (15m and the margin)", rb.Status.LatestSafeStart, want)
	}
	lm := phaseIs(t, c.ns, loneName, pitstopv1alpha1.EventScheduled)
	if lm.Spec.MachineName != "" || len(lm.OwnerReferences) != 0 || lm.Spec.NodeName != lone.Name {
		t.Errorf("a Node's event: %+v, owners %v", lm.Spec, lm.OwnerReferences)
	}
	if calls != 2 {
		t.Errorf("%d DescribeInstanceStatus calls for 3 instances, want 2: one per credentials (the Machines' Secret, the default chain for the Node without a Machine)", calls)
	}

	// The node carries the earliest event: the reboot.
	node := &corev1.Node{}
	eventually(t, func() error {
		if err := env.Client.Get(t.Context(), client.ObjectKey{Name: mm.Spec.NodeName}, node); err != nil {
			return err
		}
		if node.Labels[pitstopv1alpha1.LabelScheduledEvent] != "system-reboot" {
			return fmt.Errorf("label %q", node.Labels[pitstopv1alpha1.LabelScheduledEvent])
		}
		cond := nodeview.Condition(node, pitstopv1alpha1.ConditionScheduledEvent)
		if cond == nil || cond.Status != corev1.ConditionTrue || cond.Reason != "SystemReboot" || !strings.Contains(cond.Message, "1 more events") {
			return fmt.Errorf("condition %+v", cond)
		}
		// The latest safe start comes with the plan, a write after the
		// object's first.
		if node.Annotations[pitstopv1alpha1.AnnotationScheduledEventStartBy] == "" {
			return errors.New("no start-by annotation yet")
		}
		return nil
	})
	if got := node.Annotations[pitstopv1alpha1.AnnotationScheduledEventNotBefore]; got != reboot.Format(time.RFC3339) {
		t.Errorf("not-before annotation %q", got)
	}
	if got := node.Annotations[pitstopv1alpha1.AnnotationScheduledEventStartBy]; got != reboot.Add(-75*time.Minute).Format(time.RFC3339) {
		t.Errorf("start-by annotation %q", got)
	}
	if nodeview.Ready(node) == false {
		t.Error("the kubelet's Ready condition was lost writing the ScheduledEvent condition")
	}

	// The provider cancels the reboot: the node moves to the retirement.
	c.ec2.SetEventDescription(id, "instance-event-0bb", "[Canceled] scheduled reboot")
	c.poll()
	phaseIs(t, c.ns, rebootName, pitstopv1alpha1.EventCanceled)
	eventually(t, func() error {
		if err := env.Client.Get(t.Context(), client.ObjectKey{Name: mm.Spec.NodeName}, node); err != nil {
			return err
		}
		if got := node.Labels[pitstopv1alpha1.LabelScheduledEvent]; got != "instance-retirement" {
			return fmt.Errorf("label %q, want instance-retirement", got)
		}
		return nil
	})

	// The lone node's event started a minute... its start is in 29
	// minutes; make it have passed, then vanish with nothing done: Missed.
	c.ec2.RemoveEvent(loneID, "instance-event-0cc")
	c.ec2.ScheduleEvent(loneID, ec2sim.ScheduledEvent{ID: "instance-event-0cc", Code: "system-maintenance", Description: "network maintenance", NotBefore: now.Add(-time.Hour)})
	c.poll()
	eventually(t, func() error {
		lm, err := mmOf(t, c.ns, loneName)
		if err != nil {
			return err
		}
		if !lm.Spec.NotBefore.Time.Equal(now.Add(-time.Hour)) {
			return fmt.Errorf("not rescheduled: %v", lm.Spec.NotBefore)
		}
		return nil
	})
	c.ec2.RemoveEvent(loneID, "instance-event-0cc")
	c.poll()
	phaseIs(t, c.ns, loneName, pitstopv1alpha1.EventMissed)
	eventually(t, func() error {
		if err := env.Client.Get(t.Context(), client.ObjectKey{Name: lone.Name}, node); err != nil {
			return err
		}
		if _, ok := node.Labels[pitstopv1alpha1.LabelScheduledEvent]; ok {
			return fmt.Errorf("label still there: %v", node.Labels)
		}
		if _, ok := node.Annotations[pitstopv1alpha1.AnnotationScheduledEventStartBy]; ok {
			return fmt.Errorf("annotations still there: %v", node.Annotations)
		}
		cond := nodeview.Condition(node, pitstopv1alpha1.ConditionScheduledEvent)
		if cond == nil || cond.Status != corev1.ConditionFalse {
			return fmt.Errorf("condition %+v, want False", cond)
		}
		return nil
	})
	if !hasEvent(t, c.ns, "Rescheduled") {
		t.Error("no Rescheduled Event")
	}

	// An object deleted by hand takes its event off the node.
	if err := env.Client.Delete(t.Context(), mm); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() error {
		if err := env.Client.Get(t.Context(), client.ObjectKey{Name: mm.Spec.NodeName}, node); err != nil {
			return err
		}
		if got, ok := node.Labels[pitstopv1alpha1.LabelScheduledEvent]; ok {
			return fmt.Errorf("label %q left after its object was deleted", got)
		}
		return nil
	})
}

// TestAPollThatFailsChangesNothingAndSaysSo: EC2 throttling every attempt
// leaves the objects as they were (never ended as if the events were
// gone), marks them not Synced with a Warning Event, and the next poll
// that works puts them back.
func TestAPollThatFailsChangesNothingAndSaysSo(t *testing.T) {
	c := newCluster(t, "pollfail")
	_, id := c.machine("worker-a", nil)
	c.ec2.ScheduleEvent(id, ec2sim.ScheduledEvent{ID: "instance-event-1", Code: "instance-stop", NotBefore: time.Now().Add(24 * time.Hour)})
	name := maintenance.MachineMaintenanceName(id, "instance-event-1")
	eventually(t, func() error {
		c.poll()
		_, err := mmOf(t, c.ns, name)
		return err
	})
	phaseIs(t, c.ns, name, pitstopv1alpha1.EventScheduled)

	c.ec2.Fail("DescribeInstanceStatus", -1, ec2sim.Throttled)
	if _, err := c.poller.Poll(t.Context()); err == nil || !strings.Contains(err.Error(), "RequestLimitExceeded") {
		t.Errorf("a failed poll returned %v", err)
	}
	eventually(t, func() error {
		mm, err := mmOf(t, c.ns, name)
		if err != nil {
			return err
		}
		cond := meta.FindStatusCondition(mm.Status.Conditions, machinemaintenance.ConditionSynced)
		if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != machinemaintenance.ReasonPollFailed || !strings.Contains(cond.Message, "RequestLimitExceeded") {
			return fmt.Errorf("Synced = %+v", cond)
		}
		if mm.Status.Phase != pitstopv1alpha1.EventScheduled {
			return fmt.Errorf("phase %s after a failed poll", mm.Status.Phase)
		}
		return nil
	})
	if !hasEvent(t, c.ns, machinemaintenance.ReasonPollFailed) {
		t.Error("no PollFailed Event")
	}
	c.ec2.ClearFaults("DescribeInstanceStatus")
	c.poll()
	eventually(t, func() error {
		mm, err := mmOf(t, c.ns, name)
		if err != nil {
			return err
		}
		if cond := meta.FindStatusCondition(mm.Status.Conditions, machinemaintenance.ConditionSynced); cond == nil || cond.Status != metav1.ConditionTrue {
			return fmt.Errorf("Synced = %+v", cond)
		}
		return nil
	})
}

// TestFinishedObjectsAreKeptForTheRetentionThenRemoved: a canceled event's
// object stays for the retention period, then goes; an open one stays.
func TestFinishedObjectsAreKeptForTheRetentionThenRemoved(t *testing.T) {
	c := newCluster(t, "retention", func(o *machinemaintenance.Options) { o.Retention = 3 * time.Second })
	_, id := c.machine("worker-a", nil)
	c.ec2.ScheduleEvent(id, ec2sim.ScheduledEvent{ID: "instance-event-a", Code: "instance-stop", NotBefore: time.Now().Add(24 * time.Hour)})
	c.ec2.ScheduleEvent(id, ec2sim.ScheduledEvent{ID: "instance-event-b", Code: "system-reboot", NotBefore: time.Now().Add(24 * time.Hour)})
	a, b := maintenance.MachineMaintenanceName(id, "instance-event-a"), maintenance.MachineMaintenanceName(id, "instance-event-b")
	eventually(t, func() error {
		c.poll()
		_, err := mmOf(t, c.ns, b)
		return err
	})
	c.ec2.RemoveEvent(id, "instance-event-a") // withdrawn before its start: Canceled
	c.poll()
	done := phaseIs(t, c.ns, a, pitstopv1alpha1.EventCanceled)
	if done.Status.CompletionTime == nil {
		t.Fatal("no completionTime")
	}
	if len(done.OwnerReferences) != 0 {
		eventually(t, func() error {
			mm, err := mmOf(t, c.ns, a)
			if err == nil && len(mm.OwnerReferences) != 0 {
				return fmt.Errorf("a finished record is still owned by its Machine: %v", mm.OwnerReferences)
			}
			return err
		})
	}
	eventually(t, func() error { return gone(t, done) })
	if time.Since(done.Status.CompletionTime.Time) < 3*time.Second {
		t.Errorf("removed %s after completion, before the retention", time.Since(done.Status.CompletionTime.Time))
	}
	if _, err := mmOf(t, c.ns, b); err != nil {
		t.Errorf("the open event's object: %v", err)
	}
}

// TestDeadlineAtRiskWhenNoProfileTakesTheEventUp: an event whose latest
// safe start is nearer than the warning with no profile on its node is at
// risk, with a Warning Event and the metric; once a profile has the node
// maintenance-required it is Planned and on track.
func TestDeadlineAtRiskWhenNoProfileTakesTheEventUp(t *testing.T) {
	var mu sync.Mutex
	var told []notify.Event
	c := newCluster(t, "atrisk", func(o *machinemaintenance.Options) {
		o.Notify = func(_ context.Context, node *corev1.Node, e notify.Event) error {
			mu.Lock()
			defer mu.Unlock()
			told = append(told, e)
			return nil
		}
	})
	_, id := c.machine("worker-a", nil)
	c.ec2.ScheduleEvent(id, ec2sim.ScheduledEvent{ID: "instance-event-r", Code: "instance-retirement", NotBefore: time.Now().Add(6 * time.Hour)})
	name := maintenance.MachineMaintenanceName(id, "instance-event-r")
	eventually(t, func() error {
		c.poll()
		mm, err := mmOf(t, c.ns, name)
		if err != nil {
			return err
		}
		cond := meta.FindStatusCondition(mm.Status.Conditions, machinemaintenance.ConditionDeadlineAtRisk)
		if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != machinemaintenance.ReasonNoProfile {
			return fmt.Errorf("DeadlineAtRisk = %+v", cond)
		}
		return nil
	})
	if !hasEvent(t, c.ns, "DeadlineAtRisk") {
		t.Error("no DeadlineAtRisk Event")
	}
	// The profiles are told once, after the condition is written; polls
	// that find the same risk tell them nothing more.
	eventually(t, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(told) == 0 {
			return fmt.Errorf("the profiles are not told yet")
		}
		return nil
	})
	c.poll()
	c.poll()
	time.Sleep(time.Second)
	mu.Lock()
	if len(told) != 1 || told[0].Reason != machinemaintenance.ReasonNoProfile || told[0].Object != c.ns+"/"+name || told[0].Code != "instance-retirement" || told[0].LatestSafeStart.IsZero() {
		t.Errorf("profiles told %+v, want the NoProfile risk of %s once", told, name)
	}
	mu.Unlock()
	// pitstop explain node shows the event, its plan and the risk.
	report, err := explain.Node(t.Context(), env.Client, env.Client, fleet.NewEvaluator(env.Client, check.Deps{}), c.ns+"-worker-a", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	if err := report.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Scheduled event instance-retirement at ", "(MachineMaintenance " + c.ns + "/" + name + "): Scheduled", "latest safe start: ", "plan: no profile has taken up the event", "AT RISK: no profile has taken up instance-retirement"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("pitstop explain node lacks %q:\n%s", want, text.String())
		}
	}
	// pitstop explain machine: the Machine, its event and plan, its node.
	mreport, err := explain.Machine(t.Context(), env.Client, env.Client, fleet.NewEvaluator(env.Client, check.Deps{}), c.ns+"/worker-a", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	text.Reset()
	if err := mreport.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Machine " + c.ns + "/worker-a: Running, node " + c.ns + "-worker-a", "Scheduled event instance-retirement at ", "Node " + c.ns + "-worker-a: "} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("pitstop explain machine lacks %q:\n%s", want, text.String())
		}
	}
	if _, err := explain.Machine(t.Context(), env.Client, env.Client, fleet.NewEvaluator(env.Client, check.Deps{}), "worker-a", time.Now()); err == nil || !strings.Contains(err.Error(), "NAMESPACE/NAME") {
		t.Errorf("a machine named without its namespace: %v", err)
	}
	node := &corev1.Node{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: c.ns + "-worker-a"}, node); err != nil {
		t.Fatal(err)
	}
	base := node.DeepCopy()
	node.Labels[pitstopv1alpha1.LabelState] = string(pitstopv1alpha1.StateMaintenanceRequired)
	if err := env.Client.Patch(t.Context(), node, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	mm := phaseIs(t, c.ns, name, pitstopv1alpha1.EventPlanned)
	if cond := meta.FindStatusCondition(mm.Status.Conditions, machinemaintenance.ConditionDeadlineAtRisk); cond == nil || cond.Status != metav1.ConditionFalse {
		t.Errorf("a planned event: DeadlineAtRisk = %+v", cond)
	}
	if !strings.Contains(mm.Status.Plan, "maintenance-required") {
		t.Errorf("plan %q", mm.Status.Plan)
	}
}

// hasEvent says whether an Event of the reason was recorded in ns.
func hasEvent(t *testing.T, ns, reason string) bool {
	t.Helper()
	var found bool
	testutil.Eventually(t, 10*time.Second, interval, func() error {
		var list eventsv1.EventList
		if err := env.Client.List(t.Context(), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Reason == reason {
				found = true
				return nil
			}
		}
		return fmt.Errorf("no %s Event yet", reason)
	})
	return found
}

// TestDeadlineAtRiskWhenNoTurnComesInTime: a Planned event is at risk as
// soon as the engine's last decisions for its node take no transition and
// the next change of any check's answer (a window opening) comes after the
// latest safe start; on track while one comes before it.
func TestDeadlineAtRiskWhenNoTurnComesInTime(t *testing.T) {
	var nextChange atomic.Int64
	nextChange.Store(time.Now().Add(time.Hour).Unix())
	c := newCluster(t, "noturn", func(o *machinemaintenance.Options) {
		o.Outlook = func(node string) map[string]engine.Decision {
			return map[string]engine.Decision{"cloud": {Take: -1, NextChange: time.Unix(nextChange.Load(), 0)}}
		}
	})
	_, id := c.machine("worker-a", nil)
	name := c.retireID(id, "instance-event-w")
	patchNode(t, c.ns+"-worker-a", func(n *corev1.Node) {
		n.Labels[pitstopv1alpha1.LabelState] = string(pitstopv1alpha1.StateMaintenanceRequired)
	})
	atRisk := func(want metav1.ConditionStatus) *metav1.Condition {
		var cond *metav1.Condition
		eventually(t, func() error {
			mm, err := mmOf(t, c.ns, name)
			if err != nil {
				return err
			}
			cond = meta.FindStatusCondition(mm.Status.Conditions, machinemaintenance.ConditionDeadlineAtRisk)
			if mm.Status.Phase != pitstopv1alpha1.EventPlanned || cond == nil || cond.Status != want {
				return fmt.Errorf("phase %s, DeadlineAtRisk %+v", mm.Status.Phase, cond)
			}
			return nil
		})
		return cond
	}
	atRisk(metav1.ConditionFalse)

	// The window now opens only after the latest safe start.
	nextChange.Store(time.Now().Add(80 * time.Hour).Unix())
	mm, _ := mmOf(t, c.ns, name)
	base := mm.DeepCopy()
	mm.Annotations = map[string]string{"example.com/poke": "1"}
	if err := env.Client.Patch(t.Context(), mm, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	cond := atRisk(metav1.ConditionTrue)
	if cond.Reason != machinemaintenance.ReasonNoTurnInTime || !strings.Contains(cond.Message, "none can before") {
		t.Errorf("DeadlineAtRisk = %+v", cond)
	}
}
