package webhookcert

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// serveWebhooks runs controller-runtime's webhook server on 127.0.0.1:port
// with the certificate files in certDir, as the manager will, until the
// test ends.
func serveWebhooks(t *testing.T, port int, certDir string, handlers map[string]http.Handler) {
	t.Helper()
	srv := webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port, CertDir: certDir})
	for path, h := range handlers {
		srv.Register(path, h)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("webhook server: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("the webhook server did not stop")
		}
	})
	testutil.Eventually(t, 10*time.Second, 20*time.Millisecond, func() error {
		select {
		case err := <-done:
			t.Fatalf("webhook server stopped: %v", err)
		default:
		}
		return srv.StartedChecker()(nil)
	})
}

// get fetches url over TLS trusting only caBundle, checking the server's
// certificate for serverName (the URL's host when empty).
func get(url string, caBundle []byte, serverName string) (string, error) {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caBundle) {
		return "", errors.New("the CA bundle holds no certificate")
	}
	c := &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: serverName}, DisableKeepAlives: true},
	}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

// TestTLSHandshake serves the written files with controller-runtime's
// webhook server and connects with a client that trusts only the CA bundle
// from the webhook configuration, as the API server does.
func TestTLSHandshake(t *testing.T) {
	o := newOptions(t, "placeholder", "127.0.0.1")
	o.Hosts[0] = svcHost(o)
	ensure(t, newManager(t, env.Client, o, nil))
	port := testutil.FreePort(t)
	serveWebhooks(t, port, o.CertDir, map[string]http.Handler{
		"/ping": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "pong") }),
	})
	url := "https://127.0.0.1:" + strconv.Itoa(port) + "/ping"
	caBundle := webhookCABundle(t, o)
	otherCA, err := newCA(time.Now())
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name       string
		caBundle   []byte
		serverName string
		wantErr    string
	}{
		{"succeeds for the IP address", caBundle, "", ""},
		{"succeeds for the Service's DNS name", caBundle, svcHost(o), ""},
		{"fails for a name the certificate does not hold", caBundle, "pitstop-webhook.elsewhere.svc", "is valid for"},
		{"fails for a client that trusts another CA", otherCA.certPEM, "", "unknown authority"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, err := get(url, tc.caBundle, tc.serverName)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("GET %s: %v", url, err)
			case tc.wantErr == "" && body != "pong":
				t.Fatalf("GET %s = %q, want pong", url, body)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("GET %s: error %v, want one containing %q", url, err, tc.wantErr)
			}
		})
	}

	// A renewed certificate reaches the running server through its
	// certwatcher, without a restart.
	t.Run("serves a renewed certificate for a new host", func(t *testing.T) {
		renamed := "pitstop-webhook-v2." + o.Namespace + ".svc"
		more := o
		more.Hosts = append([]string{renamed}, o.Hosts...)
		ensure(t, newManager(t, env.Client, more, nil))
		testutil.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
			_, err := get(url, webhookCABundle(t, o), renamed)
			return err
		})
	})
}

// TestAPIServerCallsWebhook has the API server itself call the webhook
// through the configuration Ensure wrote, so its TLS client checks the
// certificate against the CA bundle.
func TestAPIServerCallsWebhook(t *testing.T) {
	o := newOptions(t, "127.0.0.1")
	deny := admission.HandlerFunc(func(_ context.Context, req admission.Request) admission.Response {
		if strings.HasPrefix(req.Name, "denied-") {
			return admission.Denied("refused by the webhookcert test")
		}
		return admission.Allowed("")
	})
	port := testutil.FreePort(t)
	o.Webhooks = []admissionregistrationv1.ValidatingWebhook{{
		Name:         "vnodemaintenance.pitstop.dev",
		ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr.To(fmt.Sprintf("https://127.0.0.1:%d/validate", port))},
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule: admissionregistrationv1.Rule{
				APIGroups:   []string{pitstopv1alpha1.GroupVersion.Group},
				APIVersions: []string{pitstopv1alpha1.GroupVersion.Version},
				Resources:   []string{"nodemaintenances"},
			},
		}},
		FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
		SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
		AdmissionReviewVersions: []string{"v1"},
	}}
	ensure(t, newManager(t, env.Client, o, nil))
	serveWebhooks(t, port, o.CertDir, map[string]http.Handler{"/validate": &webhook.Admission{Handler: deny}})
	// With failurePolicy Fail, the configuration must go before the server.
	t.Cleanup(func() { deleteWebhookConfiguration(t, o.WebhookConfigName) })

	nodeMaintenance := func(name string) *pitstopv1alpha1.NodeMaintenance {
		return &pitstopv1alpha1.NodeMaintenance{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       pitstopv1alpha1.NodeMaintenanceSpec{NodeName: "worker-1", Reason: "kernel update"},
		}
	}
	attempt := 0
	testutil.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		// Until the API server has loaded the configuration, creates go
		// through unchecked: use a new name each time.
		attempt++
		nm := nodeMaintenance(fmt.Sprintf("denied-%s-%d", o.Namespace, attempt))
		err := env.Client.Create(t.Context(), nm)
		if err == nil {
			_ = env.Client.Delete(t.Context(), nm)
			return errors.New("the API server admitted the object without asking the webhook")
		}
		if !strings.Contains(err.Error(), "refused by the webhookcert test") {
			return err
		}
		return nil
	})
	allowed := nodeMaintenance("allowed-" + o.Namespace)
	if err := env.Client.Create(t.Context(), allowed); err != nil {
		t.Fatalf("creating an object the webhook allows: %v", err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), allowed) })
}
