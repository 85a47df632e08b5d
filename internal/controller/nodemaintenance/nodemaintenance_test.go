package nodemaintenance_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/budget"
	"github.com/pitstop-dev/pitstop/internal/controller/nodemaintenance"
	"github.com/pitstop-dev/pitstop/internal/manager"
	"github.com/pitstop-dev/pitstop/internal/nodeview"
	"github.com/pitstop-dev/pitstop/internal/testutil"
	"github.com/pitstop-dev/pitstop/internal/testutil/clustertest"
)

const (
	condCordoned = pitstopv1alpha1.ConditionCordoned
	condDrained  = pitstopv1alpha1.ConditionDrained
	condReady    = pitstopv1alpha1.ConditionReady
)

// TestDrainsTheNodeAndRestoresItOnDelete is the whole life of a
// maintenance: cordon and taint, evict what must go, leave DaemonSet and
// mirror pods, delete finished pods, report success; then delete the object
// and get the node back.
func TestDrainsTheNodeAndRestoresItOnDelete(t *testing.T) {
	startManager(t, true)
	testutil.Kubelet(t, env.Clientset)
	ns := namespace(t, "happy")
	create(t, testutil.Node("happy-1"))
	managedPods(t, ns, "happy-1", "web", 4)
	agent := testutil.Pod(ns, "agent", testutil.OnNode("happy-1"), testutil.OwnedBy("DaemonSet", "agent"))
	static := testutil.Pod(ns, "static", testutil.OnNode("happy-1"), func(p *corev1.Pod) {
		p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"}
	})
	job := testutil.Pod(ns, "job-done", testutil.OnNode("happy-1"), testutil.OwnedBy("Job", "job"))
	create(t, agent, static, job)
	awaitRunning(t, agent, static, job)
	testutil.Eventually(t, 5*time.Second, 20*time.Millisecond, func() error {
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(job), job); err != nil {
			return err
		}
		job.Status.Phase = corev1.PodSucceeded
		return env.Client.Status().Update(t.Context(), job)
	})

	nm := nodeMaintenance("happy", "happy-1")
	create(t, nm)
	got := awaitCondition(t, nm, condReady, metav1.ConditionTrue, pitstopv1alpha1.ReasonReady, 20*time.Second)

	if got.Status.Phase != pitstopv1alpha1.PhaseSucceeded || got.Status.DrainProgress != 100 {
		t.Errorf("phase %s progress %d, want Succeeded 100", got.Status.Phase, got.Status.DrainProgress)
	}
	if got.Status.TotalPods != 7 || got.Status.EvictionPods != 5 {
		t.Errorf("totalPods %d evictionPods %d, want 7 and 5 (4 web + the finished job)", got.Status.TotalPods, got.Status.EvictionPods)
	}
	if left := podsOn(t, ns, "happy-1"); !slices.Equal(left, []string{"agent", "static"}) {
		t.Errorf("pods left on the node: %v, want the DaemonSet and mirror pods", left)
	}
	n := node(t, "happy-1")
	if !n.Spec.Unschedulable || !nodeview.HasTaint(n, pitstopv1alpha1.TaintDrain) || !nodeview.HasTaint(n, corev1.TaintNodeUnschedulable) {
		t.Errorf("node not cordoned and tainted: unschedulable=%v taints=%v", n.Spec.Unschedulable, n.Spec.Taints)
	}
	if n.Annotations[pitstopv1alpha1.AnnotationCordonedBefore] != "false" {
		t.Errorf("cordoned-before annotation = %q, want false", n.Annotations[pitstopv1alpha1.AnnotationCordonedBefore])
	}
	// A remediator (the Node Health Check operator and its remediators)
	// leaves a node in maintenance alone.
	if got := n.Labels[pitstopv1alpha1.LabelExcludeFromRemediation]; got != "true" {
		t.Errorf("%s = %q during the maintenance, want \"true\"", pitstopv1alpha1.LabelExcludeFromRemediation, got)
	}
	awaitEvents(t, nm, pitstopv1alpha1.EventMaintenanceStarted, pitstopv1alpha1.EventCordoned, pitstopv1alpha1.EventDrained)

	if err := env.Client.Delete(t.Context(), nm); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, 50*time.Millisecond, func() error {
		return ignoreGone(env.Client.Get(t.Context(), client.ObjectKeyFromObject(nm), &pitstopv1alpha1.NodeMaintenance{}))
	})
	n = node(t, "happy-1")
	if n.Spec.Unschedulable || nodeview.HasTaint(n, pitstopv1alpha1.TaintDrain) || nodeview.HasTaint(n, corev1.TaintNodeUnschedulable) {
		t.Errorf("node not restored: unschedulable=%v taints=%v", n.Spec.Unschedulable, n.Spec.Taints)
	}
	if _, ok := n.Annotations[pitstopv1alpha1.AnnotationCordonedBefore]; ok {
		t.Error("cordoned-before annotation left on the node")
	}
	if _, ok := n.Labels[pitstopv1alpha1.LabelExcludeFromRemediation]; ok {
		t.Error("exclude-from-remediation label left on the node")
	}
}

