package dashboard_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/dashboard"
	"github.com/pitstop-dev/pitstop/internal/explain"
	"github.com/pitstop-dev/pitstop/internal/fleet"
	"github.com/pitstop-dev/pitstop/internal/manager"
	"github.com/pitstop-dev/pitstop/internal/plugin/check"
	"github.com/pitstop-dev/pitstop/internal/testutil"
	"github.com/pitstop-dev/pitstop/internal/testutil/clustertest"
)

var env *testutil.Env

func TestMain(m *testing.M) { testutil.Main(m, &env) }

// requestLog records the requests the manager sends to the API server.
type requestLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *requestLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		l.mu.Lock()
		l.lines = append(l.lines, r.Method+" "+r.URL.RequestURI())
		l.mu.Unlock()
		return rt.RoundTrip(r)
	})
}

// about returns the recorded requests whose path contains part.
func (l *requestLog) about(part string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		if strings.Contains(line, part) {
			out = append(out, line)
		}
	}
	return out
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// startDashboard runs pitstop's manager with its dashboard on a free port
// and returns the dashboard's URL and the manager's requests.
func startDashboard(t *testing.T, tune ...func(*manager.Options)) (string, *requestLog) {
	t.Helper()
	log := &requestLog{}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(log.wrap)
	addr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	clustertest.StartManager(t, cfg, env.Client, clustertest.Options{Tune: func(o *manager.Options) {
		o.DashboardAddr = addr
		for _, f := range tune {
			f(o)
		}
	}})
	base := "http://" + addr
	testutil.Eventually(t, 10*time.Second, 50*time.Millisecond, func() error {
		_, _, err := get(base + "/api/v1/fleet")
		return err
	})
	return base, log
}

func get(url string) (*http.Response, []byte, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, body, err
}

// getJSON GETs url, wants 200 and JSON, and decodes the body into out.
func getJSON(t *testing.T, url string, out any) {
	t.Helper()
	resp, body, err := get(url)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET %s: %d %s: %s", url, resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		t.Fatalf("GET %s: %v: %s", url, err, body)
	}
}

// zonesProfile: nodes of pool "zones" annotated reboot-needed go into
// maintenance when approved (or inside a window that opens in two hours),
// one per zone at once, unless a freeze holds (one is planned in a day).
func zonesProfile(now time.Time) *pitstopv1alpha1.MaintenanceProfile {
	open := now.UTC().Add(2 * time.Hour)
	return &pitstopv1alpha1.MaintenanceProfile{
		ObjectMeta: metav1.ObjectMeta{Name: "zones"},
		Spec: pitstopv1alpha1.MaintenanceProfileSpec{
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "zones"}},
			Checks: []pitstopv1alpha1.CheckInstance{
				{Name: "reboot_needed", HasAnnotation: &pitstopv1alpha1.KeyValueCheck{Key: "reboot-needed"}},
				{Name: "approved", HasLabel: &pitstopv1alpha1.KeyValueCheck{Key: "approved"}},
				{Name: "window", TimeWindow: &pitstopv1alpha1.TimeWindowCheck{Start: open.Format("15:04"), End: open.Add(time.Hour).Format("15:04"), TimeZone: "UTC"}},
				{Name: "freeze", Freeze: &pitstopv1alpha1.FreezeCheck{Periods: []pitstopv1alpha1.FreezePeriod{{
					Start: metav1.NewTime(now.Add(24 * time.Hour)), End: metav1.NewTime(now.Add(48 * time.Hour)), Reason: "release week",
				}}}},
				{Name: "budget", MaxMaintenance: &pitstopv1alpha1.MaxMaintenanceCheck{Max: 1, ProfileScoped: true, GroupBy: "zone"}},
			},
			States: pitstopv1alpha1.StatesSpec{
				Operational:         pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "reboot_needed", Next: pitstopv1alpha1.StateMaintenanceRequired}}},
				MaintenanceRequired: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "(approved || window) && budget && freeze", Next: pitstopv1alpha1.StateInMaintenance}}},
				InMaintenance:       pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "!reboot_needed", Next: pitstopv1alpha1.StateOperational}}},
			},
		},
	}
}

