package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/explain"
	"github.com/pitstop-dev/pitstop/internal/testutil"
	"github.com/pitstop-dev/pitstop/internal/testutil/clustertest"
)

// explainProfile: annotated nodes of pool wait for a window that opens in
// two hours and a budget of 1, then drain.
func explainProfile(name, pool string, now time.Time) *pitstopv1alpha1.MaintenanceProfile {
	open := now.UTC().Add(2 * time.Hour)
	return &pitstopv1alpha1.MaintenanceProfile{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: pitstopv1alpha1.MaintenanceProfileSpec{
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": pool}},
			Checks: []pitstopv1alpha1.CheckInstance{
				{Name: "reboot_needed", HasAnnotation: &pitstopv1alpha1.KeyValueCheck{Key: "reboot-needed"}},
				{Name: "window", TimeWindow: &pitstopv1alpha1.TimeWindowCheck{Start: open.Format("15:04"), End: open.Add(time.Hour).Format("15:04"), TimeZone: "UTC"}},
				{Name: "budget", MaxMaintenance: &pitstopv1alpha1.MaxMaintenanceCheck{Max: 1, ProfileScoped: true}},
			},
			Triggers: []pitstopv1alpha1.TriggerInstance{
				{Name: "drain", Drain: &pitstopv1alpha1.DrainTrigger{}},
				{Name: "restore", Restore: &pitstopv1alpha1.RestoreTrigger{}},
			},
			States: pitstopv1alpha1.StatesSpec{
				Operational:         pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "reboot_needed", Next: pitstopv1alpha1.StateMaintenanceRequired}}},
				MaintenanceRequired: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "window && budget", Triggers: []string{"drain"}, Next: pitstopv1alpha1.StateInMaintenance}}},
				InMaintenance:       pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "!reboot_needed", Triggers: []string{"restore"}, Next: pitstopv1alpha1.StateOperational}}},
			},
		},
	}
}

// TestExplainNodeAndProfile: a node waiting for a closed window, and a node
// whose drain waits on a PodDisruptionBudget, explained as text and JSON
// from the live cluster.
func TestExplainNodeAndProfile(t *testing.T) {
	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{})
	testutil.Kubelet(t, env.Clientset)
	now := time.Now()
	testutil.Create(t, env.Client, explainProfile("explainer", "explainer", now))
	annotated := func(n *corev1.Node) { n.Annotations = map[string]string{"reboot-needed": "true"} }
	testutil.Create(t, env.Client, testutil.Node("explain-0", testutil.WithLabels(map[string]string{"pool": "explainer"}), annotated))

	// A second profile whose window is always open: its node drains, and a
	// PodDisruptionBudget allowing nothing holds the drain.
	draining := explainProfile("explain-drain", "explain-drain", now)
	draining.Spec.Checks[1].TimeWindow = &pitstopv1alpha1.TimeWindowCheck{Start: "00:00", End: "00:00", TimeZone: "UTC"}
	testutil.Create(t, env.Client, draining)
	ns := testutil.Namespace(t, env.Client, "explain")
	testutil.Create(t, env.Client, testutil.Node("explain-1", testutil.WithLabels(map[string]string{"pool": "explain-drain"})))
	testutil.ManagedPods(t, env.Client, ns, "explain-1", "web", 1)
	testutil.PDB(t, env.Client, ns, "web", 1, 0)
	// Only now does the node need maintenance: its pod and budget are in place.
	patch := []byte(`{"metadata":{"annotations":{"reboot-needed":"true"}}}`)
	if _, err := env.Clientset.CoreV1().Nodes().Patch(t.Context(), "explain-1", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}

	testutil.Eventually(t, 20*time.Second, 100*time.Millisecond, func() error {
		if s := testutil.GetNode(t, env.Client, "explain-0").Labels[pitstopv1alpha1.LabelState]; s != string(pitstopv1alpha1.StateMaintenanceRequired) {
			return fmt.Errorf("explain-0 is %q", s)
		}
		nm := &pitstopv1alpha1.NodeMaintenance{}
		if err := env.Client.Get(t.Context(), client.ObjectKey{Name: "profile-explain-1"}, nm); err != nil {
			return err
		}
		if len(nm.Status.Blockers) == 0 || !meta.IsStatusConditionFalse(nm.Status.Conditions, pitstopv1alpha1.ConditionDrained) {
			return fmt.Errorf("the drain of explain-1 reports no blocker yet: %+v", nm.Status)
		}
		return nil
	})

	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := execute(append(args, "--kubeconfig="+kubeconfig), &stdout, &stderr); code != 0 {
			t.Fatalf("pitstop %s: exit %d: %s", strings.Join(args, " "), code, stderr.String())
		}
		return stdout.String()
	}
	text := run("explain", "node", "explain-0")
	for _, want := range []string{
		"Node explain-0: maintenance-required",
		"Profile explainer: maintenance-required since",
		"→ in-maintenance when window && budget: waits",
		"[fail] window: ",
		"opens ",
		"[pass] budget: 0 of 1 maintenance slots taken in profile explainer",
		"Next change by itself: ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("explain node explain-0 lacks %q:\n%s", want, text)
		}
	}

	text = run("explain", "node", "explain-1")
	for _, want := range []string{
		"Profile explain-drain: maintenance-required",
		"→ in-maintenance when window && budget: passes, but blocked",
		"blocked: waiting for the drain (NodeMaintenance profile-explain-1)",
		"Drain (NodeMaintenance profile-explain-1): Running",
		"waiting for pod explain/web-0 (PodDisruptionBudget explain/web)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("explain node explain-1 lacks %q:\n%s", want, text)
		}
	}

	report := &explain.NodeReport{}
	if err := json.Unmarshal([]byte(run("explain", "node", "explain-0", "-o", "json")), report); err != nil {
		t.Fatal(err)
	}
	windowShut := false
	if len(report.Profiles) == 1 && report.Profiles[0].Profile == "explainer" && len(report.Profiles[0].Decision.Evaluations) == 1 {
		for _, c := range report.Profiles[0].Decision.Evaluations[0].Checks {
			windowShut = windowShut || (c.Name == "window" && !c.Passed && c.NextChange != nil)
		}
	}
	if !windowShut || report.NextChange == nil {
		t.Errorf("JSON report does not show the closed window: %+v", report)
	}
	if d := report.NextChange.Sub(now); d < 110*time.Minute || d > 130*time.Minute {
		t.Errorf("next change in %s, want about 2h (when the window opens)", d)
	}

	text = run("explain", "profile", "explainer")
	for _, want := range []string{"Profile explainer", "valid: True (Compiled)", "nodes: 0 operational, 1 maintenance-required, 0 in-maintenance", "explain-0: maintenance-required for", ": window: "} {
		if !strings.Contains(text, want) {
			t.Errorf("explain profile explainer lacks %q:\n%s", want, text)
		}
	}

	// Bad input: a clear error and a non-zero exit.
	var stdout, stderr bytes.Buffer
	if code := execute([]string{"explain", "node", "no-such-node", "--kubeconfig=" + kubeconfig}, &stdout, &stderr); code == 0 || !strings.Contains(stderr.String(), "no-such-node") {
		t.Errorf("explain of a missing node: exit %d, stderr %q", code, stderr.String())
	}
	if code := execute([]string{"explain", "pod", "x"}, &stdout, &stderr); code != 2 {
		t.Errorf("explain pod: exit %d, want 2 (usage)", code)
	}
}