// ignoreGone turns "not found" into success and presence into an error.
func ignoreGone(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err == nil {
		return errStillThere
	}
	return err
}

var errStillThere = errorString("object still exists")

type errorString string

func (e errorString) Error() string { return string(e) }

// TestBlockedByPodDisruptionBudgetThenAllowed: while a budget allows no
// disruption the condition names the budget and the pods; once it allows
// one, the drain goes on without waiting for the retry interval.
func TestBlockedByPodDisruptionBudgetThenAllowed(t *testing.T) {
	startManager(t, true)
	testutil.Kubelet(t, env.Clientset)
	ns := namespace(t, "budget")
	create(t, testutil.Node("budget-1"))
	managedPods(t, ns, "budget-1", "web", 2)
	budget := pdb(t, ns, "web", 0)

	nm := nodeMaintenance("budget", "budget-1", func(nm *pitstopv1alpha1.NodeMaintenance) {
		nm.Spec.Drain.PodEvictionRetryInterval = &pitstopv1alpha1.Duration{Duration: time.Hour}
	})
	create(t, nm)
	got := awaitCondition(t, nm, condDrained, metav1.ConditionFalse, pitstopv1alpha1.ReasonBlockedByPodDisruptionBudget, 10*time.Second)
	msg := condition(got, condDrained).Message
	if !strings.Contains(msg, "PodDisruptionBudget budget/web allows 0 disruptions") || !strings.Contains(msg, "budget/web-0") {
		t.Errorf("condition message %q does not name the budget and the pods", msg)
	}
	if len(got.Status.Blockers) != 2 || got.Status.Blockers[0].PodDisruptionBudget != "budget/web" || got.Status.Blockers[0].Reason != pitstopv1alpha1.ReasonBlockedByPodDisruptionBudget {
		t.Errorf("blockers = %+v, want both pods blocked by budget/web", got.Status.Blockers)
	}
	if got.Status.Phase != pitstopv1alpha1.PhaseRunning || got.Status.DrainProgress != 0 {
		t.Errorf("phase %s progress %d, want Running 0", got.Status.Phase, got.Status.DrainProgress)
	}
	awaitEvents(t, nm, pitstopv1alpha1.EventEvictionBlocked)

	// The retry interval is an hour: only the budget's change can wake the
	// drain in time.
	setAllowed(t, budget, 5)
	awaitCondition(t, nm, condDrained, metav1.ConditionTrue, pitstopv1alpha1.ReasonDrained, 10*time.Second)
	if left := podsOn(t, ns, "budget-1"); len(left) != 0 {
		t.Errorf("pods left: %v", left)
	}
}

