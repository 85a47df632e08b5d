// Package clustertest runs pitstop's manager in a test's process against an
// API server (envtest or the local cluster). It is apart from testutil
// because it imports the manager, and through it every controller, while
// the controllers' own in-package tests import testutil.
package clustertest

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pitstop-dev/pitstop/internal/manager"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// Options choose what the manager under test runs besides the controllers.
type Options struct {
	// Webhook serves the admission webhook on 127.0.0.1 with the
	// certificate pitstop manages, and the API server calls it.
	Webhook bool
	// Medik8sCompat runs the medik8s compatibility controller.
	Medik8sCompat bool
	// AsServiceAccount runs the manager with a token of the Helm chart's
	// ServiceAccount, holding exactly the RBAC the chart grants with every
	// feature on, instead of as the cluster's admin: a permission the code
	// needs and the chart lacks fails the test. With Webhook, the webhook
	// configuration is created first, as the install would; the manager
	// writes it but is not allowed to delete it.
	AsServiceAccount bool
	// Tune changes the manager's options last.
	Tune func(*manager.Options)
}

// startTimeout bounds how long StartManager waits for the manager to run
// its controllers.
const startTimeout = time.Minute

// Manager is a manager started by a test.
type Manager struct {
	stopped atomic.Bool
	cancel  context.CancelFunc
	done    chan error
	t       testing.TB
}

// Stop stops the manager and waits for it; it is safe to call twice.
func (m *Manager) Stop() {
	if m.stopped.Swap(true) {
		return
	}
	m.cancel()
	if err := <-m.done; err != nil {
		m.t.Errorf("manager: %v", err)
	}
}

// StartManager runs pitstop's manager against cfg until Stop or the end of
// the test, without leader election, metrics, probes or dashboard (Tune can
// turn it on). c is an admin client of the same API server. Without a
// webhook, a webhook configuration left by an earlier manager is removed,
// since it would point at a port nobody serves.
func StartManager(t testing.TB, cfg *rest.Config, c client.Client, o Options) *Manager {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	opts := manager.DefaultOptions()
	opts.MetricsAddr, opts.HealthAddr, opts.DashboardAddr = "0", "0", "0"
	opts.LeaderElection = false
	opts.Medik8sCompat = o.Medik8sCompat
	opts.Webhook.Port = 0
	// The manager's namespace holds its webhook certificate and budget slots.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: opts.LeaderElectionNamespace}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		cancel()
		t.Fatal(err)
	}
	if o.Webhook {
		opts.Webhook.Host = "127.0.0.1"
		opts.Webhook.Port = testutil.FreePort(t)
		opts.Webhook.URL = fmt.Sprintf("https://127.0.0.1:%d", opts.Webhook.Port)
		opts.Webhook.CertDir = t.TempDir()
	} else if err := c.DeleteAllOf(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{}); err != nil {
		cancel()
		t.Fatal(err)
	}
	if o.Tune != nil {
		o.Tune(&opts)
	}
	if o.AsServiceAccount {
		cfg = testutil.ServiceAccountConfig(t, cfg, c)
		if o.Webhook {
			vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: opts.Webhook.ConfigName}}
			if err := c.Create(ctx, vwc); err != nil && !apierrors.IsAlreadyExists(err) {
				cancel()
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Delete(context.Background(), vwc) })
		}
	}
	log := Logger(t)
	mgr, err := manager.New(ctx, cfg, opts, log)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	m := &Manager{cancel: cancel, done: make(chan error, 1), t: t}
	go func() { m.done <- mgr.Start(ctx) }()
	t.Cleanup(m.Stop)
	if o.Webhook {
		// The API server calls the webhook as soon as its configuration
		// exists: wait until the server answers.
		addr := fmt.Sprintf("127.0.0.1:%d", opts.Webhook.Port)
		testutil.Eventually(t, 10*time.Second, 50*time.Millisecond, func() error {
			conn, err := net.Dial("tcp", addr)
			if err == nil {
				conn.Close()
			}
			return err
		})
	}
	select {
	case <-mgr.Elected():
	case <-time.After(startTimeout):
		t.Fatalf("the manager did not start within %s (its caches never synced?)", startTimeout)
	}
	return m
}

// Logger keeps the manager's log lines and shows them only when the test
// fails (testutil.ManagerLogger).
func Logger(t testing.TB) logr.Logger { return testutil.ManagerLogger(t) }
