//go:build fault && linux

package fault

import (
	"context"
	"testing"
	"time"
)

// strike is the value for the campaign's form where a strike lands in the
// middle of an eviction: ci (make test's; the brief form runs these too),
// short or long.
func strike[T any](ci, short, long T) T {
	switch *form {
	case "long":
		return long
	case "short":
		return short
	}
	return ci
}

// TestFaultMidEviction strikes while a drain has evicted pods and has more
// to evict, one strike after the other in one rolling run: the leader
// SIGKILLed (once; 3 times in the short form, 10 in the long one), then
// etcd killed and started again 3 s later (20 s in the long form), then
// the API server stopped for 5 s (15 s in the short form, 60 s in the long
// one) and started again. Each cuts off the eviction requests in flight,
// some after their PodDisruptionBudget counted the pod and before the pod
// was deleted; the standby takes the drains over from their
// NodeMaintenances' status. The budget and the tight PodDisruptionBudgets
// (one disruption, no slack) must hold throughout, and no pod may be
// deleted instead of evicted. In the ci and brief forms the strikes follow
// each other at once, so that the pauses they cause (up to two minutes,
// docs/safety.md) run together; in the short and long forms each waits a
// random while (0.5-3 s) first.
func TestFaultMidEviction(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	r.maintainAll()
	settle := func() {
		if *form == "short" || *form == "long" {
			randomMoment(500*time.Millisecond, 3*time.Second)
		}
	}
	for i := range strike(1, 3, 10) {
		leader := r.awaitLeader()
		settle()
		moment := r.awaitMidEviction()
		t.Logf("kill %d: SIGKILL %s while %s", i+1, leader.name, moment)
		leader.kill()
	}
	r.awaitLeader()
	settle()
	moment := r.awaitMidEviction()
	t.Logf("killing etcd while %s", moment)
	if err := cluster.KillComponent("etcd"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(strike(3*time.Second, 3*time.Second, 20*time.Second))
	if err := cluster.StartComponent(ctx, "etcd"); err != nil {
		t.Fatal(err)
	}
	r.awaitLeader()
	settle()
	moment = r.awaitMidEviction()
	outage := strike(5*time.Second, 15*time.Second, 60*time.Second)
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
