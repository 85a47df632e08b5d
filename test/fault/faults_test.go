//go:build fault && linux

package fault

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/localcluster"
	"github.com/pitstop-dev/pitstop/internal/manager"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// pick is the value for the campaign's form (-form): brief, short or long.
func pick[T any](brief, short, long T) T {
	switch *form {
	case "long":
		return long
	case "short":
		return short
	}
	return brief
}

// runTimeout bounds a rolling run after its fault.
func runTimeout() time.Duration { return pick(5*time.Minute, 5*time.Minute, 10*time.Minute) }

// TestFaultEtcdRestarted kills etcd and starts it again 3 s later (20 s in
// the long form).
func TestFaultEtcdRestarted(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	r.maintainAll()
	moment := r.awaitOutageMoment(false)
	t.Logf("killing etcd while %s", moment)
	if err := cluster.KillComponent("etcd"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(pick(3*time.Second, 3*time.Second, 20*time.Second))
	if err := cluster.StartComponent(ctx, "etcd"); err != nil {
		t.Fatal(err)
	}
	r.finish(runTimeout())
}

// TestFaultLeaderKilled kills the leader with SIGKILL at random moments
// while nodes drain, restore and are notified (3 kills; 20 in the long
// form); the standby takes over each time and the killed process starts
// again as its pod would.
func TestFaultLeaderKilled(t *testing.T) {
	r := newRig(t)
	r.maintainAll()
	kills := pick(1, 3, 20)
	midway := 0
	for i := range kills {
		leader := r.awaitLeader()
		if *form == "brief" {
			// Between drains: see awaitOutageMoment.
			r.awaitOutageMoment(false)
		} else {
			randomMoment(500*time.Millisecond, pick(3*time.Second, 3*time.Second, 4*time.Second))
		}
		if through := r.watch.through(); through < len(workerNames()) {
			midway++
		}
		t.Logf("kill %d: SIGKILL %s with %d of %d nodes through", i+1, leader.name, r.watch.through(), len(workerNames()))
		leader.kill()
		if err := r.watch.violation(); err != nil {
			t.Fatal(err)
		}
	}
	if midway < kills/2 {
		t.Errorf("only %d of %d kills came while nodes were still to go: the test proves little", midway, kills)
	}
	r.finish(runTimeout())
}

// TestFaultLeaderPartitioned cuts the leader off from the API server for
// 15 s (60 s in the long form) through its proxy: it must stop acting once
// its lease is gone, while the standby takes over; then the partition
// heals, with whatever the old leader had sent held back delivered late.
func TestFaultLeaderPartitioned(t *testing.T) {
	r := newRig(t)
	r.maintainAll()
	r.awaitDraining()
	leader := r.awaitLeader()
	outage := pick(10*time.Second, 15*time.Second, 60*time.Second)
	t.Logf("cutting %s off from the API server for %s", leader.name, outage)
	cut := time.Now()
	leader.proxy.Blackhole(true)
	testutil.Eventually(t, outage, 200*time.Millisecond, func() error {
		if l := r.leader(); l == nil || l == leader {
			return fmt.Errorf("the standby has not taken over")
		}
		return nil
	})
	t.Logf("the standby took over %s after the cut", time.Since(cut).Round(100*time.Millisecond))
	time.Sleep(time.Until(cut.Add(outage)))
	leader.proxy.Blackhole(false)
	r.finish(runTimeout())
}

// TestFaultSlowAPIServer adds 500 ms (250 ms in the brief form) to every request of both processes
// for a whole rolling run.
func TestFaultSlowAPIServer(t *testing.T) {
	r := newRig(t)
	for _, p := range r.managers {
		p.proxy.SetDelay(pick(250*time.Millisecond, 500*time.Millisecond, 500*time.Millisecond))
	}
	r.maintainAll()
	r.finish(pick(5*time.Minute, 5*time.Minute, 15*time.Minute))
}

// aheadClock is the system's clock, ahead by a fixed offset.
type aheadClock struct{ by time.Duration }

func (c aheadClock) Now() time.Time                  { return time.Now().Add(c.by) }
func (c aheadClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// TestFaultClockAhead: a drain blocked by a PodDisruptionBudget, with a
// timeout and onTimeout ForceDelete, is taken over by a manager whose
// clock is 2 minutes ahead. It must not force-delete early: the time it
// spent draining counts, not the distance between its clock and the
// drain's start. The short form has a 20 s timeout; the long one 3 min.
func TestFaultClockAhead(t *testing.T) {
	ctx := context.Background()
	timeout := pick(15*time.Second, 20*time.Second, 3*time.Minute)
	node := workerNames()[0]
	const ns = "clock-ahead"
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	held := localcluster.Deployment(ns, "held", 1)
	held.Spec.Template.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
	pdb := localcluster.PDB(ns, "held", nil, ptr.To(intstr.FromInt32(1)))
	if err := admin.Create(ctx, held); err != nil {
		t.Fatal(err)
	}
	if err := admin.Create(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, time.Minute, 200*time.Millisecond, func() error {
		got := &policyv1.PodDisruptionBudget{}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(pdb), got); err != nil {
			return err
		}
		if got.Status.CurrentHealthy != 1 {
			return fmt.Errorf("the held pod is not running yet")
		}
		return nil
	})
	nm := &pitstopv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: "clock-ahead"},
		Spec: pitstopv1alpha1.NodeMaintenanceSpec{NodeName: node, Reason: "clock test", Drain: pitstopv1alpha1.DrainSpec{
			Timeout: &pitstopv1alpha1.Duration{Duration: timeout}, OnTimeout: pitstopv1alpha1.DrainTimeoutForceDelete,
			UnmanagedPods: pitstopv1alpha1.UnmanagedPodsDelete,
		}},
	}
	if err := admin.Create(ctx, nm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.Delete(context.Background(), nm)
		_ = admin.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		// The in-process managers' leader election Lease, which the tests
		// after this one must not find left behind.
		_ = admin.Delete(context.Background(), &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: clockLeaderID}})
	})

	drainFrom := time.Now() // the drain cannot start before its first manager
	first := startInProcess(t, "first", 0)
	testutil.Eventually(t, time.Minute, 200*time.Millisecond, func() error {
		got := &pitstopv1alpha1.NodeMaintenance{}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(nm), got); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(got.Status.Conditions, pitstopv1alpha1.ConditionDrained); c == nil || c.Reason != pitstopv1alpha1.ReasonBlockedByPodDisruptionBudget {
			return fmt.Errorf("drain not blocked yet: %+v", c)
		}
		return nil
	})
	ran := timeout / 4
	time.Sleep(ran)
	first()
	startInProcess(t, "ahead", 2*time.Minute)
	tookOver := time.Now()
	for time.Since(tookOver) < timeout-ran-5*time.Second {
		got := &pitstopv1alpha1.NodeMaintenance{}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(nm), got); err != nil {
			t.Fatal(err)
		}
		if c := meta.FindStatusCondition(got.Status.Conditions, pitstopv1alpha1.ConditionDrained); got.Status.ForceDeletedPods > 0 || (c != nil && c.Reason != pitstopv1alpha1.ReasonBlockedByPodDisruptionBudget) {
			t.Fatalf("%s after a manager whose clock is 2 minutes ahead took over, with %s of the %s timeout left, the drain is %+v (%d pods force-deleted)",
				time.Since(tookOver).Round(time.Second), timeout-ran-time.Since(tookOver), timeout, c, got.Status.ForceDeletedPods)
		}
		time.Sleep(500 * time.Millisecond)
	}
	testutil.Eventually(t, 30*time.Second, 500*time.Millisecond, func() error {
		got := &pitstopv1alpha1.NodeMaintenance{}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(nm), got); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(got.Status.Conditions, pitstopv1alpha1.ConditionDrained) {
			return fmt.Errorf("not force-drained yet once the timeout passed: %+v", got.Status.Conditions)
		}
		return nil
	})
	t.Logf("force-deleted %s after the take-over, the timeout being %s with %s run before it", time.Since(tookOver).Round(time.Second), timeout, ran)
	// The API server's audit log: the manager ahead deleted the held pod,
	// and not before the drain had waited its timeout.
	removals, err := cluster.PodRemovals(drainFrom)
	if err != nil {
		t.Fatal(err)
	}
	deleted := 0
	for _, r := range removals {
		if r.UserAgent != inProcessAgent("ahead") || r.Eviction {
			continue
		}
		deleted++
		if waited := r.At.Sub(drainFrom); waited < timeout {
			t.Errorf("pod %s/%s deleted %s after the drain could start, before its %s timeout", r.Namespace, r.Pod, waited.Round(time.Millisecond), timeout)
		}
	}
	if deleted == 0 {
		t.Errorf("the audit log shows no pod deleted by the manager ahead, want the held pod")
	}
	onlyEvictions(t, drainFrom, inProcessAgent("first"))
}

