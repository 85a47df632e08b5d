package main

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// withoutFlag returns args without the flag named.
func withoutFlag(args []string, name string) []string {
	return slices.DeleteFunc(slices.Clone(args), func(a string) bool { return strings.HasPrefix(a, "--"+name+"=") })
}

// TestRunOutsideTheClusterRefusesAWebhookTheAPIServerCannotReach runs
// `pitstop run --kubeconfig` with the webhook left on: the API server would
// call it through a Service that leads to no pitstop, so pitstop must stop
// at once with one line naming the two ways out, before it registers
// anything, and leave the cluster's NodeMaintenances alone.
func TestRunOutsideTheClusterRefusesAWebhookTheAPIServerCannotReach(t *testing.T) {
	args, _, _ := runArgs(t, "pitstop-unreachable")
	args = withoutFlag(args, "webhook-port")
	var stdout, stderr bytes.Buffer
	if code := execute(args, &stdout, &stderr); code != 2 {
		t.Fatalf("exit code %d, want 2; stderr:\n%s", code, stderr.String())
	}
	out := strings.TrimSpace(stderr.String())
	if strings.Count(out, "\n") != 0 {
		t.Errorf("stderr has %d lines, want one:\n%s", strings.Count(out, "\n")+1, out)
	}
	for _, want := range []string{"--webhook-url", "--webhook-port=0", "outside the cluster"} {
		if !strings.Contains(out, want) {
			t.Errorf("stderr %q does not name %s", out, want)
		}
	}
	list := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
	if err := env.Client.List(t.Context(), list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Errorf("pitstop registered %d webhook configurations before refusing to start", len(list.Items))
	}
	secret := &corev1.Secret{}
	if err := env.Client.Get(t.Context(), clientKey("pitstop-system", "pitstop-webhook-cert"), secret); !apierrors.IsNotFound(err) {
		t.Errorf("the webhook's Secret: got %v, want NotFound", err)
	}
	testutil.Create(t, env.Client, testutil.Node("unreachable-webhook"))
	nm := &pitstopv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "unreachable-webhook"}, Spec: pitstopv1alpha1.NodeMaintenanceSpec{NodeName: "unreachable-webhook"}}
	if err := env.Client.Create(t.Context(), nm); err != nil {
		t.Errorf("a NodeMaintenance create after the refused start: %v", err)
	}
	_ = env.Client.Delete(t.Context(), nm)
}

// TestRunOutsideTheClusterWithAWebhookURLRegistersItAndRemovesIt runs
// `pitstop run --kubeconfig --webhook-url`: pitstop registers webhooks of
// its own that the API server calls at that URL, and removes them when it
// stops, so nothing is left to refuse creates once it is gone.
func TestRunOutsideTheClusterWithAWebhookURLRegistersItAndRemovesIt(t *testing.T) {
	args, _, health := runArgs(t, "pitstop-webhook-url")
	port := testutil.FreePort(t)
	args = append(withoutFlag(args, "webhook-port"),
		fmt.Sprintf("--webhook-port=%d", port),
		fmt.Sprintf("--webhook-url=https://127.0.0.1:%d", port),
		"--webhook-cert-dir="+t.TempDir(),
		"--leader-election-namespace=pitstop-system",
		"--webhook-configuration=pitstop-outside")
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "pitstop-system"}}
	if err := env.Client.Create(t.Context(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	p := startPitstop(t, args...)
	awaitOK(t, "http://"+health+"/readyz")

	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: "pitstop-outside"}, vwc); err != nil {
		t.Fatalf("the webhook configuration pitstop registers: %v", err)
	}
	for _, w := range vwc.Webhooks {
		if w.ClientConfig.URL == nil || !strings.HasPrefix(*w.ClientConfig.URL, fmt.Sprintf("https://127.0.0.1:%d/", port)) {
			t.Errorf("webhook %s is called at %v, want the --webhook-url", w.Name, w.ClientConfig.URL)
		}
		if *w.FailurePolicy != admissionregistrationv1.Ignore {
			t.Errorf("webhook %s fails %s, want Ignore: a manager outside the cluster may vanish", w.Name, *w.FailurePolicy)
		}
	}
	nm := &pitstopv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "no-such-node-outside"}, Spec: pitstopv1alpha1.NodeMaintenanceSpec{NodeName: "no-such-node-outside"}}
	testutil.Eventually(t, 10*time.Second, 100*time.Millisecond, func() error {
		err := env.Client.Create(t.Context(), nm)
		if err == nil {
			_ = env.Client.Delete(t.Context(), nm)
			return fmt.Errorf("a NodeMaintenance for a missing node was admitted")
		}
		if !strings.Contains(err.Error(), "does not exist") {
			return err
		}
		return nil
	})

	if code := p.signal(syscall.SIGTERM, 20*time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0", code)
	}
	err := env.Client.Get(t.Context(), client.ObjectKey{Name: "pitstop-outside"}, vwc)
	if !apierrors.IsNotFound(err) {
		t.Errorf("after pitstop stopped, its webhook configuration: got %v, want NotFound", err)
	}
}
