package profile_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/engine"
	"github.com/pitstop-dev/pitstop/internal/nodeview"
	"github.com/pitstop-dev/pitstop/internal/testutil"
	"github.com/pitstop-dev/pitstop/internal/testutil/clustertest"
)

// TestDrainAndRestoreTriggers: entering maintenance waits until the node's
// NodeMaintenance (created by the drain trigger) is Ready; leaving waits
// until the restore trigger's deletion has put the node back.
func TestDrainAndRestoreTriggers(t *testing.T) {
	ns := startRestoring(t, "drainer", 3)

	patch := []byte(`{"metadata":{"annotations":{"reboot-needed":"true"}}}`)
	if _, err := env.Clientset.CoreV1().Nodes().Patch(t.Context(), "drainer-0", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		n := testutil.GetNode(t, env.Client, "drainer-0")
		if n.Labels[pitstopv1alpha1.LabelState] != string(pitstopv1alpha1.StateInMaintenance) {
			return fmt.Errorf("state %q", n.Labels[pitstopv1alpha1.LabelState])
		}
		return nil
	})
	// In maintenance only once drained: the NodeMaintenance is Ready and
	// no pod is left.
	nm := &pitstopv1alpha1.NodeMaintenance{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: "profile-drainer-0"}, nm); err != nil {
		t.Fatal(err)
	}
	if !meta.IsStatusConditionTrue(nm.Status.Conditions, pitstopv1alpha1.ConditionReady) || nm.Spec.Reason != "maintenance profile drainer" {
		t.Errorf("NodeMaintenance %+v not Ready or without the profile's reason", nm.Status.Conditions)
	}
	if left := testutil.PodsOn(t, env.Client, ns, "drainer-0"); len(left) != 0 {
		t.Errorf("node in maintenance with pods left: %v", left)
	}

	patch = []byte(`{"metadata":{"annotations":{"reboot-needed":null}}}`)
	if _, err := env.Clientset.CoreV1().Nodes().Patch(t.Context(), "drainer-0", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		n := testutil.GetNode(t, env.Client, "drainer-0")
		if n.Labels[pitstopv1alpha1.LabelState] != string(pitstopv1alpha1.StateOperational) {
			return fmt.Errorf("state %q", n.Labels[pitstopv1alpha1.LabelState])
		}
		if n.Spec.Unschedulable {
			return fmt.Errorf("operational but still cordoned")
		}
		return nil
	})
	// The node leaves once restored; the object goes a moment later.
	testutil.Eventually(t, 10*time.Second, 100*time.Millisecond, func() error {
		if err := env.Client.Get(t.Context(), client.ObjectKey{Name: "profile-drainer-0"}, &pitstopv1alpha1.NodeMaintenance{}); err == nil {
			return fmt.Errorf("the NodeMaintenance outlived the maintenance")
		}
		return nil
	})
}

// startRestoring starts a manager and a kubelet, and a profile that drains
// the nodes of pool one at a time and restores them when the reboot-needed
// annotation goes, with one node, <pool>-0, running pods of a Deployment
// in namespace pool. It returns the namespace.
func startRestoring(t *testing.T, pool string, pods int) string {
	t.Helper()
	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{})
	testutil.Kubelet(t, env.Clientset)
	testutil.Create(t, env.Client, restoringProfile(pool))
	ns := testutil.Namespace(t, env.Client, pool)
	testutil.Create(t, env.Client, testutil.Node(pool+"-0", testutil.WithLabels(map[string]string{"pool": pool})))
	testutil.ManagedPods(t, env.Client, ns, pool+"-0", "web", pods)
	return ns
}

