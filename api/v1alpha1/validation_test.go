package v1alpha1_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// env is a real API server with the generated CRDs: validation markers and
// CEL rules are checked by the API server itself, as in a cluster.
var env *testutil.Env

func TestMain(m *testing.M) { testutil.Main(m, &env) }

func nodeMaintenance(name, node string) *pitstopv1alpha1.NodeMaintenance {
	return &pitstopv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       pitstopv1alpha1.NodeMaintenanceSpec{NodeName: node, Reason: "kernel update"},
	}
}

// TestNodeMaintenanceDefaults checks the drain defaults the API server fills
// in: those of `kubectl drain --ignore-daemonsets --delete-emptydir-data`.
func TestNodeMaintenanceDefaults(t *testing.T) {
	nm := nodeMaintenance("defaults", "worker-1")
	if err := env.Client.Create(t.Context(), nm); err != nil {
		t.Fatal(err)
	}
	d := nm.Spec.Drain
	if d.UnmanagedPods != pitstopv1alpha1.UnmanagedPodsBlock || d.OnTimeout != pitstopv1alpha1.DrainTimeoutFail {
		t.Errorf("defaults: unmanagedPods=%q onTimeout=%q, want Block and Fail", d.UnmanagedPods, d.OnTimeout)
	}
	if d.Timeout != nil || d.GracePeriodSeconds != nil {
		t.Errorf("timeout and grace period must default to unset, got %v and %v", d.Timeout, d.GracePeriodSeconds)
	}
	if d.PodEvictionRetryInterval == nil || d.PodEvictionRetryInterval.Duration.String() != "5s" {
		t.Errorf("podEvictionRetryInterval = %v, want 5s", d.PodEvictionRetryInterval)
	}
}

// TestNodeMaintenanceRefusals checks that the API server refuses bad objects
// with a message naming the field.
func TestNodeMaintenanceRefusals(t *testing.T) {
	t.Run("nodeName is immutable", func(t *testing.T) {
		nm := nodeMaintenance("immutable", "worker-1")
		if err := env.Client.Create(t.Context(), nm); err != nil {
			t.Fatal(err)
		}
		nm.Spec.NodeName = "worker-2"
		err := env.Client.Update(t.Context(), nm)
		if err == nil || !strings.Contains(err.Error(), "spec.nodeName is immutable") {
			t.Fatalf("changing spec.nodeName: got %v, want a refusal naming spec.nodeName", err)
		}
	})
	for _, tc := range []struct {
		name  string
		edit  func(*pitstopv1alpha1.NodeMaintenance)
		field string
	}{
		{"empty nodeName", func(nm *pitstopv1alpha1.NodeMaintenance) { nm.Spec.NodeName = "" }, "spec.nodeName"},
		{"unknown unmanagedPods policy", func(nm *pitstopv1alpha1.NodeMaintenance) { nm.Spec.Drain.UnmanagedPods = "Ignore" }, "spec.drain.unmanagedPods"},
		{"unknown onTimeout policy", func(nm *pitstopv1alpha1.NodeMaintenance) { nm.Spec.Drain.OnTimeout = "Retry" }, "spec.drain.onTimeout"},
		{"negative grace period", func(nm *pitstopv1alpha1.NodeMaintenance) { nm.Spec.Drain.GracePeriodSeconds = new(int64(-1)) }, "spec.drain.gracePeriodSeconds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nm := nodeMaintenance(strings.ReplaceAll(tc.name, " ", "-"), "worker-1")
			nm.Name = strings.ToLower(nm.Name)
			tc.edit(nm)
			err := env.Client.Create(t.Context(), nm)
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("got %v, want a refusal naming %s", err, tc.field)
			}
		})
	}
}