// TestUnmanagedPodBlocksUntilDeleteIsAllowed: a bare pod blocks the drain
// with a clear condition; switching unmanagedPods to Delete evicts it.
func TestUnmanagedPodBlocksUntilDeleteIsAllowed(t *testing.T) {
	startManager(t, true)
	testutil.Kubelet(t, env.Clientset)
	ns := namespace(t, "bare")
	create(t, testutil.Node("bare-1"))
	bare := testutil.Pod(ns, "debug", testutil.OnNode("bare-1"))
	create(t, bare)
	awaitRunning(t, bare)

	nm := nodeMaintenance("bare", "bare-1")
	create(t, nm)
	got := awaitCondition(t, nm, condDrained, metav1.ConditionFalse, pitstopv1alpha1.ReasonBlockedByUnmanagedPods, 10*time.Second)
	if msg := condition(got, condDrained).Message; !strings.Contains(msg, "bare/debug") || !strings.Contains(msg, "unmanagedPods") {
		t.Errorf("condition message %q does not name the pod and the setting", msg)
	}
	if len(got.Status.Blockers) != 1 || got.Status.Blockers[0].Pod.Name != "debug" {
		t.Errorf("blockers = %+v", got.Status.Blockers)
	}

	got.Spec.Drain.UnmanagedPods = pitstopv1alpha1.UnmanagedPodsDelete
	if err := env.Client.Update(t.Context(), got); err != nil {
		t.Fatal(err)
	}
	awaitCondition(t, nm, condDrained, metav1.ConditionTrue, pitstopv1alpha1.ReasonDrained, 10*time.Second)
}

// TestTimeoutFails: a drain that cannot finish within spec.drain.timeout
// fails, leaves the pods running and the node cordoned.
func TestTimeoutFails(t *testing.T) {
	startManager(t, true)
	testutil.Kubelet(t, env.Clientset)
	ns := namespace(t, "timeout-fail")
	create(t, testutil.Node("timeout-fail-1"))
	managedPods(t, ns, "timeout-fail-1", "web", 1)
	pdb(t, ns, "web", 0)

	nm := nodeMaintenance("timeout-fail", "timeout-fail-1", func(nm *pitstopv1alpha1.NodeMaintenance) {
		nm.Spec.Drain.Timeout = &pitstopv1alpha1.Duration{Duration: 2 * time.Second}
	})
	create(t, nm)
	got := awaitCondition(t, nm, condDrained, metav1.ConditionFalse, pitstopv1alpha1.ReasonDrainTimedOut, 15*time.Second)
	if got.Status.Phase != pitstopv1alpha1.PhaseFailed {
		t.Errorf("phase %s, want Failed", got.Status.Phase)
	}
	if left := podsOn(t, ns, "timeout-fail-1"); len(left) != 1 {
		t.Errorf("pods left: %v, want the protected pod still running", left)
	}
	if !node(t, "timeout-fail-1").Spec.Unschedulable {
		t.Error("node uncordoned after a failed drain")
	}
	awaitEvents(t, nm, pitstopv1alpha1.EventDrainFailed)
}

// TestTimeoutForceDeletes: with onTimeout ForceDelete the remaining pods
// are deleted past their budget, and that is recorded.
func TestTimeoutForceDeletes(t *testing.T) {
	startManager(t, true)
	testutil.Kubelet(t, env.Clientset)
	ns := namespace(t, "timeout-force")
	create(t, testutil.Node("timeout-force-1"))
	managedPods(t, ns, "timeout-force-1", "web", 2)
	pdb(t, ns, "web", 0)

	nm := nodeMaintenance("timeout-force", "timeout-force-1", func(nm *pitstopv1alpha1.NodeMaintenance) {
		nm.Spec.Drain.Timeout = &pitstopv1alpha1.Duration{Duration: 2 * time.Second}
		nm.Spec.Drain.OnTimeout = pitstopv1alpha1.DrainTimeoutForceDelete
	})
	create(t, nm)
	got := awaitCondition(t, nm, condDrained, metav1.ConditionTrue, pitstopv1alpha1.ReasonDrainedByForce, 15*time.Second)
	if got.Status.ForceDeletedPods != 2 {
		t.Errorf("forceDeletedPods = %d, want 2", got.Status.ForceDeletedPods)
	}
	if got.Status.Phase != pitstopv1alpha1.PhaseSucceeded {
		t.Errorf("phase %s, want Succeeded", got.Status.Phase)
	}
	awaitEvents(t, nm, pitstopv1alpha1.EventForceDeleted)
}

