package install

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pitstop-dev/pitstop/internal/access"
	"github.com/pitstop-dev/pitstop/internal/manager"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// offLoopback is a manager run as the chart's ServiceAccount with the
// dashboard and the metrics on every interface, as the chart runs them
// (the metrics always, the dashboard with dashboard.expose), and the
// webhook with the certificate pitstop manages.
type offLoopback struct {
	// dashboard and metrics are the HTTPS base URL of the dashboard and
	// the metrics' URL, on loopback, as any client on the pod network
	// reaches them on the pod's IP.
	dashboard, metrics string
	// dashboardClient and metricsClient trust the CA of the chart's
	// Secret pitstop-webhook-cert and check the certificate as the name of
	// the chart's Service pitstop-dashboard or pitstop-metrics, as the
	// chart's ServiceMonitor does (tlsConfig.serverName).
	dashboardClient, metricsClient *http.Client
}

// startOffLoopback applies the chart and starts the manager as above.
func startOffLoopback(t *testing.T) offLoopback {
	t.Helper()
	applyChart(t)
	dashboardPort, metricsPort := testutil.FreePort(t), testutil.FreePort(t)
	opts := manager.DefaultOptions()
	opts.HealthAddr = "0"
	opts.DashboardAddr = fmt.Sprintf("0.0.0.0:%d", dashboardPort)
	opts.MetricsAddr = fmt.Sprintf("0.0.0.0:%d", metricsPort)
	opts.MetricsService, opts.DashboardService = namespace+"/pitstop-metrics", namespace+"/pitstop-dashboard"
	opts.LeaderElection = false
	opts.LeaderElectionNamespace = namespace
	opts.Webhook.Host = "127.0.0.1"
	opts.Webhook.Port = testutil.FreePort(t)
	opts.Webhook.CertDir = t.TempDir()
	startAsServiceAccount(t, opts)

	secret := &corev1.Secret{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: "pitstop-webhook-cert"}, secret); err != nil {
		t.Fatal(err)
	}
	cas := x509.NewCertPool()
	if !cas.AppendCertsFromPEM(secret.Data["ca.crt"]) {
		t.Fatalf("Secret pitstop-webhook-cert holds no CA: %v", secret.Data)
	}
	trusting := func(serverName string) *http.Client {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{RootCAs: cas, ServerName: serverName, MinVersion: tls.VersionTLS12}
		return &http.Client{Transport: tr, Timeout: 10 * time.Second}
	}
	o := offLoopback{
		dashboard:       fmt.Sprintf("https://127.0.0.1:%d", dashboardPort),
		metrics:         fmt.Sprintf("https://127.0.0.1:%d/metrics", metricsPort),
		dashboardClient: trusting("pitstop-dashboard." + namespace + ".svc"),
		metricsClient:   trusting("pitstop-metrics." + namespace + ".svc"),
	}
	// Any answer will do: the servers are up.
	testutil.Eventually(t, 20*time.Second, 100*time.Millisecond, func() error {
		if _, err := statusOf(o.dashboardClient, o.dashboard+"/api/v1/fleet", ""); err != nil {
			return err
		}
		_, err := statusOf(o.metricsClient, o.metrics, "")
		return err
	})
	return o
}

// TestDashboardAndMetricsOffLoopbackNeedATokenAndTheChartsGrant: off
// loopback, every request needs a bearer token the API server accepts for
// audience pitstop (TokenReview) for a user it allows
// (SubjectAccessReview): the chart's ClusterRole pitstop-dashboard-viewer
// grants the dashboard, pitstop-metrics-reader the metrics, each only its
// own.
func TestDashboardAndMetricsOffLoopbackNeedATokenAndTheChartsGrant(t *testing.T) {
	o := startOffLoopback(t)
	ns := testutil.Namespace(t, env.Client, "access")
	nobody := tokenOf(t, ns, "nobody", "")
	viewer := tokenOf(t, ns, "viewer", "pitstop-dashboard-viewer")
	scraper := tokenOf(t, ns, "scraper", "pitstop-metrics-reader")

	pages := []string{o.dashboard + "/", o.dashboard + "/nodes/any", o.dashboard + "/static/dashboard.js", o.dashboard + "/api/v1/fleet"}
	for _, tc := range []struct {
		who, token string
		urls       []string
		want       int
	}{
		{"no token", "", append(pages, o.metrics), http.StatusUnauthorized},
		{"a token the API server does not know", "not-a-token", append(pages, o.metrics), http.StatusUnauthorized},
		{"a ServiceAccount without a grant", nobody, append(pages, o.metrics), http.StatusForbidden},
		{"a ServiceAccount granted pitstop-dashboard-viewer", viewer, pages, http.StatusOK},
		{"a ServiceAccount granted pitstop-dashboard-viewer", viewer, []string{o.metrics}, http.StatusForbidden},
		{"a ServiceAccount granted pitstop-metrics-reader", scraper, []string{o.metrics}, http.StatusOK},
		{"a ServiceAccount granted pitstop-metrics-reader", scraper, pages, http.StatusForbidden},
	} {
		for _, u := range tc.urls {
			c := o.dashboardClient
			if u == o.metrics {
				c = o.metricsClient
			}
			got, err := statusOf(c, u, tc.token)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("%s: GET %s answered %d, want %d", tc.who, u, got, tc.want)
			}
		}
	}
}