// clockLeaderID names the leader election Lease of TestFaultClockAhead's
// managers.
const clockLeaderID = "pitstop-clock"

// inProcessAgent is the user agent of startInProcess's manager name.
func inProcessAgent(name string) string { return "pitstop-fault-" + name }

// startInProcess runs a manager in this process, with leader election,
// its NodeMaintenance controller's clock ahead by ahead; stop stops it.
func startInProcess(t *testing.T, name string, ahead time.Duration) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	opts := manager.DefaultOptions()
	opts.MetricsAddr, opts.HealthAddr, opts.DashboardAddr = "0", "0", "0"
	opts.Webhook.Port = 0
	opts.LeaderElection = true
	opts.LeaderElectionNamespace, opts.LeaderElectionID = namespace, clockLeaderID
	opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = 4*time.Second, 3*time.Second, 500*time.Millisecond
	opts.Clock = aheadClock{by: ahead}
	cfg := rest.CopyConfig(cluster.Config)
	cfg.UserAgent = inProcessAgent(name)
	mgr, err := manager.New(ctx, cfg, opts, logr.Discard())
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once bool
	stop = func() {
		if once {
			return
		}
		once = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager %s: %v", name, err)
		}
	}
	t.Cleanup(stop)
	select {
	case <-mgr.Elected():
	case <-time.After(time.Minute):
		t.Fatalf("manager %s did not lead within a minute", name)
	}
	return stop
}

// TestFaultAPIServerDown stops the API server for 8 s (15 s in the short
// form, 60 s in the long one), then starts it again: pitstop carries on
// where it was. Stopped even between drains, the API server leaves the
// controller manager and the scheduler recovering, with pods not placed and
// budgets not updated, for up to two minutes; so the brief form stops it
// only once the last drains are done; a test after it waits until the
// workloads have settled.
func TestFaultAPIServerDown(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	r.maintainAll()
	moment := r.awaitOutageMoment(true)
	outage := pick(8*time.Second, 15*time.Second, 60*time.Second)
	t.Logf("stopping the API server for %s while %s", outage, moment)
	if err := cluster.StopComponent("kube-apiserver"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(outage)
	if err := cluster.StartComponent(ctx, "kube-apiserver"); err != nil {
		t.Fatal(err)
	}
	t.Logf("the API server is back at %s", time.Now().Format("15:04:05.000"))
	r.finish(runTimeout())
}