// TestNodeCordonedBeforeStaysCordoned: pitstop never uncordons a node that
// someone else had cordoned first.
func TestNodeCordonedBeforeStaysCordoned(t *testing.T) {
	startManager(t, true)
	create(t, testutil.Node("precordoned-1", testutil.Unschedulable()))
	nm := nodeMaintenance("precordoned", "precordoned-1")
	create(t, nm)
	awaitCondition(t, nm, condReady, metav1.ConditionTrue, pitstopv1alpha1.ReasonReady, 10*time.Second)
	if v := node(t, "precordoned-1").Annotations[pitstopv1alpha1.AnnotationCordonedBefore]; v != "true" {
		t.Fatalf("cordoned-before = %q, want true", v)
	}
	if err := env.Client.Delete(t.Context(), nm); err != nil {
		t.Fatal(err)
	}
	awaitEvents(t, nm, pitstopv1alpha1.EventLeftCordoned)
	n := node(t, "precordoned-1")
	if !n.Spec.Unschedulable {
		t.Error("node uncordoned although it was cordoned before the maintenance")
	}
	if nodeview.HasTaint(n, pitstopv1alpha1.TaintDrain) {
		t.Error("pitstop's taint left on the node")
	}
}

// TestRestartMidDrainFinishes kills the manager while a drain is blocked
// and starts a new one: it picks up from the state in the cluster, does not
// start the maintenance twice, and finishes.
func TestRestartMidDrainFinishes(t *testing.T) {
	first := startManager(t, true)
	testutil.Kubelet(t, env.Clientset)
	ns := namespace(t, "restart")
	create(t, testutil.Node("restart-1"))
	managedPods(t, ns, "restart-1", "web", 3)
	budget := pdb(t, ns, "web", 0)
	nm := nodeMaintenance("restart", "restart-1")
	create(t, nm)
	before := awaitCondition(t, nm, condDrained, metav1.ConditionFalse, pitstopv1alpha1.ReasonBlockedByPodDisruptionBudget, 10*time.Second)
	first.Stop()

	setAllowed(t, budget, 3)
	// The new manager takes the drain over: it trusts the budget's status,
	// which changed while no manager ran, once --pdb-status-settle has
	// passed (shortened here), or once the status changes again.
	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{Webhook: true, Tune: func(o *manager.Options) {
		o.NodeMaintenance.BudgetSettle = 3 * time.Second
	}})
	awaitCondition(t, nm, condDrained, metav1.ConditionFalse, pitstopv1alpha1.ReasonWaitingForPodDisruptionBudgetStatus, 3*time.Second)
	after := awaitCondition(t, nm, condDrained, metav1.ConditionTrue, pitstopv1alpha1.ReasonDrained, 15*time.Second)
	if !after.Status.StartTime.Equal(before.Status.StartTime) || after.Status.EvictionPods != 3 {
		t.Errorf("the restart began a new drain: startTime %v → %v, evictionPods %d", before.Status.StartTime, after.Status.StartTime, after.Status.EvictionPods)
	}
	started := 0
	for _, r := range eventReasons(t, nm) {
		if r == pitstopv1alpha1.EventMaintenanceStarted {
			started++
		}
	}
	if started != 1 {
		t.Errorf("%d MaintenanceStarted events, want 1", started)
	}
}