// TestANodeLeavesMaintenanceOnceItIsRestored: the restore lets the node out
// as soon as the NodeMaintenance controller has put it back, before the
// object is gone (another finalizer keeps it here). The node's next
// maintenance then waits for that object to go: its status (Ready, drained)
// is the last maintenance's and must never pass for the new drain.
func TestANodeLeavesMaintenanceOnceItIsRestored(t *testing.T) {
	startRestoring(t, "restorer", 2)
	state := func() pitstopv1alpha1.MaintenanceState {
		return pitstopv1alpha1.MaintenanceState(testutil.GetNode(t, env.Client, "restorer-0").Labels[pitstopv1alpha1.LabelState])
	}
	awaitState := func(want pitstopv1alpha1.MaintenanceState) {
		t.Helper()
		testutil.Eventually(t, 30*time.Second, 50*time.Millisecond, func() error {
			if got := state(); got != want {
				return fmt.Errorf("state %q, want %q", got, want)
			}
			return nil
		})
	}
	annotate := func(value string) {
		t.Helper()
		patch := []byte(`{"metadata":{"annotations":{"reboot-needed":` + value + `}}}`)
		if _, err := env.Clientset.CoreV1().Nodes().Patch(t.Context(), "restorer-0", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	const hold = "test.pitstop.dev/hold"
	nmKey := client.ObjectKey{Name: "profile-restorer-0"}

	annotate(`"true"`)
	awaitState(pitstopv1alpha1.StateInMaintenance)
	last := &pitstopv1alpha1.NodeMaintenance{}
	if err := env.Client.Get(t.Context(), nmKey, last); err != nil {
		t.Fatal(err)
	}
	held := last.DeepCopy()
	held.Finalizers = append(held.Finalizers, hold)
	if err := env.Client.Patch(t.Context(), held, client.MergeFrom(last)); err != nil {
		t.Fatal(err)
	}

	annotate("null")
	awaitState(pitstopv1alpha1.StateOperational)
	if n := testutil.GetNode(t, env.Client, "restorer-0"); n.Spec.Unschedulable || nodeview.HasTaint(n, pitstopv1alpha1.TaintDrain) {
		t.Errorf("out of maintenance but not restored: unschedulable %v, taints %v", n.Spec.Unschedulable, n.Spec.Taints)
	}
	going := &pitstopv1alpha1.NodeMaintenance{}
	if err := env.Client.Get(t.Context(), nmKey, going); err != nil || going.DeletionTimestamp.IsZero() {
		t.Fatalf("the node left before its NodeMaintenance was deleted, or only once it was gone: %v, %+v", err, going.ObjectMeta)
	}
	testutil.Eventually(t, 10*time.Second, 50*time.Millisecond, func() error {
		if err := env.Client.Get(t.Context(), nmKey, going); err != nil {
			return err
		}
		if slices.Contains(going.Finalizers, pitstopv1alpha1.FinalizerNodeMaintenance) {
			return fmt.Errorf("the NodeMaintenance controller has not let the object go: finalizers %v", going.Finalizers)
		}
		return nil
	})

	// A new maintenance waits for the last one's object.
	annotate(`"true"`)
	awaitState(pitstopv1alpha1.StateMaintenanceRequired)
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if n := testutil.GetNode(t, env.Client, "restorer-0"); n.Labels[pitstopv1alpha1.LabelState] != string(pitstopv1alpha1.StateMaintenanceRequired) || n.Spec.Unschedulable {
			t.Fatalf("the new maintenance went ahead while the last one's NodeMaintenance was there: state %q, unschedulable %v",
				n.Labels[pitstopv1alpha1.LabelState], n.Spec.Unschedulable)
		}
	}
	unheld := going.DeepCopy()
	unheld.Finalizers = slices.DeleteFunc(unheld.Finalizers, func(f string) bool { return f == hold })
	if err := env.Client.Patch(t.Context(), unheld, client.MergeFrom(going)); err != nil {
		t.Fatal(err)
	}
	awaitState(pitstopv1alpha1.StateInMaintenance)
	next := &pitstopv1alpha1.NodeMaintenance{}
	if err := env.Client.Get(t.Context(), nmKey, next); err != nil || next.UID == last.UID ||
		!meta.IsStatusConditionTrue(next.Status.Conditions, pitstopv1alpha1.ConditionReady) {
		t.Errorf("in maintenance without a drain of its own: %v, NodeMaintenance %s (the last one was %s), conditions %+v",
			err, next.UID, last.UID, next.Status.Conditions)
	}
	if n := testutil.GetNode(t, env.Client, "restorer-0"); !n.Spec.Unschedulable {
		t.Error("in maintenance but not cordoned")
	}
	annotate("null")
	awaitState(pitstopv1alpha1.StateOperational)
}

// TestFailingTriggerBacksOffAndIsReported: an admission policy refuses the
// drain trigger's NodeMaintenance. The node stays maintenance-required; each
// failed attempt is an Event saying why, with the attempt number and the
// wait before the next, the waits double, and the failures are counted in
// pitstop_transition_failures_total. Once the policy is gone the transition
// is taken.
func TestFailingTriggerBacksOffAndIsReported(t *testing.T) {
	binding := refuseMaintenancesOf(t, "refuser-0")
	testutil.Create(t, env.Client, testutil.Node("refuser-0", testutil.WithLabels(map[string]string{"pool": "refuser"})))

	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{})
	p := restoringProfile("refuser")
	testutil.Create(t, env.Client, p)
	patch := []byte(`{"metadata":{"annotations":{"reboot-needed":"true"}}}`)
	if _, err := env.Clientset.CoreV1().Nodes().Patch(t.Context(), "refuser-0", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}

	// The node's record says how many attempts failed, why, and when the
	// next one is; the waits double.
	var firstFailure time.Time
	var rec engine.ProfileRecord
	testutil.Eventually(t, 30*time.Second, 50*time.Millisecond, func() error {
		r, err := engine.ReadRecord(testutil.GetNode(t, env.Client, "refuser-0"))
		if err != nil {
			return err
		}
		rec = r.Profiles["refuser"]
		if rec.Failures >= 1 && firstFailure.IsZero() {
			firstFailure = time.Now()
		}
		if rec.Failures < 3 {
			return fmt.Errorf("%d failed attempts recorded", rec.Failures)
		}
		return nil
	})
	if gap := time.Since(firstFailure); gap < 2500*time.Millisecond {
		t.Errorf("3 attempts within %s of the first: no backoff (want about 1s + 2s)", gap)
	}
	if !contains(rec.LastError, "trigger drain") || !contains(rec.LastError, "refuser-0 is frozen by policy") || rec.RetryAt == nil {
		t.Errorf("record %+v does not say which trigger failed, why, and when the next attempt is", rec)
	}
	// The first failure is an Event naming the profile, the trigger, the
	// reason, the attempt and the wait.
	list := &eventsv1.EventList{}
	if err := env.Client.List(t.Context(), list); err != nil {
		t.Fatal(err)
	}
	var notes []string
	for _, e := range list.Items {
		if e.Regarding.Name == "refuser-0" && e.Reason == "ChangeMaintenanceStateFailed" {
			notes = append(notes, e.Note)
		}
	}
	if len(notes) == 0 || !contains(notes[0], "profile refuser: trigger drain") || !contains(notes[0], "frozen by policy") ||
		!contains(notes[0], "the node stays maintenance-required (attempt 1, next in 1s)") {
		t.Errorf("failure events %q, want one naming the profile, trigger, reason, attempt and wait", notes)
	}
	if got := testutil.GetNode(t, env.Client, "refuser-0").Labels[pitstopv1alpha1.LabelState]; got != string(pitstopv1alpha1.StateMaintenanceRequired) {
		t.Errorf("state %q while the trigger fails, want maintenance-required", got)
	}
	if n := counterValue(t, "pitstop_transition_failures_total", map[string]string{"profile": "refuser", "part": "trigger drain"}); n < 3 {
		t.Errorf("pitstop_transition_failures_total{profile=refuser,part=trigger drain} = %v, want at least 3", n)
	}

	if n := counterValue(t, "pitstop_nodes", map[string]string{"profile": "refuser", "state": "maintenance-required"}); n != 1 {
		t.Errorf("pitstop_nodes{profile=refuser,state=maintenance-required} = %v, want 1", n)
	}
	if n := counterValue(t, "pitstop_check_duration_seconds", map[string]string{"plugin": "maxMaintenance"}); n < 3 {
		t.Errorf("pitstop_check_duration_seconds{plugin=maxMaintenance} has %v samples, want at least 3", n)
	}
	if err := env.Client.Delete(t.Context(), binding); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, 200*time.Millisecond, func() error {
		if got := testutil.GetNode(t, env.Client, "refuser-0").Labels[pitstopv1alpha1.LabelState]; got != string(pitstopv1alpha1.StateInMaintenance) {
			return fmt.Errorf("state %q after the policy went", got)
		}
		return nil
	})
	if n := counterValue(t, "pitstop_transitions_total", map[string]string{"profile": "refuser", "from": "maintenance-required", "to": "in-maintenance"}); n != 1 {
		t.Errorf("pitstop_transitions_total{profile=refuser,from=maintenance-required,to=in-maintenance} = %v, want 1", n)
	}
}

