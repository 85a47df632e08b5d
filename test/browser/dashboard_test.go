package browser

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/config"
	"github.com/pitstop-dev/pitstop/internal/cloud/clusterapi"
	"github.com/pitstop-dev/pitstop/internal/install"
	"github.com/pitstop-dev/pitstop/internal/localcluster"
	"github.com/pitstop-dev/pitstop/internal/manager"
	"github.com/pitstop-dev/pitstop/internal/testutil"
	"github.com/pitstop-dev/pitstop/internal/testutil/clustertest"
)

// chromium is Debian's Chromium; chromedp is never allowed to look for,
// or fetch, another browser.
const chromium = "/usr/bin/chromium"

// screenshotsEnv names the directory the test saves its screenshots to.
const screenshotsEnv = "PITSTOP_SCREENSHOTS"

// pageTimeout bounds every wait for the page to show something: a few
// polls of the page, and the manager's reaction to a change.
const pageTimeout = 30 * time.Second

// rollingReboot: workers annotated reboot-needed wait for approval (the
// label maintenance-approved), an open window, no freeze and a slot of two,
// are drained, and come back when the annotation is gone.
func rollingReboot(now time.Time) *pitstopv1alpha1.MaintenanceProfile {
	return &pitstopv1alpha1.MaintenanceProfile{
		ObjectMeta: metav1.ObjectMeta{Name: "rolling-reboot"},
		Spec: pitstopv1alpha1.MaintenanceProfileSpec{
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{localcluster.LabelWorker: ""}},
			Checks: []pitstopv1alpha1.CheckInstance{
				{Name: "reboot_needed", HasAnnotation: &pitstopv1alpha1.KeyValueCheck{Key: "reboot-needed"}},
				{Name: "approved", HasLabel: &pitstopv1alpha1.KeyValueCheck{Key: "maintenance-approved"}},
				{Name: "window", TimeWindow: &pitstopv1alpha1.TimeWindowCheck{Start: "00:00", End: "00:00", TimeZone: "UTC"}},
				{Name: "freeze", Freeze: &pitstopv1alpha1.FreezeCheck{Periods: []pitstopv1alpha1.FreezePeriod{{
					Start: metav1.NewTime(now.Add(7 * 24 * time.Hour).Truncate(time.Hour)), End: metav1.NewTime(now.Add(9 * 24 * time.Hour).Truncate(time.Hour)), Reason: "year-end release",
				}}}},
				{Name: "budget", MaxMaintenance: &pitstopv1alpha1.MaxMaintenanceCheck{Max: 2, ProfileScoped: true}},
			},
			Triggers: []pitstopv1alpha1.TriggerInstance{
				{Name: "drain", Drain: &pitstopv1alpha1.DrainTrigger{}},
				{Name: "restore", Restore: &pitstopv1alpha1.RestoreTrigger{}},
			},
			States: pitstopv1alpha1.StatesSpec{
				Operational: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "reboot_needed", Next: pitstopv1alpha1.StateMaintenanceRequired}}},
				MaintenanceRequired: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{
					{Check: "approved && window && freeze && budget", Triggers: []string{"drain"}, Next: pitstopv1alpha1.StateInMaintenance},
				}},
				InMaintenance: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "!reboot_needed", Triggers: []string{"restore"}, Next: pitstopv1alpha1.StateOperational}}},
			},
		},
	}
}

