package profile_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/budget"
	"github.com/pitstop-dev/pitstop/internal/controller/profile"
	"github.com/pitstop-dev/pitstop/internal/engine"
	"github.com/pitstop-dev/pitstop/internal/manager"
	"github.com/pitstop-dev/pitstop/internal/nodeview"
	"github.com/pitstop-dev/pitstop/internal/plugin/check"
	"github.com/pitstop-dev/pitstop/internal/scheme"
	"github.com/pitstop-dev/pitstop/internal/testutil"
	"github.com/pitstop-dev/pitstop/internal/testutil/clustertest"
)

var env *testutil.Env

func TestMain(m *testing.M) { testutil.Main(m, &env) }

// rollingProfile: nodes labelled pool=<pool> with annotation reboot-needed
// need maintenance; at most budget at a time enter it; a node leaves
// maintenance once the annotation is gone (the "reboot" is done).
func rollingProfile(name, pool string, budget int32) *pitstopv1alpha1.MaintenanceProfile {
	return &pitstopv1alpha1.MaintenanceProfile{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: pitstopv1alpha1.MaintenanceProfileSpec{
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": pool}},
			Checks: []pitstopv1alpha1.CheckInstance{
				{Name: "reboot_needed", HasAnnotation: &pitstopv1alpha1.KeyValueCheck{Key: "reboot-needed"}},
				{Name: "budget", MaxMaintenance: &pitstopv1alpha1.MaxMaintenanceCheck{Max: budget, ProfileScoped: true}},
			},
			Triggers: []pitstopv1alpha1.TriggerInstance{
				{Name: "mark", AlterLabel: &pitstopv1alpha1.AlterTrigger{Key: "maintained-by", Value: ptr.To(name)}},
			},
			States: pitstopv1alpha1.StatesSpec{
				Operational:         pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "reboot_needed", Next: pitstopv1alpha1.StateMaintenanceRequired}}},
				MaintenanceRequired: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "budget", Triggers: []string{"mark"}, Next: pitstopv1alpha1.StateInMaintenance}}},
				InMaintenance:       pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "!reboot_needed", Next: pitstopv1alpha1.StateOperational}}},
			},
		},
	}
}

// TestBudgetHoldsWithTwoManagersAndFiftyNodes: 50 nodes want maintenance at
// once, budget 3, and two managers act at the same time (as during a leader
// handover), each with 10 concurrent reconciles. A watch records the most
// nodes ever in maintenance together; a "rebooter" ends each node's
// maintenance shortly after it starts. Every node gets through; never more
// than 3 at once.
func TestBudgetHoldsWithTwoManagersAndFiftyNodes(t *testing.T) {
	const nodes, budget = 50, 3
	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{})
	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{})
	testutil.Create(t, env.Client, rollingProfile("rolling", "rolling", budget))

	w := testutil.WatchMaintenance(t, env.Clientset, "pool=rolling", finishReboot) // the simulated reboot
	for i := range nodes {
		testutil.Create(t, env.Client, testutil.Node(fmt.Sprintf("rolling-%02d", i),
			testutil.WithLabels(map[string]string{"pool": "rolling"}),
			func(n *corev1.Node) { n.Annotations = map[string]string{"reboot-needed": "true"} }))
	}
	testutil.Eventually(t, 2*time.Minute, 200*time.Millisecond, func() error {
		if done := w.Through(); done < nodes {
			return fmt.Errorf("%d of %d nodes through maintenance (most at once so far: %d)", done, nodes, w.MostAtOnce())
		}
		return nil
	})
	maxSeen := w.MostAtOnce()
	if maxSeen > budget {
		t.Fatalf("%d nodes were in maintenance at once; the budget is %d", maxSeen, budget)
	}
	if maxSeen < 2 {
		t.Errorf("at most %d node in maintenance at once: the budget of %d was not used, the test proves little", maxSeen, budget)
	}
	t.Logf("50 nodes through maintenance, at most %d at once (budget %d)", maxSeen, budget)
	// The trigger ran on every node.
	n := testutil.GetNode(t, env.Client, "rolling-07")
	if n.Labels["maintained-by"] != "rolling" {
		t.Errorf("the transition's trigger did not run: labels %v", n.Labels)
	}
}

// finishReboot removes the reboot-needed annotation a little later.
func finishReboot(ctx context.Context, node string) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(30 * time.Millisecond):
	}
	patch := []byte(`{"metadata":{"annotations":{"reboot-needed":null}}}`)
	_, _ = env.Clientset.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{})
}

// TestInvalidProfileKeepsTheLastValid: a profile whose new generation does
// not compile is reported invalid and the engine keeps running the previous
// generation.
func TestInvalidProfileKeepsTheLastValid(t *testing.T) {
	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{})
	p := rollingProfile("invalid-later", "invalid-later", 1)
	testutil.Create(t, env.Client, p)
	awaitProfileCondition(t, p.Name, "Valid", metav1.ConditionTrue)

	testutil.Eventually(t, 5*time.Second, 50*time.Millisecond, func() error {
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		p.Spec.States.Operational.Transitions[0].Check = "reboot_neded"
		return env.Client.Update(t.Context(), p)
	})
	got := awaitProfileCondition(t, p.Name, "Valid", metav1.ConditionFalse)
	valid := meta.FindStatusCondition(got.Status.Conditions, "Valid")
	for _, want := range []string{"MaintenanceProfile invalid-later", "spec.states.operational.transitions[0].check", "reboot_neded"} {
		if !contains(valid.Message, want) {
			t.Errorf("Valid message %q lacks %q", valid.Message, want)
		}
	}
	ready := meta.FindStatusCondition(got.Status.Conditions, "Ready")
	if ready == nil || ready.Reason != "RunningPreviousGeneration" {
		t.Errorf("Ready = %+v, want the previous generation still running", ready)
	}
	// The previous generation still moves nodes.
	testutil.Create(t, env.Client, testutil.Node("invalid-later-0",
		testutil.WithLabels(map[string]string{"pool": "invalid-later"}),
		func(n *corev1.Node) { n.Annotations = map[string]string{"reboot-needed": "true"} }))
	testutil.Eventually(t, 20*time.Second, 100*time.Millisecond, func() error {
		n := testutil.GetNode(t, env.Client, "invalid-later-0")
		if n.Labels[pitstopv1alpha1.LabelState] != string(pitstopv1alpha1.StateInMaintenance) {
			return fmt.Errorf("node state %q", n.Labels[pitstopv1alpha1.LabelState])
		}
		return nil
	})
}