// TestFinalizerHoldsANodeInMaintenance: alterFinalizer on entering
// maintenance keeps a node deleted meanwhile (by an autoscaler, say) until
// its maintenance ends and the finalizer is removed on the way out.
func TestFinalizerHoldsANodeInMaintenance(t *testing.T) {
	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{})
	const hold = "example.com/test-hold"
	p := rollingProfile("holder", "holder", 1)
	p.Spec.Triggers = append(p.Spec.Triggers,
		pitstopv1alpha1.TriggerInstance{Name: "hold", AlterFinalizer: &pitstopv1alpha1.AlterFinalizerTrigger{Key: hold}},
		pitstopv1alpha1.TriggerInstance{Name: "let_go", AlterFinalizer: &pitstopv1alpha1.AlterFinalizerTrigger{Key: hold, Remove: true}})
	p.Spec.States.MaintenanceRequired.Transitions[0].Triggers = []string{"hold"}
	p.Spec.States.InMaintenance.Transitions[0].Triggers = []string{"let_go"}
	testutil.Create(t, env.Client, p)
	testutil.Create(t, env.Client, testutil.Node("holder-0",
		testutil.WithLabels(map[string]string{"pool": "holder"}),
		func(n *corev1.Node) { n.Annotations = map[string]string{"reboot-needed": "true"} }))
	testutil.Eventually(t, 20*time.Second, 100*time.Millisecond, func() error {
		n := testutil.GetNode(t, env.Client, "holder-0")
		if n.Labels[pitstopv1alpha1.LabelState] != string(pitstopv1alpha1.StateInMaintenance) || !slices.Contains(n.Finalizers, hold) {
			return fmt.Errorf("state %q, finalizers %v", n.Labels[pitstopv1alpha1.LabelState], n.Finalizers)
		}
		return nil
	})
	if err := env.Client.Delete(t.Context(), testutil.GetNode(t, env.Client, "holder-0")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	n := testutil.GetNode(t, env.Client, "holder-0") // still there: held
	if n.DeletionTimestamp == nil {
		t.Fatal("the node is not being deleted")
	}
	patch := []byte(`{"metadata":{"annotations":{"reboot-needed":null}}}`)
	if _, err := env.Clientset.CoreV1().Nodes().Patch(t.Context(), "holder-0", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, 100*time.Millisecond, func() error {
		err := env.Client.Get(t.Context(), client.ObjectKey{Name: "holder-0"}, &corev1.Node{})
		if err == nil {
			return fmt.Errorf("node still there")
		}
		return client.IgnoreNotFound(err)
	})
}

