package testutil

import (
	"context"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/pitstop-dev/pitstop/internal/scheme"
)

// Controllers is a controller-runtime manager a test runs with only the
// controllers it sets up.
type Controllers struct {
	ctrl.Manager
	// Stop stops the manager and waits for it; it is safe to call twice,
	// and the end of the test calls it.
	Stop func()
}

// StartControllers runs a manager against cfg with the controllers setup
// registers, until Stop or the end of the test. opts are the manager's
// options; unset, the scheme is pitstop's, metrics and probes serve on no
// port, and the manager's log is shown only if the test fails
// (ManagerLogger), after the test's own messages.
func StartControllers(t testing.TB, cfg *rest.Config, opts ctrl.Options, setup func(ctrl.Manager) error) *Controllers {
	t.Helper()
	if opts.Scheme == nil {
		opts.Scheme = scheme.New()
	}
	if opts.Metrics.BindAddress == "" {
		opts.Metrics = metricsserver.Options{BindAddress: "0"}
	}
	if opts.HealthProbeBindAddress == "" {
		opts.HealthProbeBindAddress = "0"
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = ManagerLogger(t)
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := setup(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	c := &Controllers{Manager: mgr, Stop: sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})}
	t.Cleanup(c.Stop)
	return c
}
