package profile_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/manager"
	"github.com/pitstop-dev/pitstop/internal/testutil"
	"github.com/pitstop-dev/pitstop/internal/testutil/clustertest"
)

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
		{"a deadlineAtRisk notification listed in a state", func(p *pitstopv1alpha1.MaintenanceProfile) {
			n := chat("{{ .Event.Code }} on {{ .Node.Name }} is at risk: {{ .Event.Message }}")
			n.Schedule = pitstopv1alpha1.NotificationSchedule{DeadlineAtRisk: &pitstopv1alpha1.DeadlineAtRiskSchedule{}}
			p.Spec.Notifications = []pitstopv1alpha1.NotificationInstance{n}
			p.Spec.States.MaintenanceRequired.Notify = []string{"chat"}
		}, []string{"MaintenanceProfile refused-atrisk-state", "spec.states.maintenanceRequired.notify[0]", `notification "chat" has schedule deadlineAtRisk`}},
		{"two schedules in one notification", func(p *pitstopv1alpha1.MaintenanceProfile) {
			n := chat("{{ .Node.Name }}")
			n.Schedule.DeadlineAtRisk = &pitstopv1alpha1.DeadlineAtRiskSchedule{}
			p.Spec.Notifications = []pitstopv1alpha1.NotificationInstance{n}
		}, []string{`MaintenanceProfile.pitstop.dev "refused-two-schedules"`, "spec.notifications[0].schedule", "exactly one of oneshot, periodic, scheduled and deadlineAtRisk must be set"}},
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
				"a template over 8 KiB": "refused-long", "a deadlineAtRisk notification listed in a state": "refused-atrisk-state",
				"two schedules in one notification": "refused-two-schedules"}[tc.name]
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
