package install

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/explain"
	"github.com/pitstop-dev/pitstop/internal/manager"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

var env *testutil.Env

func TestMain(m *testing.M) { testutil.Main(m, &env) }

// applyChart renders the chart with its defaults and applies it to the
// API server as `kubectl apply --server-side` would, Namespace included.
func applyChart(t *testing.T) {
	t.Helper()
	out, err := testutil.Helm(t, "template", "pitstop", repoPath(t, "charts", "pitstop"), "--namespace", namespace, "--set", "namespace.create=true")
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := t.TempDir() + "/kubeconfig"
	if err := env.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	apply := exec.Command(testutil.Tool(t, "kubectl"), "--kubeconfig", kubeconfig, "apply", "--server-side", "-f", "-")
	apply.Stdin = strings.NewReader(out)
	if b, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, b)
	}
}

// startAsServiceAccount runs the manager with a token of the chart's
// ServiceAccount until the test ends, and returns it with a channel closed
// when its Start returns.
func startAsServiceAccount(t *testing.T, opts manager.Options) (ctrl.Manager, <-chan struct{}) {
	t.Helper()
	mgr, err := manager.New(t.Context(), testutil.ServiceAccountToken(t, env.Config), opts, logr.Discard())
	if err != nil {
		t.Fatalf("the manager as its ServiceAccount: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan struct{})
	var startErr error
	go func() {
		startErr = mgr.Start(ctx)
		close(stopped)
	}()
	t.Cleanup(func() {
		cancel()
		<-stopped
		if startErr != nil {
			t.Errorf("manager: %v", startErr)
		}
	})
	return mgr, stopped
}

// TestTheChartGrantsWhatTheManagerNeeds applies the chart to a real API
// server, then runs the manager authenticated as its ServiceAccount: with
// exactly the RBAC the chart grants it takes the chart's leader Lease,
// fills the chart's certificate Secret, writes the CA into the chart's
// webhook configuration, and serves its dashboard with the node's Events.
func TestTheChartGrantsWhatTheManagerNeeds(t *testing.T) {
	applyChart(t)
	opts := manager.DefaultOptions()
	opts.MetricsAddr, opts.HealthAddr = "0", "0"
	opts.LeaderElectionNamespace = namespace
	opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = 4*time.Second, 3*time.Second, 500*time.Millisecond
	opts.Webhook.Host = "127.0.0.1"
	opts.Webhook.Port = testutil.FreePort(t)
	opts.Webhook.CertDir = t.TempDir()
	opts.DashboardAddr = fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	mgr, done := startAsServiceAccount(t, opts)
	select {
	case <-mgr.Elected():
	case <-done:
		t.Fatal("the manager stopped before it was elected")
	case <-time.After(20 * time.Second):
		t.Fatal("the manager, running as its ServiceAccount, did not win the leader election")
	}
	lease := &coordinationv1.Lease{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: opts.LeaderElectionID}, lease); err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(lease.Spec.HolderIdentity, "") == "" || lease.Labels["app.kubernetes.io/name"] != "pitstop" {
		t.Errorf("the chart's Lease is not the one held: %+v", lease)
	}
	secret := &corev1.Secret{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: "pitstop-webhook-cert"}, secret); err != nil {
		t.Fatal(err)
	}
	if len(secret.Data["ca.crt"]) == 0 || len(secret.Data["tls.crt"]) == 0 {
		t.Error("the manager did not fill the chart's certificate Secret")
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: "pitstop-validating-webhook"}, vwc); err != nil {
		t.Fatal(err)
	}
	for _, w := range vwc.Webhooks {
		if string(w.ClientConfig.CABundle) != string(secret.Data["ca.crt"]) {
			t.Errorf("webhook %s does not carry the Secret's CA", w.Name)
		}
		if w.ClientConfig.Service == nil || w.ClientConfig.Service.Name != "pitstop-webhook" {
			t.Errorf("the manager reshaped webhook %s: %+v", w.Name, w.ClientConfig)
		}
	}

	// An upgrade applies the chart again: it must neither conflict with what
	// pitstop wrote nor take it back.
	applyChart(t)
	again := &corev1.Secret{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: "pitstop-webhook-cert"}, again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Data["ca.crt"], secret.Data["ca.crt"]) {
		t.Error("applying the chart again changed the certificate pitstop wrote")
	}

	// The dashboard reads a node, its profiles and its Events.
	testutil.Create(t, env.Client, testutil.Node("rbac-dashboard"))
	awaitNodeReport(t, opts.DashboardAddr, "rbac-dashboard")
}