func awaitProfileCondition(t *testing.T, name, condType string, status metav1.ConditionStatus) *pitstopv1alpha1.MaintenanceProfile {
	t.Helper()
	got := &pitstopv1alpha1.MaintenanceProfile{}
	testutil.Eventually(t, 15*time.Second, 50*time.Millisecond, func() error {
		if err := env.Client.Get(t.Context(), client.ObjectKey{Name: name}, got); err != nil {
			return err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, condType)
		if c == nil || c.Status != status || c.ObservedGeneration != got.Generation {
			return fmt.Errorf("condition %s = %+v (generation %d), want %s", condType, c, got.Generation, status)
		}
		return nil
	})
	return got
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

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

// TestWebhookRefusesProfilesThatDoNotCompile: with the webhook serving, a
// profile with an unknown check in an expression, or an unknown time zone,
// is refused with the profile, the field path and the problem; so is a
// notification template that would run past pitstop's bounds (at once,
// not when the webhook times out), and an update that would break a
// running profile.
func TestWebhookRefusesProfilesThatDoNotCompile(t *testing.T) {
	// A template that allocates without end must not take the machine
	// down with the test.
	testutil.BoundHeap(t, 1<<30)
	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{Webhook: true})
	chat := func(message string) pitstopv1alpha1.NotificationInstance {
		return pitstopv1alpha1.NotificationInstance{Name: "chat", Schedule: pitstopv1alpha1.NotificationSchedule{Oneshot: &pitstopv1alpha1.OneshotSchedule{}},
			Slack: &pitstopv1alpha1.SlackNotification{WebhookURL: pitstopv1alpha1.SecretKeyRef{Name: "s", Key: "url"}, Message: message}}
	}
	for _, tc := range []struct {
		name string
		edit func(*pitstopv1alpha1.MaintenanceProfile)
		want []string
	}{
		{"unknown check in an expression", func(p *pitstopv1alpha1.MaintenanceProfile) {
			p.Spec.States.MaintenanceRequired.Transitions[0].Check = "budget && windw"
		}, []string{"MaintenanceProfile refused-expr", "spec.states.maintenanceRequired.transitions[0].check", "undeclared reference to 'windw'"}},
		{"unknown trigger", func(p *pitstopv1alpha1.MaintenanceProfile) {
			p.Spec.States.MaintenanceRequired.Transitions[0].Triggers = []string{"mrak"}
		}, []string{"spec.states.maintenanceRequired.transitions[0].triggers[0]", "mrak"}},
		{"unknown time zone", func(p *pitstopv1alpha1.MaintenanceProfile) {
			p.Spec.Checks = append(p.Spec.Checks, pitstopv1alpha1.CheckInstance{Name: "window", TimeWindow: &pitstopv1alpha1.TimeWindowCheck{Start: "22:00", End: "04:00", TimeZone: "Mars/Olympus"}})
		}, []string{"spec.checks[2] (window)", "Mars/Olympus"}},
		{"template naming a field that does not exist", func(p *pitstopv1alpha1.MaintenanceProfile) {
			p.Spec.Notifications = []pitstopv1alpha1.NotificationInstance{{Name: "chat", Schedule: pitstopv1alpha1.NotificationSchedule{Oneshot: &pitstopv1alpha1.OneshotSchedule{}},
				Slack: &pitstopv1alpha1.SlackNotification{WebhookURL: pitstopv1alpha1.SecretKeyRef{Name: "s", Key: "url"}, Message: "{{ .Node.Nmae }} needs maintenance"}}}
		}, []string{"MaintenanceProfile refused-template", "spec.notifications[0] (chat): slack.message", "can't evaluate field Nmae"}},
		{"the 45-byte template that would allocate without end", func(p *pitstopv1alpha1.MaintenanceProfile) {
			p.Spec.Notifications = []pitstopv1alpha1.NotificationInstance{chat(`{{range 100000000}}{{printf "%01000000d" 0}}{{end}}`)}
		}, []string{"MaintenanceProfile refused-alloc", "spec.notifications[0] (chat): slack.message", "range over 100000000: more than the 10000 iterations a template may run"}},
		{"a template looping over a number from the node's data", func(p *pitstopv1alpha1.MaintenanceProfile) {
			p.Spec.Notifications = []pitstopv1alpha1.NotificationInstance{chat(`{{range .Since.Unix}}{{end}}`)}
		}, []string{"MaintenanceProfile refused-loop", "spec.notifications[0] (chat): slack.message", "template exceeded a limit: "}},
		{"a template over 8 KiB", func(p *pitstopv1alpha1.MaintenanceProfile) {
			p.Spec.Notifications = []pitstopv1alpha1.NotificationInstance{chat(strings.Repeat("x", 8193))}
		}, []string{`MaintenanceProfile.pitstop.dev "refused-long"`, "spec.notifications[0].slack.message: Too long: may not be more than 8192 bytes"}},
		{"unknown notification", func(p *pitstopv1alpha1.MaintenanceProfile) {
			p.Spec.States.InMaintenance.Notify = []string{"pager"}
		}, []string{"spec.states.inMaintenance.notify[0]", `unknown notification "pager"`}},
		{"trigger writing pitstop's cordon record", func(p *pitstopv1alpha1.MaintenanceProfile) {
			p.Spec.Triggers = append(p.Spec.Triggers, pitstopv1alpha1.TriggerInstance{Name: "forget", AlterAnnotation: &pitstopv1alpha1.AlterTrigger{Key: "pitstop.dev/cordoned-before", Remove: true}})
		}, []string{"MaintenanceProfile refused-own-key", "spec.triggers[", "(forget): alterAnnotation.key", "pitstop's own records"}},
		{"trigger writing a label value no node can hold", func(p *pitstopv1alpha1.MaintenanceProfile) {
			p.Spec.Triggers = append(p.Spec.Triggers, pitstopv1alpha1.TriggerInstance{Name: "stamp", AlterLabel: &pitstopv1alpha1.AlterTrigger{Key: "rebooted", Value: ptr.To("at 02:00")}})
		}, []string{"MaintenanceProfile refused-label-value", "(stamp): alterLabel.value", "at 02:00"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := map[string]string{"unknown check in an expression": "refused-expr", "unknown trigger": "refused-trigger", "unknown time zone": "refused-tz",
				"template naming a field that does not exist": "refused-template", "unknown notification": "refused-notify",
				"trigger writing pitstop's cordon record": "refused-own-key", "trigger writing a label value no node can hold": "refused-label-value",
				"the 45-byte template that would allocate without end": "refused-alloc", "a template looping over a number from the node's data": "refused-loop",
				"a template over 8 KiB": "refused-long"}[tc.name]
			p := rollingProfile(name, name, 1)
			tc.edit(p)
			start := time.Now()
			err := env.Client.Create(t.Context(), p)
			// Before the webhook's 5 s timeout, which would refuse or
			// (with failurePolicy Ignore) admit the profile unchecked.
			if took := time.Since(start); took > 4*time.Second {
				t.Errorf("the API server answered after %s", took)
			}
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Fatalf("got %v, want a refusal containing %q", err, w)
				}
			}
		})
	}
	good := rollingProfile("refused-update", "refused-update", 1)
	testutil.Create(t, env.Client, good)
	broken := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"states":{"operational":{"transitions":[{"check":"reboot_needed ||","next":"maintenance-required"}]}}}}`))
	if err := env.Client.Patch(t.Context(), good, broken); err == nil || !strings.Contains(err.Error(), "spec.states.operational.transitions[0].check") {
		t.Fatalf("updating to a broken expression: got %v, want a refusal naming the field", err)
	}
}

// TestPrometheusURLsOutsideTheAllowListAreRefused: with
// --prometheus-url-allow set, a profile whose prometheusInstant check
// queries a URL under an allowed prefix is admitted, one querying any
// other URL is refused by the webhook naming the check, the URL and the
// allowed prefixes; got in without the webhook, it is reported not Valid
// with the same message and never runs.
func TestPrometheusURLsOutsideTheAllowListAreRefused(t *testing.T) {
	allow := func(o *manager.Options) {
		o.PrometheusURLAllow = []string{"https://prometheus.monitoring.svc:9090/", "http://thanos.monitoring.svc:10902/"}
	}
	withHealthGate := func(name, url string) *pitstopv1alpha1.MaintenanceProfile {
		p := rollingProfile(name, name, 1)
		p.Spec.Checks = append(p.Spec.Checks, pitstopv1alpha1.CheckInstance{Name: "healthy", PrometheusInstant: &pitstopv1alpha1.PrometheusInstantCheck{
			URL: url, Query: "up", Operator: ">=", Threshold: "1"}})
		p.Spec.States.MaintenanceRequired.Transitions[0].Check = "budget && healthy"
		return p
	}
	want := []string{"spec.checks[2] (healthy): prometheusInstant.url", `"http://metadata.internal:80/latest"`,
		"is not under a Prometheus URL this pitstop allows (--prometheus-url-allow: https://prometheus.monitoring.svc:9090/, http://thanos.monitoring.svc:10902/)"}

	withWebhook := clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{Webhook: true, Tune: allow})
	testutil.Create(t, env.Client, withHealthGate("prom-allowed", "https://prometheus.monitoring.svc:9090"))
	err := env.Client.Create(t.Context(), withHealthGate("prom-foreign", "http://metadata.internal:80/latest"))
	for _, w := range append([]string{"MaintenanceProfile prom-foreign"}, want...) {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Fatalf("creating a profile querying a foreign URL: got %v, want a refusal containing %q", err, w)
		}
	}
	withWebhook.Stop()

	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{Tune: allow})
	testutil.Create(t, env.Client, withHealthGate("prom-foreign", "http://metadata.internal:80/latest"))
	got := awaitProfileCondition(t, "prom-foreign", "Valid", metav1.ConditionFalse)
	valid := meta.FindStatusCondition(got.Status.Conditions, "Valid")
	for _, w := range append([]string{"MaintenanceProfile prom-foreign"}, want...) {
		if !strings.Contains(valid.Message, w) {
			t.Errorf("Valid message %q lacks %q", valid.Message, w)
		}
	}
	if ready := meta.FindStatusCondition(got.Status.Conditions, "Ready"); ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != "NotRunning" {
		t.Errorf("Ready = %+v, want the profile not running", ready)
	}
	awaitProfileCondition(t, "prom-allowed", "Valid", metav1.ConditionTrue)
}

// TestRestartMidTransitionResumes stops the manager while a transition
// waits for its drain (a PodDisruptionBudget in the way) and starts a new
// one: it resumes from the node's record and the cluster, holds one budget
// slot, and moves the node into maintenance exactly once.
func TestRestartMidTransitionResumes(t *testing.T) {
	first := clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{})
	testutil.Kubelet(t, env.Clientset)
	p := restoringProfile("restarter")
	testutil.Create(t, env.Client, p)
	ns := testutil.Namespace(t, env.Client, "restarter")
	testutil.Create(t, env.Client, testutil.Node("restarter-0",
		testutil.WithLabels(map[string]string{"pool": "restarter"}),
		func(n *corev1.Node) { n.Annotations = map[string]string{"reboot-needed": "true"} }))
	testutil.ManagedPods(t, env.Client, ns, "restarter-0", "web", 2)
	budget := testutil.PDB(t, env.Client, ns, "web", 2, 0)

	// The drain has started and waits on the budget.
	testutil.Eventually(t, 20*time.Second, 100*time.Millisecond, func() error {
		nm := &pitstopv1alpha1.NodeMaintenance{}
		if err := env.Client.Get(t.Context(), client.ObjectKey{Name: "profile-restarter-0"}, nm); err != nil {
			return err
		}
		if !meta.IsStatusConditionFalse(nm.Status.Conditions, pitstopv1alpha1.ConditionDrained) {
			return fmt.Errorf("drain not blocked yet: %+v", nm.Status.Conditions)
		}
		return nil
	})
	if got := testutil.GetNode(t, env.Client, "restarter-0").Labels[pitstopv1alpha1.LabelState]; got != string(pitstopv1alpha1.StateMaintenanceRequired) {
		t.Fatalf("state %q while the drain waits, want maintenance-required", got)
	}
	first.Stop()

	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{})
	testutil.SetAllowed(t, env.Client, budget, 2, 2)
	testutil.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		n := testutil.GetNode(t, env.Client, "restarter-0")
		if n.Labels[pitstopv1alpha1.LabelState] != string(pitstopv1alpha1.StateInMaintenance) {
			return fmt.Errorf("state %q", n.Labels[pitstopv1alpha1.LabelState])
		}
		return nil
	})
	// Events are written in the background, after the node: wait for the
	// move's, then make sure there is no second one.
	entries := func() int {
		n := 0
		list := &eventsv1.EventList{}
		if err := env.Client.List(t.Context(), list); err != nil {
			t.Fatal(err)
		}
		for _, e := range list.Items {
			if e.Regarding.Name == "restarter-0" && e.Reason == "ChangedMaintenanceState" && strings.Contains(e.Note, "now in-maintenance") {
				n++
			}
		}
		return n
	}
	testutil.Eventually(t, 10*time.Second, 100*time.Millisecond, func() error {
		if n := entries(); n != 1 {
			return fmt.Errorf("%d moves into maintenance recorded, want exactly 1", n)
		}
		return nil
	})
	leases := &coordinationv1.LeaseList{}
	if err := env.Client.List(t.Context(), leases, client.InNamespace("pitstop-system")); err != nil {
		t.Fatal(err)
	}
	held := 0
	for _, l := range leases.Items {
		if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == "node/restarter-0" {
			held++
		}
	}
	if held != 1 {
		t.Errorf("restarter-0 holds %d budget slots, want 1", held)
	}
}

// TestANodeOnItsWayInUsesTheBudget: a node let in whose drain is still
// under way holds the budget's one slot; the next node's budget check
// counts it, in the engine's record and in what `pitstop explain` and the
// dashboard show, instead of counting only the nodes already in
// maintenance (none) and passing while every slot is taken.
func TestANodeOnItsWayInUsesTheBudget(t *testing.T) {
	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{})
	testutil.Kubelet(t, env.Clientset)
	p := restoringProfile("on-its-way")
	testutil.Create(t, env.Client, p)
	ns := testutil.Namespace(t, env.Client, "on-its-way")
	wants := func(n *corev1.Node) { n.Annotations = map[string]string{"reboot-needed": "true"} }
	testutil.Create(t, env.Client, testutil.Node("on-its-way-0", testutil.WithLabels(map[string]string{"pool": "on-its-way"}), wants))
	testutil.ManagedPods(t, env.Client, ns, "on-its-way-0", "web", 2)
	budget := testutil.PDB(t, env.Client, ns, "web", 2, 0) // the drain waits
	testutil.Eventually(t, 20*time.Second, 100*time.Millisecond, func() error {
		nm := &pitstopv1alpha1.NodeMaintenance{}
		return env.Client.Get(t.Context(), client.ObjectKey{Name: "profile-on-its-way-0"}, nm)
	})
	testutil.Create(t, env.Client, testutil.Node("on-its-way-1", testutil.WithLabels(map[string]string{"pool": "on-its-way"}), wants))

	const taken = "1 of 1 maintenance slots taken in profile on-its-way"
	testutil.Eventually(t, 20*time.Second, 100*time.Millisecond, func() error {
		rec, err := engine.ReadRecord(testutil.GetNode(t, env.Client, "on-its-way-1"))
		if err != nil {
			return err
		}
		pr := rec.Profiles["on-its-way"]
		if pr.Current != pitstopv1alpha1.StateMaintenanceRequired {
			return fmt.Errorf("state %s", pr.Current)
		}
		if passed, ok := pr.Checks["budget"]; !ok || passed {
			return fmt.Errorf("recorded checks %v, want budget=false while on-its-way-0 holds the slot", pr.Checks)
		}
		return nil
	})
	evals, err := profile.NewEvaluator(env.Client, check.Deps{}).Node(t.Context(), testutil.GetNode(t, env.Client, "on-its-way-1"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(evals) != 1 || len(evals[0].Decision.Evaluations) != 1 || len(evals[0].Decision.Evaluations[0].Checks) != 1 {
		t.Fatalf("evaluations %+v, want one transition with one check", evals)
	}
	if c := evals[0].Decision.Evaluations[0].Checks[0]; c.Passed || c.Reason != taken {
		t.Errorf("explain shows the budget check %+v, want failed: %q", c, taken)
	}

	// Once the first node is through, the second is let in.
	testutil.SetAllowed(t, env.Client, budget, 2, 2)
	testutil.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		if got := testutil.GetNode(t, env.Client, "on-its-way-0").Labels[pitstopv1alpha1.LabelState]; got != string(pitstopv1alpha1.StateInMaintenance) {
			return fmt.Errorf("on-its-way-0 is %s", got)
		}
		return nil
	})
	finishReboot(t.Context(), "on-its-way-0")
	testutil.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		nm := &pitstopv1alpha1.NodeMaintenance{}
		return env.Client.Get(t.Context(), client.ObjectKey{Name: "profile-on-its-way-1"}, nm)
	})
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

// counterValue reads a counter or gauge (or a histogram's sample count)
// from the manager's metrics registry.
func counterValue(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if want, ok := labels[l.GetName()]; ok && want != l.GetValue() {
					continue next
				}
			}
			switch {
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
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

// staleNodes reads nodes as they were when it was made, as an informer
// cache that has not yet seen the latest writes does.
type staleNodes struct {
	client.Client
	nodes map[string]*corev1.Node
}

func (s staleNodes) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if n, ok := s.nodes[key.Name]; ok {
		n.DeepCopyInto(obj.(*corev1.Node))
		return nil
	}
	return s.Client.Get(ctx, key, obj, opts...)
}

// TestStaleCachedNodeIsEvaluatedFromTheAPIServer: when the cached node is
// behind the API server in what the engine's write depends on (its record,
// written by an evaluation the cache has not seen yet), the write fails its
// test; the node is evaluated again at once from the API server's copy and
// written, instead of waiting for a requeue (on a busy fleet the queue is
// seconds deep). The kubelet's status written in between is kept.
func TestStaleCachedNodeIsEvaluatedFromTheAPIServer(t *testing.T) {
	p := rollingProfile("stale-cache", "stale-cache", 1)
	testutil.Create(t, env.Client, p)
	node := testutil.Node("stale-cache-0", testutil.WithLabels(map[string]string{"pool": "stale-cache"}),
		func(n *corev1.Node) { n.Annotations = map[string]string{"example.com/note": "x"} })
	testutil.Create(t, env.Client, node)
	stale := testutil.GetNode(t, env.Client, node.Name)
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: node.Name}}
	// An evaluation the cache has not seen records the node operational.
	if _, err := profile.NewBareReconciler(env.Client, env.Client).Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	// The node is asked for maintenance, and the kubelet reports in.
	live := testutil.GetNode(t, env.Client, node.Name)
	if _, err := engine.ReadRecord(live); err != nil || live.Annotations[pitstopv1alpha1.AnnotationMaintenanceData] == "" {
		t.Fatalf("the first evaluation wrote no record: %v", err)
	}
	patch := client.MergeFrom(live.DeepCopy())
	live.Annotations["reboot-needed"] = "true"
	if err := env.Client.Patch(t.Context(), live, patch); err != nil {
		t.Fatal(err)
	}
	live.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}
	if err := env.Client.Status().Update(t.Context(), live); err != nil {
		t.Fatal(err)
	}
	stale.Annotations["reboot-needed"] = "true" // the cache saw the request, not the record

	r := profile.NewBareReconciler(staleNodes{Client: env.Client, nodes: map[string]*corev1.Node{node.Name: stale}}, env.Client)
	res, err := r.Reconcile(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	got := testutil.GetNode(t, env.Client, node.Name)
	if state := got.Labels[pitstopv1alpha1.LabelState]; state != string(pitstopv1alpha1.StateMaintenanceRequired) {
		t.Fatalf("after one reconcile (result %+v) the node's state is %q, want %s: the stale read was not evaluated again", res, state, pitstopv1alpha1.StateMaintenanceRequired)
	}
	if len(got.Status.Conditions) != 1 {
		t.Errorf("the kubelet's status was lost: %+v", got.Status.Conditions)
	}
}

// TestAMoveIsNotTakenAgainFromALaggingCache: the evaluation right after a
// move, with a cache that has not seen the move yet, starts from the
// engine's own write: it neither runs the move's triggers again nor sends
// a write the API server refuses, nor reads the node from the API server.
// Once the cache shows a later version (here, a label someone else set),
// that is what is evaluated.
func TestAMoveIsNotTakenAgainFromALaggingCache(t *testing.T) {
	p := rollingProfile("lagging-cache", "lagging-cache", 1)
	p.Spec.States.MaintenanceRequired.Transitions[0].Check = "approved" // a bare reconciler takes no budget slots
	p.Spec.Checks = append(p.Spec.Checks, pitstopv1alpha1.CheckInstance{Name: "approved", HasLabel: &pitstopv1alpha1.KeyValueCheck{Key: "approved"}})
	p.Spec.Triggers = append(p.Spec.Triggers, pitstopv1alpha1.TriggerInstance{Name: "count", AlterAnnotation: &pitstopv1alpha1.AlterTrigger{Key: "example.com/moves", Value: ptr.To("1")}})
	p.Spec.States.Operational.Transitions[0].Triggers = []string{"count"}
	testutil.Create(t, env.Client, p)
	node := testutil.Node("lagging-cache-0", testutil.WithLabels(map[string]string{"pool": "lagging-cache"}),
		func(n *corev1.Node) { n.Annotations = map[string]string{"reboot-needed": "true"} })
	testutil.Create(t, env.Client, node)
	cached := testutil.GetNode(t, env.Client, node.Name)
	lagging := staleNodes{Client: env.Client, nodes: map[string]*corev1.Node{node.Name: cached}}
	var reads atomic.Int32
	r := profile.NewBareReconciler(lagging, countingReader{Reader: env.Client, reads: &reads})
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: node.Name}}
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	moved := testutil.GetNode(t, env.Client, node.Name)
	if moved.Labels[pitstopv1alpha1.LabelState] != string(pitstopv1alpha1.StateMaintenanceRequired) {
		t.Fatalf("state %q after the first evaluation, want maintenance-required", moved.Labels[pitstopv1alpha1.LabelState])
	}
	// Someone removes the trigger's annotation; the lagging cache shows
	// neither that nor the move.
	patch := []byte(`{"metadata":{"annotations":{"example.com/moves":null}}}`)
	if _, err := env.Clientset.CoreV1().Nodes().Patch(t.Context(), node.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	again := testutil.GetNode(t, env.Client, node.Name)
	if _, ran := again.Annotations["example.com/moves"]; ran {
		t.Errorf("the move's trigger ran again from the lagging cache")
	}
	if n := reads.Load(); n != 0 {
		t.Errorf("the evaluation read the node from the API server %d times; its own write was enough", n)
	}
	// The cache catches up with a later version: approved by someone else.
	approve := []byte(`{"metadata":{"labels":{"approved":"yes"}}}`)
	if _, err := env.Clientset.CoreV1().Nodes().Patch(t.Context(), node.Name, types.MergePatchType, approve, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	lagging.nodes[node.Name] = testutil.GetNode(t, env.Client, node.Name)
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if got := testutil.GetNode(t, env.Client, node.Name).Labels[pitstopv1alpha1.LabelState]; got != string(pitstopv1alpha1.StateInMaintenance) {
		t.Errorf("state %q once the cache showed the approval, want in-maintenance", got)
	}
}

// TestAMoveRecordsTheNewStatesChecksInTheSameWrite: the write that moves a
// node records the checks of the state it enters, evaluated on the node as
// the triggers left it, so the next evaluation, finding nothing changed,
// writes nothing.
func TestAMoveRecordsTheNewStatesChecksInTheSameWrite(t *testing.T) {
	p := &pitstopv1alpha1.MaintenanceProfile{
		ObjectMeta: metav1.ObjectMeta{Name: "one-write"},
		Spec: pitstopv1alpha1.MaintenanceProfileSpec{
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "one-write"}},
			Checks: []pitstopv1alpha1.CheckInstance{
				{Name: "wanted", HasAnnotation: &pitstopv1alpha1.KeyValueCheck{Key: "reboot-needed"}},
				{Name: "approved", HasLabel: &pitstopv1alpha1.KeyValueCheck{Key: "approved"}},
			},
			Triggers: []pitstopv1alpha1.TriggerInstance{
				{Name: "mark", AlterLabel: &pitstopv1alpha1.AlterTrigger{Key: "marked", Value: ptr.To("yes")}},
			},
			States: pitstopv1alpha1.StatesSpec{
				Operational:         pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "wanted", Triggers: []string{"mark"}, Next: pitstopv1alpha1.StateMaintenanceRequired}}},
				MaintenanceRequired: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "approved", Next: pitstopv1alpha1.StateInMaintenance}}},
				InMaintenance:       pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "!wanted", Next: pitstopv1alpha1.StateOperational}}},
			},
		},
	}
	testutil.Create(t, env.Client, p)
	node := testutil.Node("one-write-0", testutil.WithLabels(map[string]string{"pool": "one-write"}),
		func(n *corev1.Node) { n.Annotations = map[string]string{"reboot-needed": "true"} })
	testutil.Create(t, env.Client, node)
	r := profile.NewBareReconciler(env.Client, env.Client)
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: node.Name}}
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	moved := testutil.GetNode(t, env.Client, node.Name)
	rec, err := engine.ReadRecord(moved)
	if err != nil {
		t.Fatal(err)
	}
	pr := rec.Profiles["one-write"]
	if pr.Current != pitstopv1alpha1.StateMaintenanceRequired || moved.Labels["marked"] != "yes" {
		t.Fatalf("after one reconcile: state %s, marked %q; want %s, yes", pr.Current, moved.Labels["marked"], pitstopv1alpha1.StateMaintenanceRequired)
	}
	if passed, ok := pr.Checks["approved"]; !ok || passed || len(pr.Checks) != 1 {
		t.Fatalf("the move recorded checks %v, want the entered state's: approved=false", pr.Checks)
	}
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if again := testutil.GetNode(t, env.Client, node.Name); again.ResourceVersion != moved.ResourceVersion {
		t.Errorf("the evaluation after the move wrote the node again (resourceVersion %s → %s)", moved.ResourceVersion, again.ResourceVersion)
	}
}

// countingReader counts the reads that reach the API server.
type countingReader struct {
	client.Reader
	reads *atomic.Int32
}

func (c countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.reads.Add(1)
	return c.Reader.Get(ctx, key, obj, opts...)
}

// TestSlotStalenessAsksTheAPIServerOnlyWhenTheCacheCannotTell: a slot
// whose holder the cache shows in maintenance is in use, without a request
// (the sweep and every lost admission race look at all of a budget's
// holders); a holder the cache shows out of maintenance, or gone, is
// confirmed with the API server, and a cache that lags behind the node's
// move into maintenance does not free its slot.
func TestSlotStalenessAsksTheAPIServerOnlyWhenTheCacheCannotTell(t *testing.T) {
	record := func(state pitstopv1alpha1.MaintenanceState) string {
		r := engine.Record{Profiles: map[string]engine.ProfileRecord{"p": {Current: state}}}
		return r.Encode()
	}
	node := func(name string, state pitstopv1alpha1.MaintenanceState) *corev1.Node {
		return testutil.Node(name, func(n *corev1.Node) {
			n.Annotations = map[string]string{pitstopv1alpha1.AnnotationMaintenanceData: record(state)}
		})
	}
	in, out := node("slot-in", pitstopv1alpha1.StateInMaintenance), node("slot-out", pitstopv1alpha1.StateOperational)
	testutil.Create(t, env.Client, in, out)
	lagging := out.DeepCopy() // the cache has not seen slot-late's move in
	lagging.Name = "slot-late"
	testutil.Create(t, env.Client, node("slot-late", pitstopv1alpha1.StateInMaintenance))

	reads := &atomic.Int32{}
	cache := staleNodes{Client: env.Client, nodes: map[string]*corev1.Node{"slot-late": lagging}}
	stale := profile.NewBareReconciler(cache, countingReader{Reader: env.Client, reads: reads}).SlotStale(t.Context(), time.Now())
	lease := &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{AcquireTime: &metav1.MicroTime{Time: time.Now().Add(-time.Hour)}}}
	for _, tc := range []struct {
		holder    string
		stale     bool
		apiServer bool
	}{
		{"slot-in", false, false},
		{"slot-out", true, true},
		{"slot-gone", true, true},
		{"slot-late", false, true},
	} {
		reads.Store(0)
		if got := stale(tc.holder, lease); got != tc.stale {
			t.Errorf("holder %s: stale %v, want %v", tc.holder, got, tc.stale)
		}
		if asked := reads.Load() > 0; asked != tc.apiServer {
			t.Errorf("holder %s: asked the API server %v (%d reads), want %v", tc.holder, asked, reads.Load(), tc.apiServer)
		}
	}
}

// TestQueuePriorities: a node in maintenance is evaluated ahead of the
// rest (its slots wait for it), a node that just changed state next
// (its next transition may be due at once), everything else after.
func TestQueuePriorities(t *testing.T) {
	p := &pitstopv1alpha1.MaintenanceProfile{
		ObjectMeta: metav1.ObjectMeta{Name: "priorities"},
		Spec: pitstopv1alpha1.MaintenanceProfileSpec{
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "priorities"}},
			Checks:       []pitstopv1alpha1.CheckInstance{{Name: "wanted", HasAnnotation: &pitstopv1alpha1.KeyValueCheck{Key: "reboot-needed"}}},
			States: pitstopv1alpha1.StatesSpec{
				Operational:         pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "wanted", Next: pitstopv1alpha1.StateMaintenanceRequired}}},
				MaintenanceRequired: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "wanted", Next: pitstopv1alpha1.StateInMaintenance}}},
				InMaintenance:       pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "!wanted", Next: pitstopv1alpha1.StateOperational}}},
			},
		},
	}
	testutil.Create(t, env.Client, p)
	node := testutil.Node("priorities-0", testutil.WithLabels(map[string]string{"pool": "priorities"}),
		func(n *corev1.Node) { n.Annotations = map[string]string{"reboot-needed": "true"} })
	testutil.Create(t, env.Client, node)
	r := profile.NewBareReconciler(env.Client, env.Client)
	reconcile := func(wantState pitstopv1alpha1.MaintenanceState, wantPriority int) {
		t.Helper()
		res, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: node.Name}})
		if err != nil {
			t.Fatal(err)
		}
		state := testutil.GetNode(t, env.Client, node.Name).Labels[pitstopv1alpha1.LabelState]
		if state != string(wantState) || res.Priority == nil || *res.Priority != wantPriority {
			t.Fatalf("state %s, priority %v; want %s, %d", state, ptr.Deref(res.Priority, -1), wantState, wantPriority)
		}
	}
	reconcile(pitstopv1alpha1.StateMaintenanceRequired, 5) // just moved
	reconcile(pitstopv1alpha1.StateInMaintenance, 10)      // in maintenance
	reconcile(pitstopv1alpha1.StateInMaintenance, 10)      // still
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"reboot-needed":null}}}`))
	if err := env.Client.Patch(t.Context(), node, patch); err != nil {
		t.Fatal(err)
	}
	reconcile(pitstopv1alpha1.StateOperational, 5) // just left
	reconcile(pitstopv1alpha1.StateOperational, 0) // nothing under way
}