// TestDashboardInChromium runs the dashboard of a manager against a local
// cluster of four kwok workers and reads it in Chromium, on loopback as a
// person reaches it through kubectl port-forward (no token):
//
//   - worker-000 needs a reboot but is not approved: maintenance-required,
//     held by the failing check "approved";
//   - worker-001 is approved and drained: in-maintenance;
//   - worker-002 is approved, but its drain waits on a pod whose
//     PodDisruptionBudget allows no disruption;
//   - worker-003 is operational.
//
// Then the cluster changes under open pages, which must follow without a
// reload.
func TestDashboardInChromium(t *testing.T) {
	c, base := startPitstop(t)
	markNodes(t, c)
	browser := startBrowser(t)

	t.Run("the fleet page shows the nodes per state, budget, window, freeze and the blocked drain", func(t *testing.T) {
		navigate(t, browser, base+"/")
		awaitPage(t, browser, "the node counts of rolling-reboot", stateCounts, equals(`{"in-maintenance":"1","maintenance-required":"2","operational":"1"}`))
		awaitPage(t, browser, "the fleet summary", text("#summary"), containsAll("4 nodes", "1 in-maintenance", "2 maintenance-required", "1 operational", "0 in no profile"))
		awaitPage(t, browser, "the budget", text(`[data-profile="rolling-reboot"] .budgets`), containsAll("budget", "2 of 2 slots taken (full)")) // worker-001 in maintenance, worker-002 on its way in
		awaitPage(t, browser, "the window and the freeze", text(`[data-profile="rolling-reboot"] .windows`), containsAll("window", "open", "freeze", "no freeze", `"year-end release"`))
		awaitPage(t, browser, "the blocked drain", text("#drains"), containsAll("worker-002", "profile-worker-002", "PodDisruptionBudget", "dash/web"))
		screenshot(t, browser, "dashboard-fleet.png")
	})

	t.Run("the clusters page shows each Machine with its workload node's state and why it waits", func(t *testing.T) {
		navigate(t, browser, base+"/")
		awaitPage(t, browser, "the link to the clusters page", text("#clusters-link"), containsAll("Cluster API", "the clusters page"))
		navigate(t, browser, base+"/clusters")
		awaitPage(t, browser, "the cluster", text(`[data-cluster="dash/self"] h2`), containsAll("dash/self"))
		awaitPage(t, browser, "a waiting Machine", text(`[data-machine="m-worker-000"]`),
			containsAll("Running", "worker-000", "maintenance-required", "would be held", "profile rolling-reboot: maintenance-required since", "failing: approved"))
		awaitPage(t, browser, "an operational Machine", text(`[data-machine="m-worker-003"]`), containsAll("worker-003", "operational"))
	})

	t.Run("the node page names the failing check and why", func(t *testing.T) {
		navigate(t, browser, base+"/nodes/worker-000")
		awaitPage(t, browser, "the check approved", text(`[data-check="approved"]`), containsAll("FAIL", "approved", "label maintenance-approved is not set"))
		awaitPage(t, browser, "its result", attr(`[data-check="approved"]`, "data-result"), equals("fail"))
		awaitPage(t, browser, "the profile's state", text(`[data-profile="rolling-reboot"] h2`), containsAll("maintenance-required", "since"))
		awaitPage(t, browser, "the passing checks", text(`[data-check="window"]`), containsAll("PASS", "is open"))
		awaitPage(t, browser, "the next change", text(".next-change"), containsAll("Next change"))
		// The answer is the engine's, not one evaluated for the page.
		awaitPage(t, browser, "when the engine evaluated it", text(`[data-profile="rolling-reboot"] .evaluated`), containsAll("Evaluated by the engine", "ago"))
		screenshot(t, browser, "dashboard-node.png")
	})

	t.Run("the node page of a blocked drain names the pod and its PodDisruptionBudget", func(t *testing.T) {
		navigate(t, browser, base+"/nodes/worker-002")
		awaitPage(t, browser, "the blocked transition", text(".blocked"), containsAll("waiting for the drain"))
		awaitPage(t, browser, "the drain's blockers", text(".drain .blockers"), containsAll("dash/web-", "dash/web"))
		awaitPage(t, browser, "the node's events", text("#events"), containsAll("Recent events"))
	})

	t.Run("the node page shows the node's scheduled cloud event and its plan", func(t *testing.T) {
		notBefore := metav1.NewTime(time.Now().Add(72 * time.Hour).Truncate(time.Second))
		startBy := metav1.NewTime(notBefore.Add(-90 * time.Minute))
		mm := &pitstopv1alpha1.MachineMaintenance{
			ObjectMeta: metav1.ObjectMeta{Namespace: "dash", Name: "i-0abc-instance-event-1", Labels: map[string]string{pitstopv1alpha1.LabelMachineMaintenanceNode: "worker-000"}},
			Spec: pitstopv1alpha1.MachineMaintenanceSpec{Provider: "aws", InstanceID: "i-0abc", EventID: "instance-event-1", Code: "instance-retirement",
				Description: "The instance is running on degraded hardware", NotBefore: &notBefore, NodeName: "worker-000"},
		}
		testutil.Create(t, c, mm)
		mm.Status = pitstopv1alpha1.MachineMaintenanceStatus{Phase: pitstopv1alpha1.EventPlanned, LatestSafeStart: &startBy, Plan: "node worker-000 is maintenance-required"}
		if err := c.Status().Update(t.Context(), mm); err != nil {
			t.Fatal(err)
		}
		navigate(t, browser, base+"/nodes/worker-000")
		awaitPage(t, browser, "the scheduled event", text(`[data-object="dash/i-0abc-instance-event-1"]`),
			containsAll("Scheduled event", "instance-retirement", "Planned", "degraded hardware", "Latest safe start", "Plan: node worker-000 is maintenance-required"))
	})

	t.Run("the node page follows the node without a reload", func(t *testing.T) {
		navigate(t, browser, base+"/nodes/worker-003")
		awaitPage(t, browser, "worker-003 operational", text(`[data-profile="rolling-reboot"] h2`), containsAll("operational"))
		markPage(t, browser)
		annotate(t, c, "worker-003", `{"metadata":{"annotations":{"reboot-needed":"true"}}}`)
		awaitPage(t, browser, "worker-003 waiting for approval", text(`[data-profile="rolling-reboot"]`), containsAll("maintenance-required", "label maintenance-approved is not set"))
		assertNotReloaded(t, browser)
	})

	t.Run("the fleet page follows the fleet without a reload", func(t *testing.T) {
		navigate(t, browser, base+"/")
		awaitPage(t, browser, "the counts before", stateCounts, equals(`{"in-maintenance":"1","maintenance-required":"3","operational":"0"}`))
		markPage(t, browser)
		annotate(t, c, "worker-001", `{"metadata":{"annotations":{"reboot-needed":null}}}`)
		awaitPage(t, browser, "worker-001 back in service", stateCounts, equals(`{"in-maintenance":"0","maintenance-required":"3","operational":"1"}`))
		awaitPage(t, browser, "worker-001's NodeMaintenance gone", text("#drains"), func(s string) error {
			if strings.Contains(s, "worker-001") {
				return fmt.Errorf("still lists worker-001")
			}
			return nil
		})
		assertNotReloaded(t, browser)
	})
}