// TestAWebhookNobodyAnswersNeverBlocksFinalizersOrDeletes installs the
// chart's webhook configuration with no pitstop running: creates are
// refused (it fails closed), but a finalizer can still be removed and an
// object deleted.
func TestAWebhookNobodyAnswersNeverBlocksFinalizersOrDeletes(t *testing.T) {
	// Another test may have installed the chart: start without its webhook.
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "pitstop-validating-webhook"}}
	if err := env.Client.Delete(t.Context(), vwc); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	testutil.Create(t, env.Client, testutil.Node("webhook-down"))
	nm := &pitstopv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: "webhook-down", Finalizers: []string{"pitstop.dev/test"}},
		Spec:       pitstopv1alpha1.NodeMaintenanceSpec{NodeName: "webhook-down"},
	}
	if err := env.Client.Create(t.Context(), nm); err != nil {
		t.Fatal(err)
	}
	applyChart(t)
	// Scale nothing: no pod runs here, so the Service has no endpoints.
	second := &pitstopv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "webhook-down-2"}, Spec: pitstopv1alpha1.NodeMaintenanceSpec{NodeName: "webhook-down"}}
	testutil.Eventually(t, 10*time.Second, 100*time.Millisecond, func() error {
		if err := env.Client.Create(t.Context(), second); err == nil {
			_ = env.Client.Delete(t.Context(), second)
			return fmt.Errorf("a create was admitted while no replica answers the webhook")
		} else if !strings.Contains(err.Error(), "webhook") {
			return fmt.Errorf("a create was refused, but not by the webhook: %w", err)
		}
		return nil
	})
	labelled := client.MergeFrom(nm.DeepCopy())
	nm.Labels = map[string]string{"team": "infra"}
	if err := env.Client.Patch(t.Context(), nm, labelled); err != nil {
		t.Fatalf("labelling a NodeMaintenance while the webhook is down: %v", err)
	}
	if err := env.Client.Delete(t.Context(), nm); err != nil {
		t.Fatalf("deleting a NodeMaintenance while the webhook is down: %v", err)
	}
	patch := client.MergeFrom(nm.DeepCopy())
	nm.Finalizers = nil
	if err := env.Client.Patch(t.Context(), nm, patch); err != nil {
		t.Fatalf("removing a finalizer while the webhook is down: %v", err)
	}
	testutil.Eventually(t, 10*time.Second, 100*time.Millisecond, func() error {
		err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(nm), nm)
		if err == nil {
			return fmt.Errorf("NodeMaintenance %s still exists", nm.Name)
		}
		return client.IgnoreNotFound(err)
	})
}

// awaitNodeReport waits until the dashboard reports on the node, and fails
// if it could not read the node's Events.
func awaitNodeReport(t *testing.T, addr, node string) {
	t.Helper()
	report := &explain.NodeReport{}
	testutil.Eventually(t, 10*time.Second, 100*time.Millisecond, func() error {
		resp, err := http.Get("http://" + addr + "/api/v1/nodes/" + node)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET /api/v1/nodes/%s: %s", node, resp.Status)
		}
		return json.NewDecoder(resp.Body).Decode(report)
	})
	if report.EventsError != "" {
		t.Errorf("the dashboard cannot read Events as the ServiceAccount: %s", report.EventsError)
	}
}

// TestWithCertManagerPitstopOnlyServesTheCertificate runs the manager as the
// chart does with webhook.certManager.enabled (--webhook-manage-certificate
// =false): it serves the tls.crt and tls.key it finds in its certificate
// directory and leaves the webhook configuration and the Secret alone,
// which cert-manager owns then.
func TestWithCertManagerPitstopOnlyServesTheCertificate(t *testing.T) {
	applyChart(t)
	vwcBefore := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: "pitstop-validating-webhook"}, vwcBefore); err != nil {
		t.Fatal(err)
	}
	secretBefore := &corev1.Secret{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: "pitstop-webhook-cert"}, secretBefore); err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("pitstop-webhook."+namespace+".svc", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, data := range map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	opts := manager.DefaultOptions()
	opts.MetricsAddr, opts.HealthAddr, opts.DashboardAddr = "0", "0", "0"
	opts.LeaderElection = false
	opts.LeaderElectionNamespace = namespace
	opts.Webhook.Host = "127.0.0.1"
	opts.Webhook.Port = testutil.FreePort(t)
	opts.Webhook.CertDir = dir
	opts.Webhook.ManageCertificate = false
	startAsServiceAccount(t, opts)

	block, _ := pem.Decode(certPEM)
	testutil.Eventually(t, 10*time.Second, 100*time.Millisecond, func() error {
		conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", opts.Webhook.Port), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the test compares the certificate itself
		if err != nil {
			return err
		}
		defer conn.Close()
		if got := conn.ConnectionState().PeerCertificates[0].Raw; !bytes.Equal(got, block.Bytes) {
			return fmt.Errorf("the webhook serves another certificate than the one in its directory")
		}
		return nil
	})
	time.Sleep(2 * time.Second) // what would be written is written at start
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: "pitstop-validating-webhook"}, vwc); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: "pitstop-webhook-cert"}, secret); err != nil {
		t.Fatal(err)
	}
	if vwc.ResourceVersion != vwcBefore.ResourceVersion || secret.ResourceVersion != secretBefore.ResourceVersion {
		t.Errorf("pitstop wrote what cert-manager owns: webhook configuration %s → %s, Secret %s → %s",
			vwcBefore.ResourceVersion, vwc.ResourceVersion, secretBefore.ResourceVersion, secret.ResourceVersion)
	}
}
