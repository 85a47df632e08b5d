package dashboard_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/explain"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// prometheus answers every instant query with its value, and counts the
// queries.
type prometheus struct {
	value   atomic.Int64
	queries atomic.Int64
}

func (p *prometheus) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	p.queries.Add(1)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"status":"success","data":{"resultType":"scalar","result":[0,"%d"]}}`, p.value.Load())
}

// gatedProfile: nodes of pool "gated" need maintenance when annotated
// reboot-needed and Prometheus says the cluster is healthy.
func gatedProfile(prometheusURL string) *pitstopv1alpha1.MaintenanceProfile {
	return &pitstopv1alpha1.MaintenanceProfile{
		ObjectMeta: metav1.ObjectMeta{Name: "gated"},
		Spec: pitstopv1alpha1.MaintenanceProfileSpec{
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "gated"}},
			Checks: []pitstopv1alpha1.CheckInstance{
				{Name: "reboot_needed", HasAnnotation: &pitstopv1alpha1.KeyValueCheck{Key: "reboot-needed"}},
				{Name: "healthy", PrometheusInstant: &pitstopv1alpha1.PrometheusInstantCheck{URL: prometheusURL, Query: "cluster_health", Operator: ">", Threshold: "0"}},
			},
			States: pitstopv1alpha1.StatesSpec{
				Operational:         pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "reboot_needed && healthy", Next: pitstopv1alpha1.StateMaintenanceRequired}}},
				MaintenanceRequired: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "!reboot_needed", Next: pitstopv1alpha1.StateOperational}}},
				InMaintenance:       pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "!reboot_needed", Next: pitstopv1alpha1.StateOperational}}},
			},
		},
	}
}

// TestTheDashboardServesTheEnginesLastDecision: however often the
// dashboard is asked about a node or a profile, it runs no check (here: no
// Prometheus query); it answers with what the engine decided on its last
// pass over the node, and a new pass shows at once.
func TestTheDashboardServesTheEnginesLastDecision(t *testing.T) {
	prom := &prometheus{}
	server := httptest.NewServer(prom)
	t.Cleanup(server.Close)
	base, _ := startDashboard(t)
	testutil.Create(t, env.Client, gatedProfile(server.URL), testutil.Node("gated-1", testutil.WithLabels(map[string]string{"pool": "gated"})))

	healthy := func() string {
		t.Helper()
		// The dashboard reads the manager's cache, which may not have the
		// node just created yet.
		if resp, _, err := get(base + "/api/v1/nodes/gated-1"); err == nil && resp.StatusCode == http.StatusNotFound {
			return ""
		}
		var r explain.NodeReport
		getJSON(t, base+"/api/v1/nodes/gated-1", &r)
		for _, e := range r.Profiles {
			for _, tr := range e.Decision.Evaluations {
				for _, c := range tr.Checks {
					if e.Profile == "gated" && c.Name == "healthy" {
						return c.Reason
					}
				}
			}
		}
		return ""
	}
	awaitHealthy := func(want string) {
		t.Helper()
		testutil.Eventually(t, 20*time.Second, 100*time.Millisecond, func() error {
			if got := healthy(); got != want {
				return fmt.Errorf("the check healthy says %q, want %q", got, want)
			}
			return nil
		})
	}
	awaitHealthy("cluster_health is 0, want > 0")
	// The engine is done with the node until something changes: no
	// evaluation is due.
	queries := prom.queries.Load()
	testutil.Eventually(t, 10*time.Second, 500*time.Millisecond, func() error {
		if n := prom.queries.Swap(queries); n != queries {
			queries = n
			return fmt.Errorf("Prometheus is still being asked (%d queries)", n)
		}
		return nil
	})

	prom.value.Store(1)
	for range 10 {
		for _, path := range []string{"/api/v1/nodes/gated-1", "/api/v1/profiles/gated", "/api/v1/fleet", "/nodes/gated-1"} {
			resp, body, err := get(base + path)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("GET %s: %v %v %s", path, err, resp, body)
			}
		}
	}
	if n := prom.queries.Load(); n != queries {
		t.Errorf("40 dashboard requests sent %d queries to Prometheus, want none", n-queries)
	}
	if got := healthy(); got != "cluster_health is 0, want > 0" {
		t.Errorf("before the engine's next pass the check healthy says %q, want the last pass's answer", got)
	}

	// A change to the node has the engine evaluate it again.
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gated-1"}}
	if err := env.Client.Patch(t.Context(), n, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"touched":"yes"}}}`))); err != nil {
		t.Fatal(err)
	}
	awaitHealthy("cluster_health is 1, > 0")
}
