//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/importer"
	"github.com/pitstop-dev/pitstop/internal/localcluster"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// slackHook is a Slack incoming webhook: it records the text of each
// message posted to it.
type slackHook struct {
	mu    sync.Mutex
	texts []string
}

func (h *slackHook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var msg struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(body, &msg); err != nil {
		http.Error(w, "invalid_payload", http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	h.texts = append(h.texts, msg.Text)
	h.mu.Unlock()
	_, _ = io.WriteString(w, "ok")
}

// said waits until a message containing want was posted.
func (h *slackHook) said(t *testing.T, want string) {
	t.Helper()
	testutil.Eventually(t, time.Minute, 200*time.Millisecond, func() error {
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, text := range h.texts {
			if strings.Contains(text, want) {
				return nil
			}
		}
		return fmt.Errorf("no Slack message says %q among %q", want, h.texts)
	})
}

// TestTheMaintenanceControllersFlatcarExampleImported: the
// maintenance-controller README's configuration for Flatcar update agents,
// verbatim, imports without a warning (its Slack hooks into the Secret,
// here pointed at a local incoming webhook) and, applied to a local
// cluster, takes a node through the states the README describes: the
// update agent's reboot-needed annotation makes it maintenance-required
// and asks for approval on Slack; the approval annotation lets it in
// (removed, reboot-ok set, Slack told); the reboot done (reboot-needed
// gone) brings it back operational without reboot-ok.
func TestTheMaintenanceControllersFlatcarExampleImported(t *testing.T) {
	ctx := t.Context()
	opts := localcluster.DefaultOptions()
	opts.ControlPlaneNodes, opts.Workers = 0, 2
	cluster, c := testutil.StartLocalCluster(t, opts)
	startPitstop(t, cluster, c)

	data, err := os.ReadFile(filepath.Join("..", "..", "internal", "importer", "testdata", "flatcar.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := importer.Import(data, importer.Options{File: "flatcar.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range r.Notes {
		if n.Warning {
			t.Errorf("importing the README's example: %s", n)
		}
	}
	hook := &slackHook{}
	srv := httptest.NewServer(hook)
	t.Cleanup(srv.Close)
	for k := range r.Secret.StringData {
		r.Secret.StringData[k] = srv.URL // the README's "Your hook"
	}
	testutil.Create(t, c, r.Secret)
	for i := range r.Profiles {
		testutil.Create(t, c, &r.Profiles[i])
	}

	const node = "worker-000"
	patch := func(annotations string) { t.Helper(); patchSeedNode(t, c, node, "flatcar", annotations) }
	state := func(want pitstopv1alpha1.MaintenanceState, check func(*corev1.Node) error) {
		t.Helper()
		testutil.Eventually(t, time.Minute, 200*time.Millisecond, func() error {
			n := &corev1.Node{}
			if err := c.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
				return err
			}
			if got := n.Labels[pitstopv1alpha1.LabelState]; got != string(want) {
				return fmt.Errorf("%s is %q, want %s", node, got, want)
			}
			if check != nil {
				return check(n)
			}
			return nil
		})
	}
	const rebootNeeded, rebootOK, approved = "flatcar-linux-update.v1.flatcar-linux.net/reboot-needed", "flatcar-linux-update.v1.flatcar-linux.net/reboot-ok", "cloud.sap/maintenance-approved"

	patch("{}")
	state(pitstopv1alpha1.StateOperational, nil)
	patch(fmt.Sprintf(`{%q:"true"}`, rebootNeeded))
	state(pitstopv1alpha1.StateMaintenanceRequired, nil)
	hook.said(t, "The node "+node+" requires maintenance. Manual approval is required.")

	patch(fmt.Sprintf(`{%q:"true"}`, approved))
	state(pitstopv1alpha1.StateInMaintenance, func(n *corev1.Node) error {
		if _, ok := n.Annotations[approved]; ok || n.Annotations[rebootOK] != "true" {
			return fmt.Errorf("annotations %v, want the approval removed and reboot-ok set", n.Annotations)
		}
		return nil
	})
	hook.said(t, "Maintenance for node "+node+" has started.")

	patch(fmt.Sprintf(`{%q:null}`, rebootNeeded))
	state(pitstopv1alpha1.StateOperational, func(n *corev1.Node) error {
		if _, ok := n.Annotations[rebootOK]; ok {
			return fmt.Errorf("reboot-ok still set: %v", n.Annotations)
		}
		return nil
	})
}

// drainOnEnter is a maintenance-controller configuration that drains in
// the enter chain of in-maintenance, as its docs recommend, and uncordons
// in the enter chain of operational.
const drainOnEnter = `intervals:
  requeue: 60s
instances:
  check:
  - {type: hasAnnotation, name: reboot_needed, config: {key: reboot-needed, value: "true"}}
  - {type: maxMaintenance, name: one_at_a_time, config: {max: 1}}
  trigger:
  - {type: eviction, name: drain, config: {action: drain}}
  - {type: eviction, name: uncordon, config: {action: uncordon}}
profiles:
- name: drainer
  operational:
    enter: uncordon
    transitions:
    - {check: reboot_needed, next: maintenance-required}
  maintenance-required:
    transitions:
    - {check: one_at_a_time, next: in-maintenance}
  in-maintenance:
    enter: drain
    transitions:
    - {check: "!reboot_needed", next: operational}
`

// TestTheMaintenanceControllersEnterChainsImported: a configuration that
// drains in in-maintenance's enter chain imports without a warning and,
// on a local cluster, behaves as under the maintenance-controller: the
// node is in-maintenance (and cordoned) while its pods are still there,
// behind a PodDisruptionBudget; it does not leave before the drain is
// done, even when its way out passes; once drained it goes back
// operational and operational's enter chain uncordons it.
func TestTheMaintenanceControllersEnterChainsImported(t *testing.T) {
	ctx := t.Context()
	opts := localcluster.DefaultOptions()
	opts.ControlPlaneNodes, opts.Workers = 0, 1
	cluster, c := testutil.StartLocalCluster(t, opts)
	startPitstop(t, cluster, c)

	r, err := importer.Import([]byte(drainOnEnter), importer.Options{File: "maintenance.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range r.Notes {
		if n.Warning {
			t.Errorf("importing: %s", n)
		}
	}
	if got := r.Profiles[0].Spec.States.InMaintenance.Enter; len(got) != 1 || got[0] != "drain" {
		t.Fatalf("in-maintenance enter = %v, want [drain]", got)
	}
	for i := range r.Profiles {
		testutil.Create(t, c, &r.Profiles[i])
	}

	const node, ns = "worker-000", "enter"
	w := localcluster.Workloads{
		Namespace:   &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		Deployments: []*appsv1.Deployment{localcluster.Deployment(ns, "web", 2)},
		PDBs:        []*policyv1.PodDisruptionBudget{localcluster.PDB(ns, "web", nil, &intstr.IntOrString{Type: intstr.Int, IntVal: 2})},
	}
	if err := cluster.Apply(ctx, w); err != nil {
		t.Fatal(err)
	}
	if err := cluster.AwaitWorkloads(ctx, ns); err != nil {
		t.Fatal(err)
	}
	patch := func(annotations string) { t.Helper(); patchSeedNode(t, c, node, "drainer", annotations) }
	get := func() *corev1.Node {
		t.Helper()
		n := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	patch(`{"reboot-needed":"true"}`)
	testutil.Eventually(t, time.Minute, 200*time.Millisecond, func() error {
		n := get()
		if got := n.Labels[pitstopv1alpha1.LabelState]; got != string(pitstopv1alpha1.StateInMaintenance) || !n.Spec.Unschedulable {
			return fmt.Errorf("%s is %q, cordoned %v; want in-maintenance and cordoned", node, got, n.Spec.Unschedulable)
		}
		return nil
	})
	if left := podsOn(t, c, ns, node); left != 2 {
		t.Errorf("%d pods left on the node in maintenance, want both: the budget allows no eviction", left)
	}

	patch(`{"reboot-needed":null}`)
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if got := get().Labels[pitstopv1alpha1.LabelState]; got != string(pitstopv1alpha1.StateInMaintenance) {
			t.Fatalf("%s left in-maintenance (%q) before its drain was done", node, got)
		}
	}

	if err := c.Delete(ctx, w.PDBs[0]); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, time.Minute, 200*time.Millisecond, func() error {
		n := get()
		if got := n.Labels[pitstopv1alpha1.LabelState]; got != string(pitstopv1alpha1.StateOperational) || n.Spec.Unschedulable {
			return fmt.Errorf("%s is %q, cordoned %v; want operational and uncordoned", node, got, n.Spec.Unschedulable)
		}
		return nil
	})
}

// patchSeedNode gives the node the maintenance-controller's profile label
// for profile and merges annotations (a JSON object) into its own.
func patchSeedNode(t *testing.T, c client.Client, node, profile, annotations string) {
	t.Helper()
	p := fmt.Sprintf(`{"metadata":{"labels":{%q:%q},"annotations":%s}}`, pitstopv1alpha1.LabelSeedProfile, profile, annotations)
	if err := c.Patch(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, client.RawPatch(types.MergePatchType, []byte(p))); err != nil {
		t.Fatal(err)
	}
}
