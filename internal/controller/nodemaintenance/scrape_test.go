package nodemaintenance_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/controller/nodemaintenance"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

const (
	overdueGauge = "pitstop_node_maintenance_overdue"
	oldestGauge  = "pitstop_node_maintenance_oldest_running_seconds"
)

// TestDrainGaugesAreReadFromTheObjectsAtScrapeTime: the manager serves
// the drain gauges. Computed from the NodeMaintenances when scraped, they
// count the drains past their timeout and give the age of the oldest
// maintenance whose node is not drained, leaving out those drained and
// those being deleted, and they move with the clock alone.
func TestDrainGaugesAreReadFromTheObjectsAtScrapeTime(t *testing.T) {
	// The manager registers the gauges. Started without its webhook, it
	// also removes the webhook configuration an earlier test's manager
	// left, which would refuse these objects (their nodes do not exist);
	// stopped, it changes nothing below.
	m := startManager(t, false)
	served := testutil.GaugeSeries(t, metrics.Registry)
	for _, name := range []string{overdueGauge, oldestGauge, "pitstop_eviction_queue_pods", "pitstop_evictions_in_flight"} {
		if _, ok := served[name]; !ok {
			t.Errorf("the manager does not serve %s", name)
		}
	}
	m.Stop()

	t0 := time.Now().Truncate(time.Second) // status times are kept to the second
	type state struct {
		name    string
		started time.Duration // before t0
		timeout time.Duration // 0: none
		drained bool
		reason  string
		delete  bool
	}
	for _, s := range []state{
		{name: "gauges-overdue", started: 10 * time.Minute, timeout: 5 * time.Minute, reason: pitstopv1alpha1.ReasonBlockedByPodDisruptionBudget},
		{name: "gauges-timed-out", started: 20 * time.Minute, timeout: time.Minute, reason: pitstopv1alpha1.ReasonDrainTimedOut},
		{name: "gauges-within", started: 2 * time.Minute, timeout: 5 * time.Minute, reason: pitstopv1alpha1.ReasonDraining},
		{name: "gauges-no-timeout", started: time.Hour, reason: pitstopv1alpha1.ReasonDraining},
		{name: "gauges-drained", started: 3 * time.Hour, timeout: time.Minute, drained: true, reason: pitstopv1alpha1.ReasonDrained},
		{name: "gauges-deleting", started: 2 * time.Hour, timeout: time.Minute, reason: pitstopv1alpha1.ReasonDraining, delete: true},
	} {
		nm := nodeMaintenance(s.name, s.name+"-node", func(nm *pitstopv1alpha1.NodeMaintenance) {
			nm.Labels = map[string]string{"test": "drain-gauges"}
			nm.Finalizers = []string{"test.pitstop.dev/hold"}
			if s.timeout > 0 {
				nm.Spec.Drain.Timeout = &pitstopv1alpha1.Duration{Duration: s.timeout}
			}
		})
		create(t, nm)
		t.Cleanup(func() { release(nm) })
		nm.Status.StartTime = &metav1.Time{Time: t0.Add(-s.started)}
		nm.Status.DrainWaited = &metav1.Duration{Duration: s.started}
		status := metav1.ConditionFalse
		if s.drained {
			status = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&nm.Status.Conditions, metav1.Condition{Type: pitstopv1alpha1.ConditionDrained, Status: status, Reason: s.reason, Message: "set by the test"})
		if err := env.Client.Status().Update(t.Context(), nm); err != nil {
			t.Fatal(err)
		}
		if s.delete {
			if err := env.Client.Delete(t.Context(), nm); err != nil {
				t.Fatal(err)
			}
		}
	}

	clk := clocktesting.NewFakePassiveClock(t0)
	c := nodemaintenance.NewMaintenancesCollector(onlyLabelled{env.Client, client.MatchingLabels{"test": "drain-gauges"}}, clk)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	for _, tc := range []struct {
		at      time.Time
		waited  time.Duration // gauges-within's, as its drain records it
		overdue float64
		oldest  float64
	}{
		// gauges-overdue and gauges-timed-out are past their timeout; the
		// oldest not drained is gauges-no-timeout, started an hour ago.
		{t0, 2 * time.Minute, 2, 3600},
		// Four minutes on, gauges-within's drain says it has waited past
		// its timeout too.
		{t0.Add(4 * time.Minute), 6 * time.Minute, 3, 3840},
	} {
		within := &pitstopv1alpha1.NodeMaintenance{}
		if err := env.Client.Get(t.Context(), client.ObjectKey{Name: "gauges-within"}, within); err != nil {
			t.Fatal(err)
		}
		within.Status.DrainWaited = &metav1.Duration{Duration: tc.waited}
		if err := env.Client.Status().Update(t.Context(), within); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, 5*time.Second, 20*time.Millisecond, func() error {
			seen := &pitstopv1alpha1.NodeMaintenance{}
			if err := env.Client.Get(t.Context(), client.ObjectKey{Name: "gauges-within"}, seen); err != nil {
				return err
			}
			if recorded := seen.Status.DrainWaited; recorded == nil || recorded.Duration != tc.waited {
				return fmt.Errorf("the cache shows drainWaited %v", recorded)
			}
			return nil
		})
		clk.SetTime(tc.at)
		got := testutil.GaugeSeries(t, reg)
		if got[overdueGauge] != tc.overdue || got[oldestGauge] != tc.oldest {
			t.Errorf("at t0+%s: %s = %v, %s = %v; want %v and %v", tc.at.Sub(t0), overdueGauge, got[overdueGauge], oldestGauge, got[oldestGauge], tc.overdue, tc.oldest)
		}
	}
}

// onlyLabelled lists only the objects with the labels: the API server
// holds the NodeMaintenances of the package's other tests too.
type onlyLabelled struct {
	client.Reader
	labels client.MatchingLabels
}

func (r onlyLabelled) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return r.Reader.List(ctx, list, append(opts, r.labels)...)
}

// release removes the test's finalizer and deletes the NodeMaintenance.
func release(nm *pitstopv1alpha1.NodeMaintenance) {
	ctx := context.Background()
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`))
	_ = env.Client.Patch(ctx, nm, patch)
	_ = client.IgnoreNotFound(env.Client.Delete(ctx, nm))
}