// TestExplainLeavesChecksWithCredentialsToTheManager: a prometheusInstant
// check with a bearer token is reported as an error saying that only the
// manager reads the Secret, naming it and its key; explain neither reads
// the Secret nor queries Prometheus, and evaluates the other checks.
func TestExplainLeavesChecksWithCredentialsToTheManager(t *testing.T) {
	var queries atomic.Int32
	prom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		queries.Add(1)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	}))
	t.Cleanup(prom.Close)
	p := explainProfile("explain-auth", "explain-auth", time.Now())
	p.Spec.Checks = append(p.Spec.Checks, pitstopv1alpha1.CheckInstance{Name: "healthy", PrometheusInstant: &pitstopv1alpha1.PrometheusInstantCheck{
		URL: prom.URL, Query: "up", Operator: ">=", Threshold: "1",
		BearerToken: &pitstopv1alpha1.SecretKeyRef{Name: "prom-auth", Key: "token"},
	}})
	p.Spec.States.Operational.Transitions[0].Check = "reboot_needed && healthy"
	testutil.Create(t, env.Client, p)
	testutil.Create(t, env.Client, testutil.Node("explain-auth-0", testutil.WithLabels(map[string]string{"pool": "explain-auth"}),
		func(n *corev1.Node) { n.Annotations = map[string]string{"reboot-needed": "true"} }))

	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := execute([]string{"explain", "node", "explain-auth-0", "--kubeconfig=" + kubeconfig}, &stdout, &stderr); code != 0 {
		t.Fatalf("pitstop explain: exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{
		"[pass] reboot_needed: ",
		`[error] healthy: bearerToken: Secret prom-auth (key "token") is not read here: only pitstop's manager reads the Secrets of profiles; the dashboard shows its last result of this check`,
	} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("explain node explain-auth-0 lacks %q:\n%s", want, stdout.String())
		}
	}
	if n := queries.Load(); n != 0 {
		t.Errorf("explain sent %d queries to Prometheus, want none", n)
	}
}