// zonesFleet creates the zones profile and its nodes: zones-a1 waits for
// approval, zones-b1 is in maintenance, zones-a2 is operational; lonely is
// in no profile and has a NodeMaintenance of its own.
func zonesFleet(t *testing.T, now time.Time) {
	t.Helper()
	pool := func(zone string) testutil.NodeOption {
		return testutil.WithLabels(map[string]string{"pool": "zones", "zone": zone})
	}
	rebootNeeded := func(n *corev1.Node) { n.Annotations = map[string]string{"reboot-needed": "true"} }
	testutil.Create(t, env.Client, zonesProfile(now),
		testutil.Node("zones-a1", pool("a"), rebootNeeded),
		testutil.Node("zones-a2", pool("a")),
		testutil.Node("zones-b1", pool("b"), rebootNeeded, testutil.WithLabels(map[string]string{"approved": "yes"})),
		testutil.Node("lonely"),
		&pitstopv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "lonely-kernel"}, Spec: pitstopv1alpha1.NodeMaintenanceSpec{NodeName: "lonely", Reason: "kernel update"}},
	)
	t.Cleanup(func() {
		_ = env.Client.Delete(t.Context(), &pitstopv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "lonely-kernel"}})
	})
	testutil.Eventually(t, 20*time.Second, 100*time.Millisecond, func() error {
		for node, want := range map[string]pitstopv1alpha1.MaintenanceState{"zones-a1": pitstopv1alpha1.StateMaintenanceRequired, "zones-b1": pitstopv1alpha1.StateInMaintenance} {
			if got := testutil.GetNode(t, env.Client, node).Labels[pitstopv1alpha1.LabelState]; got != string(want) {
				return fmt.Errorf("%s is %q, want %s", node, got, want)
			}
		}
		return nil
	})
}

