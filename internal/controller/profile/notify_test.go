package profile_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/engine"
	"github.com/pitstop-dev/pitstop/internal/testutil"
	"github.com/pitstop-dev/pitstop/internal/testutil/clustertest"
)

// hookReceiver is a webhook endpoint that keeps the bodies it got, by
// notification (the path).
type hookReceiver struct {
	mu     sync.Mutex
	bodies map[string][]map[string]any
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	data, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(data, &body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.bodies[r.URL.Path] = append(h.bodies[r.URL.Path], body)
}

func (h *hookReceiver) got(path string) []map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]map[string]any(nil), h.bodies[path]...)
}

// notifySecret puts the webhook URLs into a Secret in pitstop's namespace,
// opted in for profiles.
func notifySecret(t *testing.T, name string, urls map[string]string) {
	t.Helper()
	secretOf(t, name, map[string]string{pitstopv1alpha1.LabelUsableByProfiles: "true"}, urls)
}

// secretOf creates a Secret with the labels and keys in pitstop's
// namespace.
func secretOf(t *testing.T, name string, labels, keys map[string]string) {
	t.Helper()
	if err := env.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "pitstop-system"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	data := map[string][]byte{}
	for k, v := range keys {
		data[k] = []byte(v)
	}
	testutil.Create(t, env.Client, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "pitstop-system", Name: name, Labels: labels}, Data: data})
}

// TestNotificationsFollowTheirSchedulesAcrossRestarts: a node held in
// maintenance-required by a check that fails gets the state's oneshot
// notification once and its periodic one every interval, each saying what
// blocks it; a new manager does not send the oneshot again, because the
// last-sent times are on the node; a notification that cannot be delivered
// is a Warning Event on the node (after its retries, about 12 s).
func TestNotificationsFollowTheirSchedulesAcrossRestarts(t *testing.T) {
	hooks := &hookReceiver{bodies: map[string][]map[string]any{}}
	srv := httptest.NewServer(hooks)
	defer srv.Close()
	notifySecret(t, "notified-hooks", map[string]string{"entered": srv.URL + "/entered", "reminder": srv.URL + "/reminder", "broken": srv.URL + "/missing\x7f"})

	p := rollingProfile("notified", "notified", 1)
	p.Spec.Checks = append(p.Spec.Checks, pitstopv1alpha1.CheckInstance{Name: "approved", HasLabel: &pitstopv1alpha1.KeyValueCheck{Key: "approved"}})
	p.Spec.States.MaintenanceRequired.Transitions[0].Check = "budget && approved"
	hook := func(name string, key string, s pitstopv1alpha1.NotificationSchedule) pitstopv1alpha1.NotificationInstance {
		return pitstopv1alpha1.NotificationInstance{Name: name, Schedule: s, Webhook: &pitstopv1alpha1.WebhookNotification{
			URL: pitstopv1alpha1.SecretKeyRef{Name: "notified-hooks", Key: key}, Message: "{{ .Node.Name }} is {{ .State }} in {{ .Profile.Current }}"}}
	}
	p.Spec.Notifications = []pitstopv1alpha1.NotificationInstance{
		hook("entered", "entered", pitstopv1alpha1.NotificationSchedule{Oneshot: &pitstopv1alpha1.OneshotSchedule{}}),
		hook("reminder", "reminder", pitstopv1alpha1.NotificationSchedule{Periodic: &pitstopv1alpha1.PeriodicSchedule{Interval: pitstopv1alpha1.Duration{Duration: 2 * time.Second}}}),
		hook("broken", "broken", pitstopv1alpha1.NotificationSchedule{Oneshot: &pitstopv1alpha1.OneshotSchedule{}}),
	}
	p.Spec.States.MaintenanceRequired.Notify = []string{"entered", "reminder", "broken"}

	first := clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{})
	testutil.Create(t, env.Client, p)
	testutil.Create(t, env.Client, testutil.Node("notified-0",
		testutil.WithLabels(map[string]string{"pool": "notified"}),
		func(n *corev1.Node) { n.Annotations = map[string]string{"reboot-needed": "true"} }))

	testutil.Eventually(t, 20*time.Second, 100*time.Millisecond, func() error {
		if n := len(hooks.got("/reminder")); n < 3 {
			return fmt.Errorf("%d reminders so far", n)
		}
		return nil
	})
	entered := hooks.got("/entered")
	if len(entered) != 1 {
		t.Fatalf("%d oneshot notifications, want 1: %v", len(entered), entered)
	}
	e := entered[0]
	blocking, _ := e["blocking"].([]any)
	if e["text"] != "notified-0 is maintenance-required in notified" || e["state"] != "maintenance-required" || e["previous"] != "operational" ||
		len(blocking) != 1 || !strings.HasPrefix(fmt.Sprint(blocking[0]), "approved: ") {
		t.Errorf("oneshot body %v, want the node, its state and the failing check approved", e)
	}
	rec, err := engine.ReadRecord(testutil.GetNode(t, env.Client, "notified-0"))
	if err != nil {
		t.Fatal(err)
	}
	if sent := rec.Profiles["notified"].Notified; sent["entered"].Time.IsZero() || sent["reminder"].Time.IsZero() {
		t.Errorf("last-sent times on the node %v, want entered and reminder", sent)
	}

	// The broken URL fails every attempt: a Warning Event says so.
	testutil.Eventually(t, 30*time.Second, 200*time.Millisecond, func() error {
		list := &eventsv1.EventList{}
		if err := env.Client.List(t.Context(), list); err != nil {
			return err
		}
		for _, ev := range list.Items {
			if ev.Regarding.Name == "notified-0" && ev.Reason == "NotificationFailed" && strings.Contains(ev.Note, "notification broken (webhook) of profile notified was not delivered") {
				if strings.Contains(ev.Note, "/missing") {
					return fmt.Errorf("the Event shows the URL: %s", ev.Note)
				}
				return nil
			}
		}
		return fmt.Errorf("no NotificationFailed Event yet")
	})

	if n := counterValue(t, "pitstop_notifications_failed_total", map[string]string{"profile": "notified", "plugin": "webhook"}); n != 1 {
		t.Errorf("pitstop_notifications_failed_total{profile=notified,plugin=webhook} = %v, want 1", n)
	}
	if n := counterValue(t, "pitstop_notifications_sent_total", map[string]string{"profile": "notified", "plugin": "webhook"}); n < 4 {
		t.Errorf("pitstop_notifications_sent_total{profile=notified,plugin=webhook} = %v, want the oneshot and at least 3 reminders", n)
	}

	first.Stop()
	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{})
	reminders := len(hooks.got("/reminder"))
	testutil.Eventually(t, 20*time.Second, 100*time.Millisecond, func() error {
		if n := len(hooks.got("/reminder")); n < reminders+2 {
			return fmt.Errorf("%d reminders after the restart, want %d", n, reminders+2)
		}
		return nil
	})
	if n := len(hooks.got("/entered")); n != 1 {
		t.Errorf("%d oneshot notifications after a restart, want still 1", n)
	}

	// Approved, the node moves on: the state's notifications stop.
	n := testutil.GetNode(t, env.Client, "notified-0")
	patch := client.MergeFrom(n.DeepCopy())
	n.Labels["approved"] = "true"
	if err := env.Client.Patch(t.Context(), n, patch); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, 100*time.Millisecond, func() error {
		if s := testutil.GetNode(t, env.Client, "notified-0").Labels[pitstopv1alpha1.LabelState]; s != string(pitstopv1alpha1.StateInMaintenance) {
			return fmt.Errorf("state %q", s)
		}
		return nil
	})
	reminders = len(hooks.got("/reminder"))
	time.Sleep(3 * time.Second)
	if n := len(hooks.got("/reminder")); n > reminders+1 {
		t.Errorf("%d reminders after the node left the state, want none (one may have been on its way)", n-reminders)
	}
}