// startPitstop starts a local cluster of four workers and the manager with
// its dashboard, and returns a client and the dashboard's URL.
func startPitstop(t *testing.T) (client.Client, string) {
	t.Helper()
	opts := localcluster.DefaultOptions()
	opts.ControlPlaneNodes = 0
	opts.Workers = 4
	crds, err := config.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	cluster, c := testutil.StartLocalCluster(t, opts, crds...)
	// One pod on worker-002 that its PodDisruptionBudget keeps there.
	web := localcluster.Deployment("dash", "web", 1)
	web.Spec.Template.Spec.NodeSelector = map[string]string{corev1.LabelHostname: "worker-002"}
	err = cluster.Apply(t.Context(), localcluster.Workloads{
		Namespace:   &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "dash"}},
		Deployments: []*appsv1.Deployment{web},
		PDBs:        []*policyv1.PodDisruptionBudget{localcluster.PDB("dash", "web", nil, &intstr.IntOrString{Type: intstr.Int, IntVal: 1})},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := cluster.AwaitWorkloads(t.Context(), "dash"); err != nil {
		t.Fatal(err)
	}
	clusterAPI(t, cluster, c)
	addr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	clustertest.StartManager(t, cluster.Config, c, clustertest.Options{AsServiceAccount: true, Tune: func(o *manager.Options) {
		o.DashboardAddr, o.ClusterAPI, o.ClusterAPINamespaces = addr, true, testutil.ClusterAPINamespaces
	}})
	return c, "http://" + addr
}

