//go:build fault && linux

package fault

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/localcluster"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// halfLabel splits the workers between the two profiles of
// TestFaultZoneBudgetsRace.
const halfLabel = "fault.example.com/half"

// TestFaultZoneBudgetsRace: two profiles, each with a budget of one node
// per zone that counts every node in maintenance (not only its own), share
// the zones: the even workers are one's, the odd ones the other's, so in a
// zone with workers of both (worker-000 and worker-003 in zone-a; every
// zone in the long form) the two budgets race for the zone's one place,
// from the moment every worker is asked for at once. The watcher holds
// the workers to one under maintenance per zone; the leader is SIGKILLed
// once mid-eviction, so a handover lands in the race too.
func TestFaultZoneBudgetsRace(t *testing.T) {
	ctx := context.Background()
	var profiles []*pitstopv1alpha1.MaintenanceProfile
	for i, n := range workerNames() {
		half := []string{"even", "odd"}[i%2]
		patch := []byte(`{"metadata":{"labels":{"` + halfLabel + `":"` + half + `"}}}`)
		if err := admin.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
			t.Fatal(err)
		}
	}
	for _, half := range []string{"even", "odd"} {
		profiles = append(profiles, profileFor("zone-"+half, map[string]string{localcluster.LabelWorker: "", halfLabel: half},
			pitstopv1alpha1.MaxMaintenanceCheck{Max: 1, GroupBy: localcluster.LabelZone}))
	}
	r := newRigWith(t, rigOptions{profiles: profiles, bounds: []bound{{
		name: "the zone budgets of profiles zone-even and zone-odd", selects: isWorker, groupBy: localcluster.LabelZone, max: 1,
	}}})
	r.maintainAll()
	leader := r.awaitLeader()
	t.Logf("SIGKILL %s while %s", leader.name, r.awaitMidEviction())
	leader.kill()
	r.finish(runTimeout())
}

// controlPlaneNames are the control-plane nodes.
func controlPlaneNames() []string {
	var out []string
	for _, n := range cluster.NodeNames() {
		if strings.HasPrefix(n, "control-plane-") {
			out = append(out, n)
		}
	}
	return out
}

// TestFaultControlPlaneQuorumUnderPartition maintains the three
// control-plane nodes with a profile whose budget (2) would let two in at
// once: only pitstop's quorum guard (and its webhook, which refuses a
// NodeMaintenance that would break quorum) keeps the second out while the
// first is down. While a control-plane node is being drained, the leader
// is cut off from the API server for 10 s (15 s in the short form, 60 s in
// the long one): the standby takes over with the old leader's cordon and
// its turn Lease standing, and the old leader's writes arrive late. The
// watcher fails at the first moment a control-plane node carries pitstop's
// drain taint while fewer than two of three are Ready and untainted
// (invariant 4).
func TestFaultControlPlaneQuorumUnderPartition(t *testing.T) {
	ctx := context.Background()
	const name = "control-plane"
	r := newRigWith(t, rigOptions{
		nodes:    controlPlaneNames(),
		profiles: []*pitstopv1alpha1.MaintenanceProfile{profileFor(name, map[string]string{localcluster.LabelControlPlane: ""}, pitstopv1alpha1.MaxMaintenanceCheck{Max: 2})},
		bounds:   []bound{{name: "profile " + name, selects: isControlPlane, max: 2}},
	})
	r.maintainAll()
	var draining string
	testutil.Eventually(t, 2*time.Minute, 20*time.Millisecond, func() error {
		if err := r.watch.violation(); err != nil {
			t.Fatal(err)
		}
		list := &pitstopv1alpha1.NodeMaintenanceList{}
		if err := admin.List(ctx, list); err != nil {
			return err
		}
		for _, nm := range list.Items {
			if strings.HasPrefix(nm.Spec.NodeName, "control-plane-") &&
				meta.IsStatusConditionTrue(nm.Status.Conditions, pitstopv1alpha1.ConditionCordoned) &&
				!meta.IsStatusConditionTrue(nm.Status.Conditions, pitstopv1alpha1.ConditionDrained) {
				draining = nm.Spec.NodeName
				return nil
			}
		}
		return fmt.Errorf("no control-plane node being drained yet: %s", r.describe())
	})
	leader := r.awaitLeader()
	outage := strike(10*time.Second, 15*time.Second, 60*time.Second)
	t.Logf("cutting %s off from the API server for %s while %s is being drained", leader.name, outage, draining)
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