// awaitNodeEvent waits for an Event about the node with the reason whose
// note contains every part of want, and returns the note.
func awaitNodeEvent(t *testing.T, node, reason string, want ...string) string {
	t.Helper()
	var note string
	testutil.Eventually(t, 20*time.Second, 100*time.Millisecond, func() error {
		list := &eventsv1.EventList{}
		if err := env.Client.List(t.Context(), list); err != nil {
			return err
		}
	events:
		for _, ev := range list.Items {
			if ev.Regarding.Name != node || ev.Reason != reason {
				continue
			}
			for _, w := range want {
				if !strings.Contains(ev.Note, w) {
					continue events
				}
			}
			note = ev.Note
			return nil
		}
		return fmt.Errorf("no %s Event about %s containing %q yet", reason, node, want)
	})
	return note
}

// TestATemplateStoppedAtItsBoundFailsOnlyItsNotification: a template that
// compiles on the sample node but loops without end on a real one is
// stopped when it renders; its notification fails with a Warning Event on
// the node naming it and the bound, and the node's other notification is
// delivered.
func TestATemplateStoppedAtItsBoundFailsOnlyItsNotification(t *testing.T) {
	hooks := &hookReceiver{bodies: map[string][]map[string]any{}}
	srv := httptest.NewServer(hooks)
	defer srv.Close()
	notifySecret(t, "bounded-hooks", map[string]string{"fine": srv.URL + "/fine", "looping": srv.URL + "/looping"})

	p := rollingProfile("bounded", "bounded", 1)
	p.Spec.Checks = append(p.Spec.Checks, pitstopv1alpha1.CheckInstance{Name: "approved", HasLabel: &pitstopv1alpha1.KeyValueCheck{Key: "approved"}})
	p.Spec.States.MaintenanceRequired.Transitions[0].Check = "budget && approved"
	hook := func(name, message string) pitstopv1alpha1.NotificationInstance {
		return pitstopv1alpha1.NotificationInstance{Name: name, Schedule: pitstopv1alpha1.NotificationSchedule{Oneshot: &pitstopv1alpha1.OneshotSchedule{}},
			Webhook: &pitstopv1alpha1.WebhookNotification{URL: pitstopv1alpha1.SecretKeyRef{Name: "bounded-hooks", Key: name}, Message: message}}
	}
	p.Spec.Notifications = []pitstopv1alpha1.NotificationInstance{
		hook("fine", "{{ .Node.Name }} is {{ .State }}"),
		// The sample node the profile compiles with is node-1.
		hook("looping", `{{if ne .Node.Name "node-1"}}{{range .Since.Unix}}{{end}}{{end}}{{ .Node.Name }}`),
	}
	p.Spec.States.MaintenanceRequired.Notify = []string{"looping", "fine"}

	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{})
	testutil.Create(t, env.Client, p)
	testutil.Create(t, env.Client, testutil.Node("bounded-0",
		testutil.WithLabels(map[string]string{"pool": "bounded"}),
		func(n *corev1.Node) { n.Annotations = map[string]string{"reboot-needed": "true"} }))

	awaitNodeEvent(t, "bounded-0", "NotificationFailed", "notification looping (webhook) of profile bounded was not delivered",
		"template exceeded a limit: ") // 10,000 iterations, or a second on a busy machine
	testutil.Eventually(t, 20*time.Second, 100*time.Millisecond, func() error {
		if got := hooks.got("/fine"); len(got) != 1 || got[0]["text"] != "bounded-0 is maintenance-required" {
			return fmt.Errorf("the other notification got %v", got)
		}
		return nil
	})
	if got := hooks.got("/looping"); len(got) != 0 {
		t.Errorf("the stopped notification was sent: %v", got)
	}
}