// TestChecksReadTheInformersNodes: the checks that count over the fleet
// read the nodes straight from the informer's store — every node, the
// store's own objects, not a copy per evaluation.
func TestChecksReadTheInformersNodes(t *testing.T) {
	names := map[string]bool{}
	for i := range 3 {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("lister-%d", i)}}
		testutil.Create(t, env.Client, n)
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), n) })
		names[n.Name] = true
	}
	c, err := cache.New(env.Config, cache.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	list, err := profile.InformerNodes(c)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(t.Context()) }()
	if !c.WaitForCacheSync(t.Context()) {
		t.Fatal("the cache did not sync")
	}
	first, err := list(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	second, _ := list(t.Context())
	byName := map[string]*corev1.Node{}
	for _, n := range first {
		byName[n.Name] = n
	}
	for name := range names {
		if byName[name] == nil {
			t.Errorf("node %s is not listed", name)
		}
	}
	for _, n := range second {
		if byName[n.Name] != n {
			t.Fatalf("node %s is a new copy on every list", n.Name)
		}
	}
}

// TestALostRaceForASlotIsRecordedAsAFullBudget: the budget check, counted
// from a cache that has not seen the last slot taken, passes; the slot's
// create then fails, as another node holds it. The node waits, and its
// record says the budget check failed, as the next evaluation will once
// the cache catches up, rather than passed for a moment (a write of the
// node now and another one then).
func TestALostRaceForASlotIsRecordedAsAFullBudget(t *testing.T) {
	ns := testutil.Namespace(t, env.Client, "lost-race")
	p := rollingProfile("lost-race", "lost-race", 1)
	testutil.Create(t, env.Client, p)
	if _, ok, err := (&budget.Slots{Client: env.Client, Namespace: ns}).Acquire(t.Context(), budget.Key{Name: p.Name}, 1, "winner", time.Now(), nil); err != nil || !ok {
		t.Fatalf("the winner's slot: %v %v", ok, err)
	}
	node := testutil.Node("lost-race-0", testutil.WithLabels(map[string]string{"pool": "lost-race"}),
		func(n *corev1.Node) { n.Annotations = map[string]string{"reboot-needed": "true"} })
	testutil.Create(t, env.Client, node)
	behind := &budget.Slots{Client: env.Client, Cache: noLeases{Reader: env.Client}, Namespace: ns}
	r := profile.NewBareReconciler(env.Client, env.Client).WithSlots(behind)
	for range 2 { // operational → maintenance-required, then the race
		if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: node.Name}}); err != nil {
			t.Fatal(err)
		}
	}
	rec, err := engine.ReadRecord(testutil.GetNode(t, env.Client, node.Name))
	if err != nil {
		t.Fatal(err)
	}
	pr := rec.Profiles[p.Name]
	if pr.Current != pitstopv1alpha1.StateMaintenanceRequired {
		t.Fatalf("state %s, want %s", pr.Current, pitstopv1alpha1.StateMaintenanceRequired)
	}
	if passed, ok := pr.Checks["budget"]; !ok || passed {
		t.Errorf("recorded checks %v, want budget=false", pr.Checks)
	}
	blocked := r.Decisions(node.Name)[p.Name].Blocking()
	if !slices.Contains(blocked, "all 1 slots of budget budget are taken") {
		t.Errorf("the node's evaluation says it waits for %q", blocked)
	}
}