// TestRefusedUpFront checks the webhook's refusals: each names the node and
// the reason in one sentence, and nothing is created.
func TestRefusedUpFront(t *testing.T) {
	startManager(t, true)
	removeAtEnd(t, "refuse-")
	create(t,
		testutil.Node("refuse-worker"),
		testutil.Node("refuse-cp-0", testutil.ControlPlane()),
		testutil.Node("refuse-cp-1", testutil.ControlPlane()),
		testutil.Node("refuse-cp-2", testutil.ControlPlane()),
	)
	create(t, nodeMaintenance("refuse-first", "refuse-worker"), nodeMaintenance("refuse-cp-first", "refuse-cp-0"))
	for _, tc := range []struct {
		name, node, want string
	}{
		{"missing node", "refuse-nowhere", `spec.nodeName: Invalid value: "refuse-nowhere": node refuse-nowhere does not exist`},
		{"second maintenance of a node", "refuse-worker", "node refuse-worker is already in maintenance by NodeMaintenance refuse-first"},
		{"control-plane quorum", "refuse-cp-1", "control-plane node refuse-cp-1 cannot go into maintenance: 1 of 3 control-plane nodes would stay Ready, fewer than the quorum of 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := env.Client.Create(t.Context(), nodeMaintenance("refuse-"+strings.ReplaceAll(tc.name, " ", "-"), tc.node))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want a refusal saying %q", err, tc.want)
			}
		})
	}
	bad := nodeMaintenance("refuse-selector", "refuse-worker-2", func(nm *pitstopv1alpha1.NodeMaintenance) {
		nm.Spec.Drain.SkipPodsSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Resembles"}}}
	})
	create(t, testutil.Node("refuse-worker-2"))
	if err := env.Client.Create(t.Context(), bad); err == nil || !strings.Contains(err.Error(), "spec.drain.skipPodsSelector") {
		t.Errorf("creating a NodeMaintenance with a bad selector: got %v, want a refusal naming spec.drain.skipPodsSelector", err)
	}
	// Quorum counts Ready nodes: with refuse-cp-0 back, one more may go.
	if err := env.Client.Delete(t.Context(), nodeMaintenance("refuse-cp-first", "refuse-cp-0")); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, 100*time.Millisecond, func() error {
		return env.Client.Create(t.Context(), nodeMaintenance("refuse-cp-second", "refuse-cp-1"))
	})
}

// TestControllerHoldsQuorumWithoutTheWebhook: with the webhook off (or
// bypassed by two creates at the same instant), the controller itself
// never takes a control-plane node down past quorum: the second one waits.
func TestControllerHoldsQuorumWithoutTheWebhook(t *testing.T) {
	startManager(t, false)
	removeAtEnd(t, "quorum-")
	create(t,
		testutil.Node("quorum-cp-0", testutil.ControlPlane()),
		testutil.Node("quorum-cp-1", testutil.ControlPlane()),
		testutil.Node("quorum-cp-2", testutil.ControlPlane()),
	)
	a, b := nodeMaintenance("quorum-a", "quorum-cp-0"), nodeMaintenance("quorum-b", "quorum-cp-1")
	create(t, a, b)
	testutil.Eventually(t, 10*time.Second, 50*time.Millisecond, func() error {
		ga, gb := get(t, a), get(t, b)
		reasons := []string{reason(ga, condCordoned), reason(gb, condCordoned)}
		slices.Sort(reasons)
		if !slices.Equal(reasons, []string{pitstopv1alpha1.ReasonCordoned, pitstopv1alpha1.ReasonQuorumProtected}) {
			return errorString("cordon reasons " + strings.Join(reasons, ","))
		}
		return nil
	})
	cordonedCP := 0
	for _, n := range []string{"quorum-cp-0", "quorum-cp-1", "quorum-cp-2"} {
		if node(t, n).Spec.Unschedulable {
			cordonedCP++
		}
	}
	if cordonedCP != 1 {
		t.Fatalf("%d control-plane nodes cordoned, want 1", cordonedCP)
	}
}