// TestAPI runs the dashboard in the manager against a real API server and
// reads its JSON API as a script would.
func TestAPI(t *testing.T) {
	base, requests := startDashboard(t, infoLabels)
	now := time.Now()
	zonesFleet(t, now)

	t.Run("info: the maintenance-controller's node infos", func(t *testing.T) { checkSeedInfo(t, base) })

	t.Run("fleet: nodes by profile and state, budgets by zone, window and freeze, drains", func(t *testing.T) {
		var raw map[string]json.RawMessage
		getJSON(t, base+"/api/v1/fleet", &raw)
		for _, key := range []string{"generated", "nodes", "states", "profiles", "unprofiled", "maintenances", "nextChange"} {
			if _, ok := raw[key]; !ok {
				t.Errorf("the fleet has no %q", key)
			}
		}
		// The dashboard answers from the manager's cache, which may show the
		// nodes' last writes a moment after the API server does.
		var f dashboard.Fleet
		var zones *fleet.ProfileView
		want := map[string]pitstopv1alpha1.MaintenanceState{"zones-a1": "maintenance-required", "zones-a2": "operational", "zones-b1": "in-maintenance"}
		testutil.Eventually(t, 10*time.Second, 100*time.Millisecond, func() error {
			f, zones = dashboard.Fleet{}, nil
			getJSON(t, base+"/api/v1/fleet", &f)
			for i := range f.Profiles {
				if f.Profiles[i].Profile == "zones" {
					zones = &f.Profiles[i]
				}
			}
			if zones == nil {
				return fmt.Errorf("profile zones is missing: %+v", f.Profiles)
			}
			got := map[string]pitstopv1alpha1.MaintenanceState{}
			for _, n := range zones.Nodes {
				got[n.Node] = n.State
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				return fmt.Errorf("nodes of zones: %v, want %v", got, want)
			}
			return nil
		})
		wantBudgets := []fleet.Budget{
			{Check: "budget", ProfileScoped: true, GroupBy: "zone", Group: "a", Used: 0, Allowed: 1},
			{Check: "budget", ProfileScoped: true, GroupBy: "zone", Group: "b", Used: 1, Allowed: 1},
		}
		if fmt.Sprint(zones.Budgets) != fmt.Sprint(wantBudgets) {
			t.Errorf("budgets %+v, want %+v", zones.Budgets, wantBudgets)
		}
		if len(zones.Windows) != 2 {
			t.Fatalf("windows %+v, want the window and the freeze", zones.Windows)
		}
		window, freeze := zones.Windows[0], zones.Windows[1]
		if window.Plugin != "timeWindow" || window.Passed || !strings.Contains(window.Reason, "is shut") || !about(window.NextChange, now.Add(2*time.Hour)) {
			t.Errorf("window %+v, want shut until in about 2h", window)
		}
		if freeze.Plugin != "freeze" || !freeze.Passed || !strings.Contains(freeze.Reason, "release week") || !about(freeze.NextChange, now.Add(24*time.Hour)) {
			t.Errorf("freeze %+v, want none holding and the next in a day", freeze)
		}
		if !about(f.NextChange, now.Add(2*time.Hour)) {
			t.Errorf("next change %v, want when the window opens, in about 2h", f.NextChange)
		}
		if !slices.Contains(f.Unprofiled, "lonely") {
			t.Errorf("unprofiled %v lacks lonely", f.Unprofiled)
		}
		found := false
		for _, m := range f.Maintenances {
			found = found || (m.Node == "lonely" && m.Name == "lonely-kernel" && m.Reason == "kernel update")
		}
		if !found {
			t.Errorf("maintenances %+v lack lonely-kernel", f.Maintenances)
		}
		if f.Nodes < 4 || f.States[pitstopv1alpha1.StateInMaintenance] < 1 {
			t.Errorf("fleet counts %d nodes, states %v", f.Nodes, f.States)
		}
	})

	t.Run("node: the answer of pitstop explain, and only its own events read from the API server", func(t *testing.T) {
		regarding := func(kind, ns, name, reason string) *eventsv1.Event {
			return &eventsv1.Event{
				ObjectMeta:          metav1.ObjectMeta{Namespace: "default", GenerateName: "dashboard-"},
				EventTime:           metav1.NewMicroTime(time.Now()),
				ReportingController: "pitstop.dev/test", ReportingInstance: "test",
				Action: "Test", Reason: reason, Type: corev1.EventTypeNormal, Note: reason + " happened",
				Regarding: corev1.ObjectReference{Kind: kind, Namespace: ns, Name: name},
			}
		}
		testutil.Create(t, env.Client,
			regarding("Node", "", "zones-a1", "AboutTheNode"),
			regarding("Node", "", "zones-a2", "AboutAnotherNode"),
			regarding("Pod", "default", "zones-a1", "AboutAPodOfTheSameName"))

		var got explain.NodeReport
		getJSON(t, base+"/api/v1/nodes/zones-a1", &got)
		want, err := explain.Node(t.Context(), env.Client, env.Client, fleet.NewEvaluator(env.Client, check.Deps{}), "zones-a1", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if g, w := summary(&got), summary(want); g != w {
			t.Errorf("the dashboard says\n%s\npitstop explain says\n%s", g, w)
		}
		if !strings.Contains(summary(&got), "[fail] approved: label approved is not set") {
			t.Errorf("the failing check is not reported:\n%s", summary(&got))
		}
		// pitstop's own events about the node are there too.
		var reasons []string
		for _, e := range got.Events {
			reasons = append(reasons, e.Reason)
		}
		if !slices.Contains(reasons, "AboutTheNode") || slices.Contains(reasons, "AboutAnotherNode") || slices.Contains(reasons, "AboutAPodOfTheSameName") || got.EventsError != "" {
			t.Errorf("events %v (error %q), want AboutTheNode and none about other objects", reasons, got.EventsError)
		}

		// Events were listed for the node by the API server, in the default
		// namespace where Events about nodes live, never watched.
		// (The manager's own Events are written there too.)
		lists := slices.DeleteFunc(requests.about("/apis/events.k8s.io/v1/namespaces/default/events"), func(line string) bool {
			return strings.HasPrefix(line, "POST ") || strings.HasPrefix(line, "PATCH ")
		})
		if len(lists) == 0 {
			t.Fatal("the manager never asked the API server for events")
		}
		for _, line := range lists {
			u, err := url.Parse(strings.TrimPrefix(line, "GET "))
			if err != nil {
				t.Fatal(err)
			}
			q := u.Query()
			if !strings.HasPrefix(line, "GET ") || q.Get("watch") != "" || !strings.Contains(q.Get("fieldSelector"), "regarding.kind=Node") || !strings.Contains(q.Get("fieldSelector"), "regarding.name=") {
				t.Errorf("events read by %s; want a list selected by node", line)
			}
		}
	})

	t.Run("profile: the answer of pitstop explain profile", func(t *testing.T) {
		var r explain.ProfileReport
		getJSON(t, base+"/api/v1/profiles/zones", &r)
		if r.Profile != "zones" || r.Nodes["operational"] != 1 || r.Nodes["maintenance-required"] != 1 || r.Nodes["in-maintenance"] != 1 {
			t.Errorf("profile report %+v", r)
		}
		if len(r.Waiting) != 2 || r.Waiting[0].Node == r.Waiting[1].Node {
			t.Errorf("waiting %+v, want zones-a1 and zones-b1", r.Waiting)
		}
	})

	t.Run("unknown names and paths: 404 with a JSON error naming them", func(t *testing.T) {
		for path, want := range map[string]string{
			"/api/v1/nodes/no-such-node":       "node no-such-node not found",
			"/api/v1/profiles/no-such-profile": "MaintenanceProfile no-such-profile not found",
			"/api/v1/machines":                 "no API at /api/v1/machines",
		} {
			resp, body, err := get(base + path)
			if err != nil {
				t.Fatal(err)
			}
			var e struct{ Error string }
			if resp.StatusCode != http.StatusNotFound || json.Unmarshal(body, &e) != nil || !strings.Contains(e.Error, want) {
				t.Errorf("GET %s: %d %s, want 404 and an error saying %q", path, resp.StatusCode, body, want)
			}
		}
		resp, err := http.Post(base+"/api/v1/fleet", "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("POST /api/v1/fleet: %d, want 405: the API only reads", resp.StatusCode)
		}
	})

	t.Run("readers at once share the handler safely", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for i := range 16 {
			wg.Go(func() {
				path := []string{"/api/v1/fleet", "/api/v1/nodes/zones-a1", "/api/v1/profiles/zones", "/api/v1/nodes/zones-b1"}[i%4]
				resp, body, err := get(base + path)
				if err == nil && resp.StatusCode != http.StatusOK {
					err = fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, body)
				}
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
	})

	t.Run("pages and their assets, no inline code allowed", func(t *testing.T) {
		for path, want := range map[string]string{
			"/":                     `data-page="fleet"`,
			"/nodes/zones-a1":       `data-page="node"`,
			"/static/dashboard.js":  "function renderFleet",
			"/static/dashboard.css": ".mark-fail",
		} {
			resp, body, err := get(base + path)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
				t.Errorf("GET %s: %d, body lacks %q", path, resp.StatusCode, want)
			}
			if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
				t.Errorf("GET %s: Content-Security-Policy %q", path, csp)
			}
		}
	})
}