// refuseMaintenancesOf makes the API server refuse every NodeMaintenance
// of node, through a ValidatingAdmissionPolicy, and returns its binding:
// deleting it lifts the refusal.
func refuseMaintenancesOf(t *testing.T, node string) *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
	t.Helper()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "refuse-" + node},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"pitstop.dev"}, APIVersions: []string{"*"}, Resources: []string{"nodemaintenances"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "object.spec.nodeName != '" + node + "'", Message: node + " is frozen by policy"}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "refuse-" + node},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	testutil.Create(t, env.Client, policy)
	testutil.Create(t, env.Client, binding)
	// The API server applies a new policy after a moment.
	testutil.Eventually(t, 10*time.Second, 100*time.Millisecond, func() error {
		probe := &pitstopv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "probe-" + node}, Spec: pitstopv1alpha1.NodeMaintenanceSpec{NodeName: node}}
		if err := env.Client.Create(t.Context(), probe, client.DryRunAll); err == nil || !contains(err.Error(), "frozen by policy") {
			return fmt.Errorf("the policy does not refuse yet: %v", err)
		}
		return nil
	})
	return binding
}

// TestOneProfilesFailureDoesNotHoldAnother: two profiles select a node. One
// cannot drain it (the API server refuses its NodeMaintenance), and keeps
// failing; the other moves the node on and its trigger's label is written
// all the same, in the same pass.
func TestOneProfilesFailureDoesNotHoldAnother(t *testing.T) {
	refuseMaintenancesOf(t, "isolated-0")
	testutil.Create(t, env.Client, testutil.Node("isolated-0", testutil.WithLabels(map[string]string{"pool": "isolated"})))
	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{})
	marks := &pitstopv1alpha1.MaintenanceProfile{
		ObjectMeta: metav1.ObjectMeta{Name: "isolated-marks"},
		Spec: pitstopv1alpha1.MaintenanceProfileSpec{
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "isolated"}},
			Checks:       []pitstopv1alpha1.CheckInstance{{Name: "wanted", HasAnnotation: &pitstopv1alpha1.KeyValueCheck{Key: "reboot-needed"}}},
			Triggers: []pitstopv1alpha1.TriggerInstance{{Name: "mark", AlterLabel: &pitstopv1alpha1.AlterTrigger{
				Key: "isolation.example.com/marked", Value: ptr.To("yes"),
			}}},
			States: pitstopv1alpha1.StatesSpec{Operational: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{
				{Check: "wanted", Triggers: []string{"mark"}, Next: pitstopv1alpha1.StateMaintenanceRequired},
			}}},
		},
	}
	testutil.Create(t, env.Client, restoringProfile("isolated"), marks)
	annotateNode(t, "isolated-0", "reboot-needed", `"true"`)
	testutil.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		node := testutil.GetNode(t, env.Client, "isolated-0")
		rec, err := engine.ReadRecord(node)
		if err != nil {
			return err
		}
		if f := rec.Profiles["isolated"].Failures; f < 2 {
			return fmt.Errorf("the refused drain has failed %d times", f)
		}
		if got := rec.Profiles["isolated-marks"].Current; got != pitstopv1alpha1.StateMaintenanceRequired {
			return fmt.Errorf("the other profile has the node %s", got)
		}
		if got := node.Labels["isolation.example.com/marked"]; got != "yes" {
			return fmt.Errorf("the other profile's label is %q", got)
		}
		return nil
	})
}