// TestANotificationNamingASecretNotOptedInIsRefusedWithAnEvent: a
// notification whose URL is in a Secret of pitstop's namespace without the
// label pitstop.dev/usable-by-profiles=true is not sent; a Warning Event on
// the node names the notification, the Secret, the key and the label, at
// once rather than after the retries.
func TestANotificationNamingASecretNotOptedInIsRefusedWithAnEvent(t *testing.T) {
	hooks := &hookReceiver{bodies: map[string][]map[string]any{}}
	srv := httptest.NewServer(hooks)
	defer srv.Close()
	secretOf(t, "not-opted-in", nil, map[string]string{"url": srv.URL + "/leaked"})

	p := rollingProfile("unlabelled", "unlabelled", 1)
	p.Spec.Checks = append(p.Spec.Checks, pitstopv1alpha1.CheckInstance{Name: "approved", HasLabel: &pitstopv1alpha1.KeyValueCheck{Key: "approved"}})
	p.Spec.States.MaintenanceRequired.Transitions[0].Check = "budget && approved"
	p.Spec.Notifications = []pitstopv1alpha1.NotificationInstance{{Name: "hook", Schedule: pitstopv1alpha1.NotificationSchedule{Oneshot: &pitstopv1alpha1.OneshotSchedule{}},
		Webhook: &pitstopv1alpha1.WebhookNotification{URL: pitstopv1alpha1.SecretKeyRef{Name: "not-opted-in", Key: "url"}, Message: "{{ .Node.Name }}"}}}
	p.Spec.States.MaintenanceRequired.Notify = []string{"hook"}

	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{})
	testutil.Create(t, env.Client, p)
	start := time.Now()
	testutil.Create(t, env.Client, testutil.Node("unlabelled-0",
		testutil.WithLabels(map[string]string{"pool": "unlabelled"}),
		func(n *corev1.Node) { n.Annotations = map[string]string{"reboot-needed": "true"} }))

	awaitNodeEvent(t, "unlabelled-0", "NotificationFailed", "notification hook (webhook) of profile unlabelled was not delivered",
		`Secret pitstop-system/not-opted-in (key "url") is not labelled pitstop.dev/usable-by-profiles=true`)
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the Event came after %s: the refusal was retried", took)
	}
	if got := hooks.got("/leaked"); len(got) != 0 {
		t.Errorf("the notification was sent with the Secret not opted in: %v", got)
	}
}
