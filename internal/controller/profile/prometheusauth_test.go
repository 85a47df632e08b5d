package profile_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/engine"
	"github.com/pitstop-dev/pitstop/internal/manager"
	"github.com/pitstop-dev/pitstop/internal/testutil"
	"github.com/pitstop-dev/pitstop/internal/testutil/clustertest"
)

// TestPrometheusChecksReadTheirTokenFromOptedInSecrets: the manager,
// holding only the chart's RBAC, reads a prometheusInstant check's bearer
// token from an opted-in Secret of its namespace when it evaluates the
// check, and the Prometheus, which requires the token, lets the node on. A
// check naming a Secret not opted in fails without a query reaching
// Prometheus, until the Secret is labelled: the next evaluation reads it,
// with no change to the profile and no restart. That evaluation comes by
// itself, with nothing changed on the node, after the profile's
// spec.recheck (1 s here, where each check's own time is 30 s).
func TestPrometheusChecksReadTheirTokenFromOptedInSecrets(t *testing.T) {
	const token = "manager-prom-token-4e2b"
	var mu sync.Mutex
	seen := map[string][]string{} // query → the Authorization headers it came with
	prom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/query" || r.ParseForm() != nil {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		seen[r.Form.Get("query")] = append(seen[r.Form.Get("query")], r.Header.Get("Authorization"))
		mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"scalar","result":[0,"1"]}}`))
	}))
	t.Cleanup(prom.Close)
	queries := func(query string) []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen[query])
	}
	optedIn := map[string]string{pitstopv1alpha1.LabelUsableByProfiles: "true"}
	secretOf(t, "prom-opted-in", optedIn, map[string]string{"token": token})
	secretOf(t, "prom-not-opted-in", nil, map[string]string{"token": token})

	// A node of pool <name> needs maintenance when annotated and healthy:
	// the query, "vector(<n>)", tells the profiles' queries apart.
	gated := func(name, secret, query string) *pitstopv1alpha1.MaintenanceProfile {
		p := rollingProfile(name, name, 1)
		p.Spec.Checks = append(p.Spec.Checks, pitstopv1alpha1.CheckInstance{Name: "healthy", PrometheusInstant: &pitstopv1alpha1.PrometheusInstantCheck{
			URL: prom.URL, Query: query, Operator: ">=", Threshold: "1",
			BearerToken: &pitstopv1alpha1.SecretKeyRef{Name: secret, Key: "token"},
		}})
		p.Spec.States.Operational.Transitions[0].Check = "reboot_needed && healthy"
		p.Spec.Recheck = &pitstopv1alpha1.Duration{Duration: time.Second}
		return p
	}
	// A check's credentials go only to a URL an administrator allowed.
	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{AsServiceAccount: true, Tune: func(o *manager.Options) {
		o.PrometheusURLAllow = []string{prom.URL + "/"}
	}})
	testutil.Create(t, env.Client, gated("prom-auth", "prom-opted-in", "vector(1)"), gated("prom-unlabelled", "prom-not-opted-in", "vector(2)"))
	for _, pool := range []string{"prom-auth", "prom-unlabelled"} {
		testutil.Create(t, env.Client, testutil.Node(pool+"-0", testutil.WithLabels(map[string]string{"pool": pool}),
			func(n *corev1.Node) { n.Annotations = map[string]string{"reboot-needed": "true"} }))
	}

	awaitOutOfOperational(t, "prom-auth-0")
	if got := queries("vector(1)"); len(got) == 0 || got[0] != "Bearer "+token {
		t.Errorf("Prometheus got the queries of the opted-in Secret's check with %q, want the bearer token", got)
	}

	// The check was evaluated (its failure is recorded), and no query left.
	testutil.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		record, err := engine.ReadRecord(testutil.GetNode(t, env.Client, "prom-unlabelled-0"))
		if err != nil {
			return err
		}
		if passed, ok := record.Profiles["prom-unlabelled"].Checks["healthy"]; !ok || passed {
			return fmt.Errorf("the check of the Secret not opted in is recorded as %+v, want failed", record.Profiles["prom-unlabelled"].Checks)
		}
		return nil
	})
	if got := testutil.GetNode(t, env.Client, "prom-unlabelled-0").Labels[pitstopv1alpha1.LabelState]; got != string(pitstopv1alpha1.StateOperational) {
		t.Errorf("the node of the Secret not opted in is %q, want operational", got)
	}
	if got := queries("vector(2)"); len(got) != 0 {
		t.Fatalf("Prometheus got %d queries of the check whose Secret is not opted in, want none", len(got))
	}

	s := &corev1.Secret{}
	if err := env.Client.Get(t.Context(), types.NamespacedName{Namespace: "pitstop-system", Name: "prom-not-opted-in"}, s); err != nil {
		t.Fatal(err)
	}
	s.Labels = optedIn
	if err := env.Client.Update(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	// The failing check is asked again after spec.recheck, with nothing
	// changed on the node.
	testutil.Eventually(t, 10*time.Second, 50*time.Millisecond, func() error {
		if got := testutil.GetNode(t, env.Client, "prom-unlabelled-0").Labels[pitstopv1alpha1.LabelState]; got == "" || got == string(pitstopv1alpha1.StateOperational) {
			return fmt.Errorf("prom-unlabelled-0 is %q, want it out of operational once its check is asked again", got)
		}
		return nil
	})
	if got := queries("vector(2)"); len(got) == 0 || got[0] != "Bearer "+token {
		t.Errorf("once the Secret is labelled, Prometheus got %q, want the bearer token", got)
	}
}

// awaitOutOfOperational waits until the node has left operational (it may
// go on to in-maintenance at once).
func awaitOutOfOperational(t *testing.T, node string) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, 50*time.Millisecond, func() error {
		if got := testutil.GetNode(t, env.Client, node).Labels[pitstopv1alpha1.LabelState]; got == "" || got == string(pitstopv1alpha1.StateOperational) {
			return fmt.Errorf("%s is %q, want it out of operational", node, got)
		}
		return nil
	})
}
