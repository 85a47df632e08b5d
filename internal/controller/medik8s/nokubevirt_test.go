package medik8s_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pitstop-dev/pitstop/config"
	"github.com/pitstop-dev/pitstop/internal/controller/medik8s"
	"github.com/pitstop-dev/pitstop/internal/install"
	"github.com/pitstop-dev/pitstop/internal/manager"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// logLines is a logger's output, kept for the test to read.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) write(prefix, args string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, strings.TrimSpace(prefix+" "+args))
}

// find returns the first line that holds every one of parts.
func (l *logLines) find(parts ...string) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return line, true
		}
	}
	return "", false
}

// TestStartsWithoutTheKubevirtCRD: --medik8s-compat against an API server
// with the nodemaintenance.medik8s.io CRD and without the kubevirt.io one
// (an install that kept the medik8s operator's CRD) starts, reconciles the
// v1beta1 API, and says in its log that it does not reconcile the
// kubevirt.io one, naming its CRD.
func TestStartsWithoutTheKubevirtCRD(t *testing.T) {
	bare, err := testutil.StartEnv() // pitstop's and the Machine API's CRDs only
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := bare.Stop(); err != nil {
			t.Error(err)
		}
	})
	crds, err := config.Medik8sCRDs()
	if err != nil {
		t.Fatal(err)
	}
	var only []*apiextensionsv1.CustomResourceDefinition
	for _, crd := range crds {
		if crd.Name == medik8s.CRDName {
			only = append(only, crd)
		}
	}
	if len(only) != 1 {
		t.Fatalf("config.Medik8sCRDs has %d CRDs named %s, want 1", len(only), medik8s.CRDName)
	}
	if err := install.CRDs(t.Context(), bare.Client, only); err != nil {
		t.Fatal(err)
	}

	opts := manager.DefaultOptions()
	opts.MetricsAddr, opts.HealthAddr, opts.DashboardAddr = "0", "0", "0"
	opts.LeaderElection = false
	opts.Webhook.Port = 0
	opts.Medik8sCompat = true
	testutil.Create(t, bare.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: opts.LeaderElectionNamespace}})
	log := &logLines{}
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := manager.New(ctx, bare.Config, opts, funcr.New(log.write, funcr.Options{}))
	if err != nil {
		cancel()
		t.Fatalf("the manager did not start without the kubevirt.io CRD: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	select {
	case <-mgr.Elected():
	case <-time.After(time.Minute):
		t.Fatal("the manager did not start within a minute")
	}

	if line, ok := log.find(medik8s.KubevirtGroupVersionKind.String(), medik8s.KubevirtCRDName, "not installed"); !ok {
		t.Errorf("no log line says %s is not reconciled for want of the CRD %s", medik8s.KubevirtGroupVersionKind, medik8s.KubevirtCRDName)
	} else {
		t.Logf("the manager logged: %s", line)
	}

	// The v1beta1 API is served: a maintenance of a node without pods
	// goes through.
	testutil.Create(t, bare.Client, testutil.Node("nokubevirt-1"))
	testutil.Create(t, bare.Client, medik8sNM("nokubevirt", "nokubevirt-1", "firmware"))
	testutil.Eventually(t, 20*time.Second, 50*time.Millisecond, func() error {
		obj := medik8sNM("nokubevirt", "", "")
		if err := bare.Client.Get(t.Context(), client.ObjectKey{Name: "nokubevirt"}, obj); err != nil {
			return err
		}
		if phase, _, _ := unstructured.NestedString(obj.Object, "status", "phase"); phase != "Succeeded" {
			return fmt.Errorf("medik8s NodeMaintenance status %v, want phase Succeeded", obj.Object["status"])
		}
		return nil
	})
	if n := testutil.GetNode(t, bare.Client, "nokubevirt-1"); !n.Spec.Unschedulable {
		t.Error("node not cordoned by the maintenance")
	}
}