// clusterAPI makes the cluster its own Cluster API management cluster:
// Cluster API's Machine CRD, the kubeconfig Secret of workload cluster
// "self" (this cluster), and an opted-in Machine for each worker.
func clusterAPI(t *testing.T, cluster *localcluster.Cluster, c client.Client) {
	t.Helper()
	data, err := os.ReadFile("../../internal/controller/capi/testdata/crds/cluster.x-k8s.io_machines.yaml")
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(data, crd); err != nil {
		t.Fatal(err)
	}
	if err := install.CRDs(t.Context(), c, []*apiextensionsv1.CustomResourceDefinition{crd}); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := os.ReadFile(cluster.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Create(t, c, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "dash", Name: "self-kubeconfig"}, Data: map[string][]byte{"value": kubeconfig}})
	for i := range 4 {
		node := fmt.Sprintf("worker-%03d", i)
		m := &clusterv1.Machine{
			ObjectMeta: metav1.ObjectMeta{Namespace: "dash", Name: "m-" + node, Labels: map[string]string{clusterapi.LabelEnabled: "true"}},
			Spec: clusterv1.MachineSpec{ClusterName: "self", Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To("bootstrap")},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "KwokMachine", Name: node}},
		}
		testutil.Create(t, c, m)
		base := m.DeepCopy()
		m.Status.NodeRef, m.Status.Phase = clusterv1.MachineNodeReference{Name: node}, "Running"
		if err := c.Status().Patch(t.Context(), m, client.MergeFrom(base)); err != nil {
			t.Fatal(err)
		}
	}
}

// markNodes applies the profile, marks the workers, and waits until the
// manager has placed each as the test expects.
func markNodes(t *testing.T, c client.Client) {
	t.Helper()
	testutil.Create(t, c, rollingReboot(time.Now()))
	for node, patch := range map[string]string{
		"worker-000": `{"metadata":{"annotations":{"reboot-needed":"true"}}}`,
		"worker-001": `{"metadata":{"annotations":{"reboot-needed":"true"},"labels":{"maintenance-approved":"yes"}}}`,
		"worker-002": `{"metadata":{"annotations":{"reboot-needed":"true"},"labels":{"maintenance-approved":"yes"}}}`,
	} {
		annotate(t, c, node, patch)
	}
	want := map[string]pitstopv1alpha1.MaintenanceState{
		"worker-000": pitstopv1alpha1.StateMaintenanceRequired,
		"worker-001": pitstopv1alpha1.StateInMaintenance,
		"worker-002": pitstopv1alpha1.StateMaintenanceRequired,
		"worker-003": pitstopv1alpha1.StateOperational,
	}
	testutil.Eventually(t, pageTimeout, 200*time.Millisecond, func() error {
		for node, state := range want {
			if got := testutil.GetNode(t, c, node).Labels[pitstopv1alpha1.LabelState]; got != string(state) {
				return fmt.Errorf("%s is %q, want %s", node, got, state)
			}
		}
		nm := &pitstopv1alpha1.NodeMaintenance{}
		if err := c.Get(t.Context(), client.ObjectKey{Name: "profile-worker-002"}, nm); err != nil {
			return err
		}
		if len(nm.Status.Blockers) == 0 || !meta.IsStatusConditionFalse(nm.Status.Conditions, pitstopv1alpha1.ConditionDrained) {
			return fmt.Errorf("the drain of worker-002 reports no blocker yet: %+v", nm.Status)
		}
		return nil
	})
}

// annotate merge-patches a node.
func annotate(t *testing.T, c client.Client, node, patch string) {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
	if err := c.Patch(t.Context(), n, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatalf("patching %s: %v", node, err)
	}
}

// browser is a tab of headless Chromium, and the JavaScript errors its
// pages raised.
type browser struct {
	ctx    context.Context
	mu     sync.Mutex
	errors []string
}