// TestUntrustedNetworkSeesNoTokenOfAScrape: off loopback the metrics and
// the dashboard are HTTPS only, with the certificate pitstop keeps in the
// chart's Secret, valid for the names of the chart's Services; a plain
// HTTP request is never served (so no bearer token is ever answered in
// clear). Over TLS, a token of Prometheus's ServiceAccount for audience
// pitstop is served; its default token, for the API server (which anyone
// who captured it could replay there), is 401.
func TestUntrustedNetworkSeesNoTokenOfAScrape(t *testing.T) {
	o := startOffLoopback(t)
	ns := testutil.Namespace(t, env.Client, "tls")
	forPitstop := tokenOf(t, ns, "prometheus", "pitstop-metrics-reader")
	forAPIServer := testutil.TokenOf(t, env.Clientset, ns, "prometheus")

	for _, u := range []string{o.metrics, o.dashboard + "/api/v1/fleet"} {
		plain := "http://" + strings.TrimPrefix(u, "https://")
		got, body, err := get(http.DefaultClient, plain, forPitstop)
		if err == nil && (got != http.StatusBadRequest || !strings.Contains(body, "HTTPS")) {
			t.Errorf("plain HTTP GET %s answered %d %q, want no answer but TLS's 400", plain, got, body)
		}
	}
	if got, err := statusOf(o.metricsClient, o.metrics, forPitstop); err != nil || got != http.StatusOK {
		t.Errorf("HTTPS GET %s with a token for audience pitstop: %d %v, want 200", o.metrics, got, err)
	}
	got, body, err := get(o.metricsClient, o.metrics, forAPIServer)
	if err != nil || got != http.StatusUnauthorized || !strings.Contains(body, "audience pitstop") {
		t.Errorf("HTTPS GET %s with a token for the API server: %d %q %v, want 401 naming audience pitstop", o.metrics, got, body, err)
	}
	// The certificate is the Service's, not any name's.
	wrong := &http.Client{Transport: o.metricsClient.Transport.(*http.Transport).Clone()}
	wrong.Transport.(*http.Transport).TLSClientConfig.ServerName = "pitstop-metrics.elsewhere.svc"
	if _, err := statusOf(wrong, o.metrics, forPitstop); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("HTTPS GET %s checked as pitstop-metrics.elsewhere.svc: %v, want a certificate error", o.metrics, err)
	}
}

// tokenOf creates ServiceAccount ns/name, binds it to the ClusterRole
// role (none when empty), and returns a token of it for audience pitstop
// from the TokenRequest API, as a projected ServiceAccount token volume
// with that audience holds.
func tokenOf(t *testing.T, ns, name, role string) string {
	t.Helper()
	testutil.Create(t, env.Client, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
	if role != "" {
		testutil.Create(t, env.Client, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "access-" + ns + "-" + name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
		})
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{access.DefaultAudience}, ExpirationSeconds: ptr.To[int64](3600)}}
	tok, err := env.Clientset.CoreV1().ServiceAccounts(ns).CreateToken(t.Context(), name, req, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("requesting a token of ServiceAccount %s/%s for audience pitstop: %v", ns, name, err)
	}
	return tok.Status.Token
}

// statusOf GETs u through c with token as a bearer token (none when
// empty) and returns the answer's status code.
func statusOf(c *http.Client, u, token string) (int, error) {
	code, _, err := get(c, u, token)
	return code, err
}

// get GETs u through c with token as a bearer token (none when empty) and
// returns the answer's status code and body.
func get(c *http.Client, u, token string) (int, string, error) {
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), nil
}
