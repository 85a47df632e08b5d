package profile_test

import (
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/manager"
	"github.com/pitstop-dev/pitstop/internal/sim/ec2sim"
	"github.com/pitstop-dev/pitstop/internal/testutil"
	"github.com/pitstop-dev/pitstop/internal/testutil/clustertest"
)

// TestADeadlineAtRiskIsNotifiedByTheNodesProfiles: a scheduled event on
// a node whose profile does not take it up is at risk; the deadlineAtRisk
// notification of that profile is sent once, saying the event, its latest
// safe start and why; a profile that does not select the node sends
// nothing, and neither do later reconciles of the same risk.
func TestADeadlineAtRiskIsNotifiedByTheNodesProfiles(t *testing.T) {
	// Nodes without a Machine are read with the SDK's default credentials:
	// the fake's keys, and nothing of this machine's.
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE", "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
		"AWS_SESSION_TOKEN": "", "AWS_PROFILE": "", "AWS_ROLE_ARN": "", "AWS_WEB_IDENTITY_TOKEN_FILE": "",
		"AWS_CONFIG_FILE": filepath.Join(dir, "config"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "credentials"),
		"AWS_EC2_METADATA_DISABLED": "true",
	} {
		t.Setenv(k, v)
	}
	if err := os.WriteFile(filepath.Join(dir, "config"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ec2 := ec2sim.New(t)
	ec2.AddCredentials("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
	// EC2 knows the instance by the node's name (its private DNS name),
	// as the kubelet registers under it.
	id := ec2.AddInstance(ec2sim.Instance{Zone: "us-east-1a", PrivateDNS: "atrisk-0"})
	notBefore := time.Now().UTC().Add(2 * time.Hour).Truncate(time.Second)
	ec2.ScheduleEvent(id, ec2sim.ScheduledEvent{ID: "instance-event-risk", Code: "instance-retirement", NotBefore: notBefore})

	hooks := &hookReceiver{bodies: map[string][]map[string]any{}}
	srv := httptest.NewServer(hooks)
	defer srv.Close()
	notifySecret(t, "atrisk-hooks", map[string]string{"risk": srv.URL + "/risk", "other": srv.URL + "/other"})
	risk := func(profile, pool, key string) *pitstopv1alpha1.MaintenanceProfile {
		p := rollingProfile(profile, pool, 1)
		p.Spec.Notifications = []pitstopv1alpha1.NotificationInstance{{
			Name: "late", Schedule: pitstopv1alpha1.NotificationSchedule{DeadlineAtRisk: &pitstopv1alpha1.DeadlineAtRiskSchedule{}},
			Webhook: &pitstopv1alpha1.WebhookNotification{URL: pitstopv1alpha1.SecretKeyRef{Name: "atrisk-hooks", Key: key},
				Message: "{{ .Event.Code }} of {{ .Node.Name }} at risk ({{ .Event.Reason }}), {{ .State }} in {{ .Profile.Current }}"},
		}}
		return p
	}
	testutil.Create(t, env.Client, risk("atrisk", "atrisk", "risk"))
	testutil.Create(t, env.Client, risk("atrisk-other", "elsewhere", "other"))
	testutil.Create(t, env.Client, testutil.Node("atrisk-0", testutil.WithLabels(map[string]string{"pool": "atrisk"}),
		func(n *corev1.Node) { n.Spec.ProviderID = "aws:///us-east-1a/" + id }))

	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{Tune: func(o *manager.Options) {
		o.CloudEvents, o.AWSRegion, o.AWSEndpoint = []string{"aws"}, "us-east-1", ec2.URL
		o.CloudEventsInterval = 10 * time.Second
	}})

	testutil.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		if n := len(hooks.got("/risk")); n == 0 {
			return fmt.Errorf("no deadlineAtRisk notification yet")
		}
		return nil
	})
	// A poll later (the object is reconciled on each), still one.
	time.Sleep(11 * time.Second)
	got := hooks.got("/risk")
	if len(got) != 1 {
		t.Fatalf("%d deadlineAtRisk notifications, want 1: %v", len(got), got)
	}
	body := got[0]
	if want := "instance-retirement of atrisk-0 at risk (NoProfile), operational in atrisk"; body["text"] != want {
		t.Errorf("text %q, want %q", body["text"], want)
	}
	ev, _ := body["event"].(map[string]any)
	// Latest safe start: 2h less a replacement's default 30m and the
	// default margin of 1h.
	wantStart := notBefore.Add(-90 * time.Minute).Format(time.RFC3339)
	if ev["code"] != "instance-retirement" || ev["instance"] != id || ev["reason"] != "NoProfile" ||
		ev["notBefore"] != notBefore.Format(time.RFC3339) || ev["latestSafeStart"] != wantStart || ev["object"] == "" {
		t.Errorf("event in the body %v, want the retirement of %s, not before %s, start by %s, reason NoProfile", ev, id, notBefore.Format(time.RFC3339), wantStart)
	}
	if n := len(hooks.got("/other")); n != 0 {
		t.Errorf("a profile that does not select the node sent %d notifications", n)
	}
	mms := &pitstopv1alpha1.MachineMaintenanceList{}
	if err := env.Client.List(t.Context(), mms); err != nil {
		t.Fatal(err)
	}
	for _, mm := range mms.Items {
		if mm.Spec.NodeName == "atrisk-0" && ev["object"] != mm.Namespace+"/"+mm.Name {
			t.Errorf("event object %v, want %s/%s", ev["object"], mm.Namespace, mm.Name)
		}
	}
}