// startBrowser starts headless Chromium for the test. The page's uncaught
// exceptions fail the test when it ends.
func startBrowser(t *testing.T) *browser {
	t.Helper()
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("%s is missing: run `make deps` (hack/ensure-deps.sh installs Debian's chromium): %v", chromium, err)
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1000),
	)
	ctx, cancel := chromedp.NewContext(allocCtx)
	b := &browser{ctx: ctx}
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, e := range b.errors {
			t.Errorf("JavaScript error on the page: %s", e)
		}
	})
	// Listen starts the browser and opens the tab.
	err := chromedp.Listen(ctx, func(ev any) {
		if ex, ok := ev.(*runtime.EventExceptionThrown); ok {
			b.mu.Lock()
			b.errors = append(b.errors, (&chromedp.ExceptionError{ExceptionDetails: ex.ExceptionDetails}).Error())
			b.mu.Unlock()
		}
	})
	if err != nil {
		t.Fatalf("starting %s: %v", chromium, err)
	}
	return b
}

func navigate(t *testing.T, b *browser, url string) {
	t.Helper()
	if err := chromedp.Do(b.ctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("opening %s: %v", url, err)
	}
}

// stateCounts is the node count of each state in the rolling-reboot
// section of the fleet page, as JSON with sorted keys.
const stateCounts = `JSON.stringify(Object.fromEntries(
	[...document.querySelectorAll('section.profile[data-profile="rolling-reboot"] table.states tr[data-state]')]
		.map((row) => [row.dataset.state, row.querySelector("td.count").textContent])
		.sort()))`

// text is the expression for the visible text of the first element that
// matches selector ("" when none does).
func text(selector string) string {
	return fmt.Sprintf(`document.querySelector(%s)?.innerText ?? ""`, jsString(selector))
}

// attr is the expression for an attribute of the first element that
// matches selector.
func attr(selector, name string) string {
	return fmt.Sprintf(`document.querySelector(%s)?.getAttribute(%s) ?? ""`, jsString(selector), jsString(name))
}

func jsString(s string) string {
	data, _ := json.Marshal(s) // a string always marshals
	return string(data)
}

// awaitPage evaluates expr (a string) on the page until ok accepts it, and
// fails the test with the last value when pageTimeout passes first.
func awaitPage(t *testing.T, b *browser, what, expr string, ok func(string) error) {
	t.Helper()
	deadline := time.Now().Add(pageTimeout)
	for {
		got, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](expr))
		if err == nil {
			if err = ok(got); err == nil {
				return
			}
		}
		if time.Now().After(deadline) {
			page, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.body.innerText`))
			t.Fatalf("the page does not show %s after %s: %v\npage:\n%s", what, pageTimeout, err, page)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func equals(want string) func(string) error {
	return func(got string) error {
		if got != want {
			return fmt.Errorf("got %s, want %s", got, want)
		}
		return nil
	}
}

func containsAll(parts ...string) func(string) error {
	return func(got string) error {
		for _, p := range parts {
			if !strings.Contains(got, p) {
				return fmt.Errorf("%q lacks %q", got, p)
			}
		}
		return nil
	}
}

// markPage leaves a mark in the page's JavaScript state, which a reload
// would wipe out.
func markPage(t *testing.T, b *browser) {
	t.Helper()
	if _, err := chromedp.Run(b.ctx, chromedp.Evaluate[chromedp.Void](`window.pitstopTestMark = "not reloaded"`)); err != nil {
		t.Fatal(err)
	}
}

func assertNotReloaded(t *testing.T, b *browser) {
	t.Helper()
	got, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`window.pitstopTestMark ?? "reloaded"`))
	if err != nil || got != "not reloaded" {
		t.Errorf("the page was reloaded (%q, %v); it should have updated in place", got, err)
	}
}

// screenshot saves the whole page as PNG into $PITSTOP_SCREENSHOTS, when
// it is set.
func screenshot(t *testing.T, b *browser, name string) {
	t.Helper()
	dir := os.Getenv(screenshotsEnv)
	if dir == "" {
		return
	}
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("saved %s", filepath.Join(dir, name))
}