// TestDuplicateWaitsForTheHolder: two NodeMaintenances for one node that
// got past admission together: the older acts, the newer reports Duplicate
// and, deleted, leaves the node to the older.
func TestDuplicateWaitsForTheHolder(t *testing.T) {
	startManager(t, false)
	create(t, testutil.Node("dup-1"))
	older := nodeMaintenance("dup-older", "dup-1")
	create(t, older)
	time.Sleep(1100 * time.Millisecond) // creation timestamps have one-second resolution
	newer := nodeMaintenance("dup-newer", "dup-1")
	create(t, newer)
	awaitCondition(t, newer, condCordoned, metav1.ConditionFalse, pitstopv1alpha1.ReasonDuplicate, 10*time.Second)
	awaitCondition(t, older, condReady, metav1.ConditionTrue, pitstopv1alpha1.ReasonReady, 10*time.Second)
	if err := env.Client.Delete(t.Context(), newer); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, 50*time.Millisecond, func() error {
		return ignoreGone(env.Client.Get(t.Context(), client.ObjectKeyFromObject(newer), &pitstopv1alpha1.NodeMaintenance{}))
	})
	if !node(t, "dup-1").Spec.Unschedulable {
		t.Error("deleting the duplicate uncordoned the node the other maintenance holds")
	}
}

// TestDeletedNodeDoesNotHang: a node that disappears is reported, and the
// NodeMaintenance can still be deleted.
func TestDeletedNodeDoesNotHang(t *testing.T) {
	startManager(t, true)
	create(t, testutil.Node("vanish-1"))
	nm := nodeMaintenance("vanish", "vanish-1")
	create(t, nm)
	awaitCondition(t, nm, condReady, metav1.ConditionTrue, pitstopv1alpha1.ReasonReady, 10*time.Second)
	if err := env.Client.Delete(t.Context(), node(t, "vanish-1")); err != nil {
		t.Fatal(err)
	}
	got := awaitCondition(t, nm, condCordoned, metav1.ConditionFalse, pitstopv1alpha1.ReasonNodeNotFound, 10*time.Second)
	if got.Status.Phase != pitstopv1alpha1.PhaseFailed {
		t.Errorf("phase %s, want Failed", got.Status.Phase)
	}
	if err := env.Client.Delete(t.Context(), nm); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, 50*time.Millisecond, func() error {
		return ignoreGone(env.Client.Get(t.Context(), client.ObjectKeyFromObject(nm), &pitstopv1alpha1.NodeMaintenance{}))
	})
}

// TestExcludeNodeDrainingCordonsOnly honours the Machine API's annotation.
func TestExcludeNodeDrainingCordonsOnly(t *testing.T) {
	startManager(t, true)
	testutil.Kubelet(t, env.Clientset)
	removeAtEnd(t, "exclude")
	ns := namespace(t, "exclude")
	create(t, testutil.Node("exclude-1"))
	managedPods(t, ns, "exclude-1", "web", 2)
	nm := nodeMaintenance("exclude", "exclude-1", func(nm *pitstopv1alpha1.NodeMaintenance) {
		nm.Annotations = map[string]string{pitstopv1alpha1.AnnotationExcludeNodeDraining: ""}
	})
	create(t, nm)
	awaitCondition(t, nm, condDrained, metav1.ConditionTrue, pitstopv1alpha1.ReasonDrainSkipped, 10*time.Second)
	if !node(t, "exclude-1").Spec.Unschedulable {
		t.Error("node not cordoned")
	}
	if left := podsOn(t, ns, "exclude-1"); len(left) != 2 {
		t.Errorf("pods evicted although draining is excluded: %v left", left)
	}
}

