package webhookcert

import (
	"context"
	"crypto/x509"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// env is a real API server: optimistic concurrency, defaulting of webhook
// configurations and dry runs are its behaviour, not a fake's.
var env *testutil.Env

func TestMain(m *testing.M) {
	logf.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true)))
	testutil.Main(m, &env)
}

// newOptions returns Options for a fresh namespace, with a webhook
// configuration named after it that is deleted when the test ends. Its
// webhooks match resources nothing creates, so they never fire.
func newOptions(t *testing.T, hosts ...string) Options {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "webhookcert-"}}
	if err := env.Client.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	o := Options{
		Namespace:         ns.Name,
		SecretName:        "pitstop-webhook-cert",
		CertDir:           t.TempDir(),
		Hosts:             hosts,
		WebhookConfigName: "pitstop-" + ns.Name,
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			testWebhook("vwidget.example.com", "widgets", admissionregistrationv1.WebhookClientConfig{
				Service: &admissionregistrationv1.ServiceReference{Namespace: ns.Name, Name: "pitstop-webhook", Path: ptr.To("/validate-widget")},
			}),
			testWebhook("vgadget.example.com", "gadgets", admissionregistrationv1.WebhookClientConfig{
				URL: ptr.To("https://127.0.0.1:9443/validate-gadget"),
			}),
		},
	}
	t.Cleanup(func() { deleteWebhookConfiguration(t, o.WebhookConfigName) })
	return o
}

// testWebhook leaves the fields the API server defaults unset, so the
// comparison with what it stores is put to the test.
func testWebhook(name, resource string, cc admissionregistrationv1.WebhookClientConfig) admissionregistrationv1.ValidatingWebhook {
	return admissionregistrationv1.ValidatingWebhook{
		Name:         name,
		ClientConfig: cc,
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{"example.com"}, APIVersions: []string{"v1"}, Resources: []string{resource}},
		}},
		FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
		SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
		AdmissionReviewVersions: []string{"v1"},
	}
}

func deleteWebhookConfiguration(t *testing.T, name string) {
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := env.Client.Delete(context.Background(), vwc); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting ValidatingWebhookConfiguration %s: %v", name, err)
	}
}

func svcHost(o Options) string { return "pitstop-webhook." + o.Namespace + ".svc" }

// replica returns Options for another replica: same Secret and webhook
// configuration, its own filesystem.
func replica(t *testing.T, o Options) Options {
	o.CertDir = t.TempDir()
	return o
}

// newManager returns a Manager on c whose clock is now (the real clock when
// nil).
func newManager(t *testing.T, c client.Client, o Options, now func() time.Time) *Manager {
	t.Helper()
	m, err := New(c, o)
	if err != nil {
		t.Fatal(err)
	}
	if now != nil {
		m.now = now
	}
	return m
}

func ensure(t *testing.T, m *Manager) {
	t.Helper()
	if err := m.Ensure(t.Context()); err != nil {
		t.Fatalf("Ensure: %v", err)
	}
}

// recorder is a live client that records the writes that reached the API
// server, and can run a hook before each request to stage a race.
type recorder struct {
	client.Client
	mu     sync.Mutex
	writes []string // "create Secret", "update ValidatingWebhookConfiguration", …
	// before runs before each request: verb is get, create or update
	// (dry runs are not passed), kind the object's type name. An error it
	// returns is the request's answer.
	before func(verb, kind string) error
}

func newRecorder(t *testing.T) *recorder {
	t.Helper()
	base, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{}
	r.Client = interceptor.NewClient(base, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := r.hook("get", obj); err != nil {
				return err
			}
			return c.Get(ctx, key, obj, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if err := r.hook("create", obj); err != nil {
				return err
			}
			err := c.Create(ctx, obj, opts...)
			r.record(err, "create", obj)
			return err
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if dryRun := (&client.UpdateOptions{}).ApplyOptions(opts).DryRun; len(dryRun) > 0 {
				return c.Update(ctx, obj, opts...)
			}
			if err := r.hook("update", obj); err != nil {
				return err
			}
			err := c.Update(ctx, obj, opts...)
			r.record(err, "update", obj)
			return err
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			err := c.Patch(ctx, obj, patch, opts...)
			r.record(err, "patch", obj)
			return err
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			err := c.Delete(ctx, obj, opts...)
			r.record(err, "delete", obj)
			return err
		},
	})
	return r
}

func kindOf(obj client.Object) string { return reflect.TypeOf(obj).Elem().Name() }

func (r *recorder) hook(verb string, obj client.Object) error {
	if r.before == nil {
		return nil
	}
	return r.before(verb, kindOf(obj))
}

func (r *recorder) record(err error, verb string, obj client.Object) {
	if err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes = append(r.writes, verb+" "+kindOf(obj))
}

// takeWrites returns the writes recorded so far and forgets them.
func (r *recorder) takeWrites() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.writes
	r.writes = nil
	return w
}

func getSecret(t *testing.T, o Options) *corev1.Secret {
	t.Helper()
	var s corev1.Secret
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: o.Namespace, Name: o.SecretName}, &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

func getWebhookConfiguration(t *testing.T, o Options) *admissionregistrationv1.ValidatingWebhookConfiguration {
	t.Helper()
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: o.WebhookConfigName}, &vwc); err != nil {
		t.Fatal(err)
	}
	return &vwc
}

// webhookCABundle returns the CA bundle of the configuration's webhooks,
// failing the test unless every webhook carries the same one.
func webhookCABundle(t *testing.T, o Options) []byte {
	t.Helper()
	vwc := getWebhookConfiguration(t, o)
	if len(vwc.Webhooks) == 0 {
		t.Fatal("the webhook configuration has no webhooks")
	}
	bundle := vwc.Webhooks[0].ClientConfig.CABundle
	for _, w := range vwc.Webhooks {
		if string(w.ClientConfig.CABundle) != string(bundle) {
			t.Fatalf("webhooks %s and %s carry different CA bundles", vwc.Webhooks[0].Name, w.Name)
		}
	}
	return bundle
}

// writtenCert returns the serving certificate in a CertDir.
func writtenCert(t *testing.T, dir string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, corev1.TLSCertKey))
	if err != nil {
		t.Fatal(err)
	}
	certs := parseCertificates(data)
	if len(certs) == 0 {
		t.Fatalf("%s/tls.crt holds no certificate", dir)
	}
	return certs[0]
}

// verifyFor checks cert against the CA bundle for host (a DNS name or IP
// address) at now, as a webhook client would.
func verifyFor(cert *x509.Certificate, caBundle []byte, host string, now time.Time) error {
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caBundle)
	_, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: host, CurrentTime: now})
	return err
}
