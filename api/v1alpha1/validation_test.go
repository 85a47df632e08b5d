package v1alpha1_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

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

// TestDurationsAreCheckedByTheAPIServer sends durations as a person types
// them: the API server itself refuses one that does not parse or is out of
// bounds, naming the field, so no such object reaches pitstop's cache.
func TestDurationsAreCheckedByTheAPIServer(t *testing.T) {
	nm := func(drain map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "pitstop.dev/v1alpha1", "kind": "NodeMaintenance",
			"metadata": map[string]any{"generateName": "durations-"},
			"spec":     map[string]any{"nodeName": "worker-1", "drain": drain},
		}}
	}
	profile := func(spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "pitstop.dev/v1alpha1", "kind": "MaintenanceProfile",
			"metadata": map[string]any{"generateName": "durations-"},
			"spec":     spec,
		}}
	}
	check := func(c map[string]any) map[string]any {
		return map[string]any{"checks": []any{c}}
	}
	notification := func(n map[string]any) map[string]any {
		n["name"] = "n"
		return map[string]any{"notifications": []any{n}}
	}
	hook := map[string]any{"url": map[string]any{"name": "s", "key": "k"}, "message": "m"}
	for _, tc := range []struct {
		name string
		obj  *unstructured.Unstructured
		want string // "" when accepted
	}{
		{"a drain timeout in words", nm(map[string]any{"timeout": "1 hour"}), "spec.drain.timeout"},
		{"a zero drain timeout", nm(map[string]any{"timeout": "0s"}), `spec.drain.timeout: Invalid value: "0s": must be at least 1s`},
		{"a retry interval of a millisecond", nm(map[string]any{"podEvictionRetryInterval": "1ms"}), "spec.drain.podEvictionRetryInterval"},
		{"a retry interval of a day", nm(map[string]any{"podEvictionRetryInterval": "24h"}), "must be from 1s to 1h"},
		{"a zero grace period", nm(map[string]any{"gracePeriodSeconds": int64(0)}), "spec.drain.gracePeriodSeconds"},
		{"a negative timeout", nm(map[string]any{"timeout": "-5m"}), "spec.drain.timeout"},
		{"a timeout of 1h30m", nm(map[string]any{"timeout": "1h30m", "podEvictionRetryInterval": "2.5s", "gracePeriodSeconds": int64(1)}), ""},
		{"a wait that is not a duration", profile(check(map[string]any{"name": "w", "wait": map[string]any{"duration": "soon"}})), "spec.checks[0].wait.duration"},
		{"a stagger of no time", profile(check(map[string]any{"name": "s", "stagger": map[string]any{"duration": "0s"}})), "spec.checks[0].stagger.duration"},
		{"a periodic notification every millisecond", profile(notification(map[string]any{"webhook": hook, "schedule": map[string]any{"periodic": map[string]any{"interval": "1ms"}}})), "spec.notifications[0].schedule.periodic.interval"},
		{"a zero wait", profile(check(map[string]any{"name": "w", "wait": map[string]any{"duration": "0s"}})), ""},
		{"a recheck of half a second", profile(map[string]any{"recheck": "500ms"}), `spec.recheck: Invalid value: "500ms": must be at least 1s`},
		{"a recheck in words", profile(map[string]any{"recheck": "often"}), "spec.recheck"},
		{"a recheck of 15s", profile(map[string]any{"recheck": "15s"}), ""},
		{"a maxMaintenance counting another profile without profileScoped", profile(check(map[string]any{"name": "m", "maxMaintenance": map[string]any{"max": int64(1), "profile": "other"}})), "profile counts one profile's nodes: set profileScoped too"},
		{"a maxMaintenance counting another profile", profile(check(map[string]any{"name": "m", "maxMaintenance": map[string]any{"max": int64(1), "profile": "other", "profileScoped": true}})), ""},
		{"a prometheusInstant expr", profile(check(map[string]any{"name": "p", "prometheusInstant": map[string]any{"url": "http://p:9090", "query": "up", "expr": "value >= 1 && value < 5"}})), ""},
		{"a prometheusInstant expr beside an operator", profile(check(map[string]any{"name": "p", "prometheusInstant": map[string]any{"url": "http://p:9090", "query": "up", "expr": "value > 1", "operator": ">", "threshold": "1"}})), "set either expr, or operator and threshold"},
		{"a prometheusInstant with neither", profile(check(map[string]any{"name": "p", "prometheusInstant": map[string]any{"url": "http://p:9090", "query": "up"}})), "set either expr, or operator and threshold"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := env.Client.Create(t.Context(), tc.obj)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("got %v, want it accepted", err)
				}
				_ = env.Client.Delete(t.Context(), tc.obj)
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				_ = env.Client.Delete(t.Context(), tc.obj)
				t.Fatalf("got %v, want a refusal containing %q", err, tc.want)
			}
		})
	}
}