func condition(nm *pitstopv1alpha1.NodeMaintenance, condType string) metav1.Condition {
	for _, c := range nm.Status.Conditions {
		if c.Type == condType {
			return c
		}
	}
	return metav1.Condition{}
}

func reason(nm *pitstopv1alpha1.NodeMaintenance, condType string) string {
	return condition(nm, condType).Reason
}

// TestTakesOverAMedik8sMaintenance: a node cordoned and tainted by the
// medik8s operator (a cluster switching to pitstop mid-maintenance) is
// uncordoned when the maintenance ends, and medik8s' taint goes too.
func TestTakesOverAMedik8sMaintenance(t *testing.T) {
	startManager(t, true)
	create(t, testutil.Node("medik8s-1", testutil.Unschedulable(), func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: "medik8s.io/drain", Effect: corev1.TaintEffectNoSchedule}}
	}))
	nm := nodeMaintenance("medik8s-takeover", "medik8s-1")
	create(t, nm)
	awaitCondition(t, nm, condReady, metav1.ConditionTrue, pitstopv1alpha1.ReasonReady, 10*time.Second)
	if err := env.Client.Delete(t.Context(), nm); err != nil {
		t.Fatal(err)
	}
	awaitEvents(t, nm, pitstopv1alpha1.EventRestored)
	n := node(t, "medik8s-1")
	if n.Spec.Unschedulable || nodeview.HasTaint(n, "medik8s.io/drain") {
		t.Errorf("node not restored: unschedulable=%v taints=%v", n.Spec.Unschedulable, n.Spec.Taints)
	}
}

// removeAtEnd deletes, when the test ends and while its manager still runs,
// the NodeMaintenances and nodes whose names start with prefix: quorum is
// counted over every control-plane node of the shared API server, so a test
// must not leave any behind.
func removeAtEnd(t *testing.T, prefix string) {
	t.Cleanup(func() {
		ctx := context.Background()
		nms := &pitstopv1alpha1.NodeMaintenanceList{}
		if err := env.Client.List(ctx, nms); err != nil {
			t.Error(err)
			return
		}
		for i := range nms.Items {
			if strings.HasPrefix(nms.Items[i].Name, prefix) {
				_ = env.Client.Delete(ctx, &nms.Items[i])
			}
		}
		testutil.Eventually(t, 20*time.Second, 100*time.Millisecond, func() error {
			left := &pitstopv1alpha1.NodeMaintenanceList{}
			if err := env.Client.List(ctx, left); err != nil {
				return err
			}
			for _, nm := range left.Items {
				if strings.HasPrefix(nm.Name, prefix) {
					return errorString("NodeMaintenance " + nm.Name + " still there")
				}
			}
			return nil
		})
		nodes := &corev1.NodeList{}
		if err := env.Client.List(ctx, nodes); err != nil {
			t.Error(err)
			return
		}
		for i := range nodes.Items {
			if strings.HasPrefix(nodes.Items[i].Name, prefix) {
				_ = env.Client.Delete(ctx, &nodes.Items[i])
			}
		}
	})
}

