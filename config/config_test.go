package config_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/config"
	"github.com/pitstop-dev/pitstop/internal/explain"
	"github.com/pitstop-dev/pitstop/internal/localcluster"
	"github.com/pitstop-dev/pitstop/internal/manager"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

var env *testutil.Env

func TestMain(m *testing.M) { testutil.Main(m, &env) }

// TestCRDsMatchTheBases checks that the embedded CRDs are every file of
// crd/bases and that kustomize lists each of them.
func TestCRDsMatchTheBases(t *testing.T) {
	crds, err := config.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("crd/bases/*.yaml")
	if len(crds) == 0 || len(crds) != len(files) {
		t.Fatalf("embedded %d CRDs, crd/bases has %d files", len(crds), len(files))
	}
	kustomization, err := os.ReadFile("crd/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !bytes.Contains(kustomization, []byte(f[len("crd/"):])) {
			t.Errorf("crd/kustomization.yaml does not list %s", f)
		}
	}
}

// TestInstallManifestsGrantWhatTheManagerNeeds applies config/default to a
// real API server, then runs the manager as its ServiceAccount: it must be
// able to take its leader Lease with exactly the RBAC the manifests grant.
func TestInstallManifestsGrantWhatTheManagerNeeds(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	kubectl := filepath.Join(localcluster.DefaultBinDir(), "kubectl")
	rendered, err := exec.Command(kubectl, "kustomize", "default").Output()
	if err != nil {
		t.Fatalf("kubectl kustomize config/default: %v", err)
	}
	apply := exec.Command(kubectl, "--kubeconfig", kubeconfig, "apply", "--server-side", "--force-conflicts", "-f", "-")
	apply.Stdin = bytes.NewReader(rendered)
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	deploy := &appsv1.Deployment{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: "pitstop-system", Name: "pitstop"}, deploy); err != nil {
		t.Fatal(err)
	}
	if got := deploy.Spec.Template.Spec.Containers[0].Image; got != "ghcr.io/pitstop-dev/pitstop:latest" {
		t.Errorf("image %q", got)
	}

	asServiceAccount := rest.CopyConfig(env.Config)
	asServiceAccount.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:pitstop-system:pitstop"}
	opts := manager.DefaultOptions()
	opts.MetricsAddr, opts.HealthAddr = "0", "0"
	opts.LeaderElectionNamespace = "pitstop-system"
	opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = 4*time.Second, 3*time.Second, 500*time.Millisecond
	// The webhook runs too: its certificate Secret and webhook configuration
	// are written with the ServiceAccount's permissions.
	opts.Webhook.Host = "127.0.0.1"
	opts.Webhook.Port = testutil.FreePort(t)
	opts.Webhook.URL = fmt.Sprintf("https://127.0.0.1:%d", opts.Webhook.Port)
	opts.Webhook.CertDir = t.TempDir()
	opts.DashboardAddr = fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	mgr, err := manager.New(t.Context(), asServiceAccount, opts, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	select {
	case <-mgr.Elected():
	case err := <-done:
		t.Fatalf("manager stopped before it was elected: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the manager, running as its ServiceAccount, did not win the leader election: RBAC for leases is missing")
	}
	lease := &coordinationv1.Lease{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: "pitstop-system", Name: opts.LeaderElectionID}, lease); err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(lease.Spec.HolderIdentity, "") == "" {
		t.Error("the Lease has no holder")
	}
	// The webhook answers: a NodeMaintenance for a missing node is refused
	// by pitstop, not by the API server's schema.
	nm := &pitstopv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "no-such-node"}, Spec: pitstopv1alpha1.NodeMaintenanceSpec{NodeName: "no-such-node"}}
	if err := env.Client.Create(t.Context(), nm); err == nil || !strings.Contains(err.Error(), "node no-such-node does not exist") {
		t.Errorf("creating a NodeMaintenance for a missing node: got %v, want the webhook's refusal", err)
	}
	if err := env.Client.DeleteAllOf(t.Context(), &admissionregistrationv1.ValidatingWebhookConfiguration{}); err != nil {
		t.Error(err)
	}

	// The dashboard reads a node, its profiles and its Events.
	testutil.Create(t, env.Client, testutil.Node("rbac-dashboard"))
	report := &explain.NodeReport{}
	testutil.Eventually(t, 10*time.Second, 100*time.Millisecond, func() error {
		resp, err := http.Get("http://" + opts.DashboardAddr + "/api/v1/nodes/rbac-dashboard")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET /api/v1/nodes/rbac-dashboard: %s", resp.Status)
		}
		return json.NewDecoder(resp.Body).Decode(report)
	})
	if report.EventsError != "" {
		t.Errorf("the dashboard cannot read Events as the ServiceAccount: %s", report.EventsError)
	}
}
