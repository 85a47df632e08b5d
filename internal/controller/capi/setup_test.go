package capi_test

import (
	"strings"
	"testing"

	"github.com/go-logr/logr/testr"

	"github.com/pitstop-dev/pitstop/internal/manager"
)

// TestTheBridgeRefusesToStartWithoutClusterAPIMachines: --cluster-api
// against an API server that does not serve Cluster API's v1beta2
// Machines (here the workload cluster's) stops the manager from starting,
// with an error saying what is missing and asking whether this is a
// management cluster.
func TestTheBridgeRefusesToStartWithoutClusterAPIMachines(t *testing.T) {
	opts := manager.DefaultOptions()
	opts.MetricsAddr, opts.HealthAddr, opts.DashboardAddr = "0", "0", "0"
	opts.LeaderElection = false
	opts.Webhook.Port = 0
	opts.ClusterAPI = true
	_, err := manager.New(t.Context(), wlConfig, opts, testr.New(t))
	if err == nil {
		t.Fatal("the manager started with --cluster-api where no Cluster API Machine is served")
	}
	for _, want := range []string{"cluster.x-k8s.io/v1beta2, Kind=Machine", "is this a Cluster API management cluster?"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