// TestAControlPlaneCordonWaitsForTheTurn: another manager (a second
// install, or one on the far side of a split, with no leader election
// between them) is checking quorum for control-plane node cp-1 and holds
// the turn; pitstop must not cordon cp-0 meanwhile, on a count that cp-1's
// cordon is about to change, and must go on once the turn is given back.
func TestAControlPlaneCordonWaitsForTheTurn(t *testing.T) {
	startManager(t, false)
	removeAtEnd(t, "turn-")
	for _, n := range []string{"turn-cp-0", "turn-cp-1", "turn-cp-2"} {
		create(t, testutil.Node(n, testutil.ControlPlane()))
	}
	other := &budget.Slots{Client: env.Client, Namespace: "pitstop-system"}
	if _, got, err := other.Acquire(t.Context(), nodemaintenance.ControlPlaneTurn, 1, "turn-cp-1", time.Now(), nil); err != nil || !got {
		t.Fatalf("the other manager's turn: got %v, %v", got, err)
	}
	nm := nodeMaintenance("turn-a", "turn-cp-0")
	create(t, nm)
	got := awaitCondition(t, nm, condCordoned, metav1.ConditionFalse, pitstopv1alpha1.ReasonQuorumProtected, 10*time.Second)
	if msg := conditionMessage(got, condCordoned); !strings.Contains(msg, "turn-cp-1") {
		t.Errorf("condition message %q does not name the node that holds the turn", msg)
	}
	time.Sleep(time.Second)
	if node(t, "turn-cp-0").Spec.Unschedulable {
		t.Fatal("turn-cp-0 was cordoned while another manager held the control-plane turn")
	}
	if err := other.Release(t.Context(), nodemaintenance.ControlPlaneTurn, "turn-cp-1"); err != nil {
		t.Fatal(err)
	}
	awaitCondition(t, nm, condCordoned, metav1.ConditionTrue, pitstopv1alpha1.ReasonCordoned, 10*time.Second)
}

// aheadClock is the system's clock, ahead by a fixed offset (it keeps the
// monotonic reading).
type aheadClock struct{ by time.Duration }

func (c aheadClock) Now() time.Time                  { return time.Now().Add(c.by) }
func (c aheadClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// TestATimeoutCountsOnlyTheTimeAManagerDrains: a drain's timeout is
// measured against the time managers spent draining, each on its own
// clock. Taken over by a manager whose clock is two minutes ahead, a
// blocked drain with a 6 s timeout is not force-deleted at once; nor is
// one taken over after the manager was down for longer than the timeout.
// Each is force-deleted once the drain has waited its timeout.
func TestATimeoutCountsOnlyTheTimeAManagerDrains(t *testing.T) {
	testutil.Kubelet(t, env.Clientset)
	for _, tc := range []struct {
		name   string
		ahead  time.Duration // the second manager's clock
		downed time.Duration // no manager runs between the two
	}{
		{"clock ahead", 2 * time.Minute, 0},
		{"manager down", 0, 8 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "waited-" + strings.ReplaceAll(tc.name, " ", "-")
			ns := namespace(t, name)
			create(t, testutil.Node(name))
			managedPods(t, ns, name, "web", 1)
			pdb(t, ns, "web", 0)
			first := startManager(t, false)
			nm := nodeMaintenance(name, name, func(nm *pitstopv1alpha1.NodeMaintenance) {
				nm.Spec.Drain.Timeout = &pitstopv1alpha1.Duration{Duration: 6 * time.Second}
				nm.Spec.Drain.OnTimeout = pitstopv1alpha1.DrainTimeoutForceDelete
			})
			create(t, nm)
			awaitCondition(t, nm, condDrained, metav1.ConditionFalse, pitstopv1alpha1.ReasonBlockedByPodDisruptionBudget, 15*time.Second)
			time.Sleep(2 * time.Second)
			first.Stop()
			time.Sleep(tc.downed)

			clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{Tune: func(o *manager.Options) {
				o.NodeMaintenance.Clock = aheadClock{by: tc.ahead}
			}})
			took := time.Now()
			for end := took.Add(2 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
				if left := podsOn(t, ns, name); len(left) != 1 {
					t.Fatalf("the pod was force-deleted %s after the second manager started, with at most 2 s of the 6 s timeout waited", time.Since(took).Round(100*time.Millisecond))
				}
			}
			got := awaitCondition(t, nm, condDrained, metav1.ConditionTrue, pitstopv1alpha1.ReasonDrainedByForce, 15*time.Second)
			if waited := got.Status.DrainWaited; waited == nil || waited.Duration < 6*time.Second {
				t.Errorf("drainWaited %v once the timeout forced the drain, want at least 6s", waited)
			}
		})
	}
}
