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

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
	patch := func(annotations string) {
		t.Helper()
		p := fmt.Sprintf(`{"metadata":{"labels":{%q:"flatcar"},"annotations":%s}}`, pitstopv1alpha1.LabelSeedProfile, annotations)
		if err := c.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, client.RawPatch(types.MergePatchType, []byte(p))); err != nil {
			t.Fatal(err)
		}
	}
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