// TestASlotGivenBackLetsTheNextNodeInBeforeTheCacheSeesIt: a node leaving
// maintenance gives its slot up at once, and the node waiting for it is
// let in although the cache still shows the slot held by the node that
// left. With the waiting node first in line, the slot is handed to it in
// one write (the same Lease changes holder); with nobody in line (the
// waiting node not evaluated for longer than a place in line lasts), the
// slot is given back and the waiting node woken to take it.
func TestASlotGivenBackLetsTheNextNodeInBeforeTheCacheSeesIt(t *testing.T) {
	for _, inLine := range []bool{true, false} {
		t.Run(fmt.Sprintf("in line=%t", inLine), func(t *testing.T) {
			name := fmt.Sprintf("handover-%t", inLine)
			ns := testutil.Namespace(t, env.Client, name)
			p := rollingProfile(name, name, 1)
			testutil.Create(t, env.Client, p)
			var nodes []*corev1.Node
			for _, suffix := range []string{"leaving", "waiting"} {
				n := testutil.Node(name+"-"+suffix, testutil.WithLabels(map[string]string{"pool": name}),
					func(n *corev1.Node) { n.Annotations = map[string]string{"reboot-needed": "true"} })
				testutil.Create(t, env.Client, n)
				nodes = append(nodes, n)
			}
			leaving, waiting := nodes[0], nodes[1]
			cache := &leaseSnapshot{}
			clock := clocktesting.NewFakeClock(time.Now())
			r := profile.NewBareReconciler(env.Client, env.Client).WithSlots(&budget.Slots{Client: env.Client, Cache: cache, Namespace: ns}).WithClock(clock)
			reconcile := func(n *corev1.Node, times int) {
				t.Helper()
				for range times {
					if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: n.Name}}); err != nil {
						t.Fatal(err)
					}
				}
			}
			state := func(n *corev1.Node) pitstopv1alpha1.MaintenanceState {
				t.Helper()
				rec, err := engine.ReadRecord(testutil.GetNode(t, env.Client, n.Name))
				if err != nil {
					t.Fatal(err)
				}
				return rec.Profiles[p.Name].Current
			}

			reconcile(leaving, 2) // maintenance-required, then in maintenance with the slot
			if got := state(leaving); got != pitstopv1alpha1.StateInMaintenance {
				t.Fatalf("%s is %s, want %s", leaving.Name, got, pitstopv1alpha1.StateInMaintenance)
			}
			// From here on the cache shows the slot held by the leaving node.
			if err := env.Client.List(t.Context(), &cache.list, client.InNamespace(ns)); err != nil || len(cache.list.Items) != 1 {
				t.Fatalf("slot Leases: %v (%d)", err, len(cache.list.Items))
			}
			slot := cache.list.Items[0]
			reconcile(waiting, 2) // maintenance-required, then waiting for the slot
			if got := state(waiting); got != pitstopv1alpha1.StateMaintenanceRequired {
				t.Fatalf("%s is %s, want %s", waiting.Name, got, pitstopv1alpha1.StateMaintenanceRequired)
			}
			if woken := r.Woken(); len(woken) != 0 {
				t.Fatalf("woken before the slot was given back: %v", woken)
			}
			if !inLine {
				clock.Step(2 * time.Minute)
			}

			done := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"reboot-needed":null}}}`))
			if err := env.Client.Patch(t.Context(), testutil.GetNode(t, env.Client, leaving.Name), done); err != nil {
				t.Fatal(err)
			}
			reconcile(leaving, 1) // out of maintenance; the slot is given up
			if got := state(leaving); got != pitstopv1alpha1.StateOperational {
				t.Fatalf("%s is %s, want %s", leaving.Name, got, pitstopv1alpha1.StateOperational)
			}
			if woken := r.Woken(); !slices.Equal(woken, []string{waiting.Name}) {
				t.Fatalf("woken when the slot was given up: %v, want [%s]", woken, waiting.Name)
			}
			reconcile(waiting, 1)
			if got := state(waiting); got != pitstopv1alpha1.StateInMaintenance {
				t.Errorf("%s is %s, want %s: the cache still showing the slot given up kept it out", waiting.Name, got, pitstopv1alpha1.StateInMaintenance)
			}
			holders, err := (&budget.Slots{Client: env.Client, Namespace: ns}).Holders(t.Context(), budget.Key{Name: p.Name})
			if err != nil || !slices.Equal(holders, []string{waiting.Name}) {
				t.Errorf("slot holders %v (%v), want [%s]", holders, err, waiting.Name)
			}
			now := &coordinationv1.Lease{}
			if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(&slot), now); err != nil {
				t.Fatal(err)
			}
			if handed := now.UID == slot.UID; handed != inLine {
				t.Errorf("the slot Lease was handed over (the same object): %t, want %t", handed, inLine)
			}
		})
	}
}

// TestAFreedSlotGoesToTheNodeFirstInLine: two nodes wait for the one slot.
// A slot freed by the sweep (its holder went away) goes to the one that
// has waited longer even when the other is evaluated first, which says why
// it waits and does not race for the slot. Once the first is through, it
// hands its slot straight to the other.
func TestAFreedSlotGoesToTheNodeFirstInLine(t *testing.T) {
	ns := testutil.Namespace(t, env.Client, "line")
	p := rollingProfile("line", "line", 1)
	testutil.Create(t, env.Client, p)
	// Named against their order, so that the order is the time waited.
	holder, first, later := "line-holder", "line-z-first", "line-a-later"
	for _, name := range []string{holder, first, later} {
		testutil.Create(t, env.Client, testutil.Node(name, testutil.WithLabels(map[string]string{"pool": "line"}),
			func(n *corev1.Node) { n.Annotations = map[string]string{"reboot-needed": "true"} }))
	}
	cache := &leaseSnapshot{}
	r := profile.NewBareReconciler(env.Client, env.Client).WithSlots(&budget.Slots{Client: env.Client, Cache: cache, Namespace: ns})
	reconcile := func(name string, times int) {
		t.Helper()
		for range times {
			if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: name}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	state := func(name string) pitstopv1alpha1.MaintenanceState {
		t.Helper()
		rec, err := engine.ReadRecord(testutil.GetNode(t, env.Client, name))
		if err != nil {
			t.Fatal(err)
		}
		return rec.Profiles[p.Name].Current
	}
	holders := func() []string {
		t.Helper()
		h, err := (&budget.Slots{Client: env.Client, Namespace: ns}).Holders(t.Context(), budget.Key{Name: p.Name})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	seeSlots := func() {
		t.Helper()
		cache.list = coordinationv1.LeaseList{}
		if err := env.Client.List(t.Context(), &cache.list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
	}
	rebooted := func(name string) {
		t.Helper()
		done := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"reboot-needed":null}}}`))
		if err := env.Client.Patch(t.Context(), testutil.GetNode(t, env.Client, name), done); err != nil {
			t.Fatal(err)
		}
	}

	reconcile(holder, 2)
	seeSlots()
	reconcile(first, 2)
	time.Sleep(10 * time.Millisecond) // the record's times are to the millisecond
	reconcile(later, 2)
	for _, name := range []string{first, later} {
		if got := state(name); got != pitstopv1alpha1.StateMaintenanceRequired {
			t.Fatalf("%s is %s, want %s", name, got, pitstopv1alpha1.StateMaintenanceRequired)
		}
	}

	// The holder's node goes away in maintenance, and the sweep gives its
	// slot back.
	if err := env.Client.Delete(t.Context(), testutil.GetNode(t, env.Client, holder)); err != nil {
		t.Fatal(err)
	}
	if err := (&budget.Slots{Client: env.Client, Namespace: ns}).Release(t.Context(), budget.Key{Name: p.Name}, holder); err != nil {
		t.Fatal(err)
	}
	seeSlots()
	// What `pitstop explain` and the dashboard show, from the records.
	ev := profile.NewEvaluator(env.Client, check.Deps{})
	for name, want := range map[string]string{first: "", later: "1 of the 1 slots of budget budget are free, and 1 nodes have waited longer for them"} {
		evals, err := ev.Node(t.Context(), testutil.GetNode(t, env.Client, name), time.Now())
		if err != nil || len(evals) != 1 || len(evals[0].Decision.Evaluations) != 1 {
			t.Fatalf("evaluating %s: %v %+v", name, err, evals)
		}
		if got := evals[0].Decision.Evaluations[0]; !got.Passed || got.Blocked != want {
			t.Errorf("%s: explained as passed %v, blocked %q; want passed, blocked %q", name, got.Passed, got.Blocked, want)
		}
	}
	reconcile(later, 1)
	if got := state(later); got != pitstopv1alpha1.StateMaintenanceRequired {
		t.Fatalf("%s, evaluated first, is %s: it took the slot of the node that waited longer", later, got)
	}
	if h := holders(); len(h) != 0 {
		t.Fatalf("slot holders %v: %s raced for the slot", h, later)
	}
	d := r.Decisions(later)[p.Name]
	if len(d.Evaluations) != 1 || d.Evaluations[0].Blocked != "1 of the 1 slots of budget budget are free, and 1 nodes have waited longer for them" {
		t.Errorf("%s's evaluation does not say it waits for the node ahead of it: %+v", later, d.Evaluations)
	}
	reconcile(first, 1)
	if got := state(first); got != pitstopv1alpha1.StateInMaintenance {
		t.Fatalf("%s is %s, want %s", first, got, pitstopv1alpha1.StateInMaintenance)
	}
	if h := holders(); !slices.Equal(h, []string{first}) {
		t.Fatalf("slot holders %v, want [%s]", h, first)
	}

	seeSlots()
	r.Woken() // those the giving way woke
	rebooted(first)
	reconcile(first, 1)
	if woken := r.Woken(); !slices.Equal(woken, []string{later}) {
		t.Errorf("woken when %s left: %v, want [%s]", first, woken, later)
	}
	if h := holders(); !slices.Equal(h, []string{later}) {
		t.Errorf("slot holders %v once %s left, want [%s]: the slot was not handed to the next in line", h, first, later)
	}
	reconcile(later, 1)
	if got := state(later); got != pitstopv1alpha1.StateInMaintenance {
		t.Errorf("%s is %s once the node ahead of it was through, want %s", later, got, pitstopv1alpha1.StateInMaintenance)
	}
}

// leaseSnapshot is a cache of slot Leases that shows what was put in it.
type leaseSnapshot struct {
	client.Reader
	list coordinationv1.LeaseList
}

func (c *leaseSnapshot) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	o := (&client.ListOptions{}).ApplyOptions(opts)
	out := list.(*coordinationv1.LeaseList)
	for _, l := range c.list.Items {
		if o.LabelSelector == nil || o.LabelSelector.Matches(labels.Set(l.Labels)) {
			out.Items = append(out.Items, l)
		}
	}
	return nil
}

// noLeases is a cache that has seen no slot Lease taken.
type noLeases struct{ client.Reader }

func (noLeases) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

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