// TestAFailedMoveHoldsBackOnlyItself: the drain of a node's move into
// maintenance keeps failing (an admission policy refuses its
// NodeMaintenance), and the waits between attempts grow. The node then
// stops asking for maintenance: its other transition, back to
// operational, is taken at once, not after the failed move's wait.
func TestAFailedMoveHoldsBackOnlyItself(t *testing.T) {
	refuseMaintenancesOf(t, "withdrawn-0")
	testutil.Create(t, env.Client, testutil.Node("withdrawn-0", testutil.WithLabels(map[string]string{"pool": "withdrawn"})))
	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{})
	p := restoringProfile("withdrawn")
	p.Spec.States.MaintenanceRequired.Transitions[0].Check = "reboot_needed && budget"
	p.Spec.States.MaintenanceRequired.Transitions = append(p.Spec.States.MaintenanceRequired.Transitions,
		pitstopv1alpha1.Transition{Check: "!reboot_needed", Next: pitstopv1alpha1.StateOperational})
	testutil.Create(t, env.Client, p)
	annotateNode(t, "withdrawn-0", "reboot-needed", `"true"`)

	var rec engine.ProfileRecord
	testutil.Eventually(t, 30*time.Second, 50*time.Millisecond, func() error {
		r, err := engine.ReadRecord(testutil.GetNode(t, env.Client, "withdrawn-0"))
		if err != nil {
			return err
		}
		if rec = r.Profiles["withdrawn"]; rec.Failures < 4 {
			return fmt.Errorf("%d failed attempts recorded", rec.Failures)
		}
		return nil
	})
	if rec.FailedTo != pitstopv1alpha1.StateInMaintenance {
		t.Errorf("the record says the failed attempts moved to %q, want %s", rec.FailedTo, pitstopv1alpha1.StateInMaintenance)
	}
	withdrawn := time.Now()
	annotateNode(t, "withdrawn-0", "reboot-needed", "null")
	testutil.Eventually(t, 20*time.Second, 50*time.Millisecond, func() error {
		if got := testutil.GetNode(t, env.Client, "withdrawn-0").Labels[pitstopv1alpha1.LabelState]; got != string(pitstopv1alpha1.StateOperational) {
			return fmt.Errorf("state %q after the request was withdrawn", got)
		}
		return nil
	})
	if took := time.Since(withdrawn); took > 3*time.Second {
		t.Errorf("the node went back to operational %s after it stopped asking, with the failed move's next attempt at %s: the wait held back another transition",
			took.Round(100*time.Millisecond), rec.RetryAt.Format(time.RFC3339Nano))
	}
}