// summary writes what a node report says about its profiles, one line a
// check. Reasons that count down to a time ("opens in 1h59m") are left
// out: two answers a moment apart may round them differently.
func summary(r *explain.NodeReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "node %s: %s\n", r.Node, r.State)
	for _, e := range r.Profiles {
		fmt.Fprintf(&b, "profile %s: %s since %s %s\n", e.Profile, e.Record.Current, e.Record.Since.UTC().Format(time.RFC3339), e.Error)
		for _, t := range e.Decision.Evaluations {
			fmt.Fprintf(&b, "  → %s when %s: passed %v %s\n", t.Next, t.Check, t.Passed, t.Blocked)
			for _, c := range t.Checks {
				mark := "fail"
				if c.Passed {
					mark = "pass"
				}
				reason := c.Reason
				if c.NextChange != nil {
					reason = "(changes by itself)"
				}
				fmt.Fprintf(&b, "    [%s] %s: %s\n", mark, c.Name, reason)
			}
		}
	}
	for _, m := range r.Maintenance {
		fmt.Fprintf(&b, "maintenance %s: %s %d%%\n", m.Name, m.Phase, m.Progress)
	}
	return b.String()
}

// about reports whether t is within ten minutes of want: windows open on
// the minute.
func about(t *time.Time, want time.Time) bool {
	return t != nil && t.Sub(want).Abs() < 10*time.Minute
}
