package install

import (
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pitstop-dev/pitstop/internal/manager"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// TestDashboardAndMetricsOffLoopbackNeedATokenAndTheChartsGrant applies the
// chart and runs the manager as its ServiceAccount with the dashboard and
// the metrics on every interface, as the chart runs them with
// dashboard.expose. Every request then needs a bearer token the API server
// accepts (TokenReview) for a user it allows (SubjectAccessReview): the
// chart's ClusterRole pitstop-dashboard-viewer grants the dashboard,
// pitstop-metrics-reader the metrics, each only its own.
func TestDashboardAndMetricsOffLoopbackNeedATokenAndTheChartsGrant(t *testing.T) {
	applyChart(t)
	dashboardPort, metricsPort := testutil.FreePort(t), testutil.FreePort(t)
	opts := manager.DefaultOptions()
	opts.HealthAddr = "0"
	opts.DashboardAddr = fmt.Sprintf("0.0.0.0:%d", dashboardPort)
	opts.MetricsAddr = fmt.Sprintf("0.0.0.0:%d", metricsPort)
	opts.LeaderElection = false
	opts.LeaderElectionNamespace = namespace
	opts.Webhook.Port = 0
	startAsServiceAccount(t, opts)

	ns := testutil.Namespace(t, env.Client, "access")
	nobody := tokenOf(t, ns, "nobody", "")
	viewer := tokenOf(t, ns, "viewer", "pitstop-dashboard-viewer")
	scraper := tokenOf(t, ns, "scraper", "pitstop-metrics-reader")

	// The listeners bind every interface; the test reaches them on
	// loopback, as any client on the pod network would on the pod's IP.
	dashboard := fmt.Sprintf("http://127.0.0.1:%d", dashboardPort)
	metrics := fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)
	testutil.Eventually(t, 20*time.Second, 100*time.Millisecond, func() error {
		for _, u := range []string{dashboard + "/api/v1/fleet", metrics} {
			if _, err := status(u, viewer); err != nil {
				return err
			}
		}
		return nil
	})

	pages := []string{dashboard + "/", dashboard + "/nodes/any", dashboard + "/static/dashboard.js", dashboard + "/api/v1/fleet"}
	for _, tc := range []struct {
		who, token string
		urls       []string
		want       int
	}{
		{"no token", "", append(pages, metrics), http.StatusUnauthorized},
		{"a token the API server does not know", "not-a-token", append(pages, metrics), http.StatusUnauthorized},
		{"a ServiceAccount without a grant", nobody, append(pages, metrics), http.StatusForbidden},
		{"a ServiceAccount granted pitstop-dashboard-viewer", viewer, pages, http.StatusOK},
		{"a ServiceAccount granted pitstop-dashboard-viewer", viewer, []string{metrics}, http.StatusForbidden},
		{"a ServiceAccount granted pitstop-metrics-reader", scraper, []string{metrics}, http.StatusOK},
		{"a ServiceAccount granted pitstop-metrics-reader", scraper, pages, http.StatusForbidden},
	} {
		for _, u := range tc.urls {
			got, err := status(u, tc.token)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("%s: GET %s answered %d, want %d", tc.who, u, got, tc.want)
			}
		}
	}
}

// tokenOf creates ServiceAccount ns/name, binds it to the ClusterRole
// role (none when empty), and returns a token of it from the TokenRequest
// API.
func tokenOf(t *testing.T, ns, name, role string) string {
	t.Helper()
	testutil.Create(t, env.Client, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
	if role != "" {
		testutil.Create(t, env.Client, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "access-" + name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
		})
	}
	return testutil.TokenOf(t, env.Clientset, ns, name)
}

// status GETs u with token as a bearer token (none when empty) and
// returns the answer's status code.
func status(u, token string) (int, error) {
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}
