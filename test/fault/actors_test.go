//go:build fault && linux

package fault

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/localcluster"
)

// cordon cordons node as an administrator would (kubectl cordon), and
// has the watcher and finish hold pitstop to leaving it cordoned.
func (r *rig) cordon(node string) {
	r.t.Helper()
	patch := []byte(`{"spec":{"unschedulable":true}}`)
	if err := admin.Patch(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
		r.t.Fatal(err)
	}
	r.cordonedByAdmin = append(r.cordonedByAdmin, node)
	r.watch.keepCordoned(node)
}

// TestFaultSomeoneElsesCordon: an administrator cordons a worker before
// pitstop takes it, and another while a drain evicts (a worker pitstop has
// yet to take). Both go through maintenance and must stay cordoned
// throughout and at the end (invariant 3). The profile takes one worker
// at a time: with two cordoned by the administrator and two draining, the
// four workers would leave the evicted pods nowhere to go. In the short and long forms the
// leader is then SIGKILLed mid-eviction, so a manager that did not cordon
// them restores them (the ci form leaves that out: a kill that cuts an
// eviction off pauses the run for two minutes, see docs/safety.md).
func TestFaultSomeoneElsesCordon(t *testing.T) {
	r := newRigWith(t, rigOptions{
		profiles: []*pitstopv1alpha1.MaintenanceProfile{profileFor(profile, map[string]string{localcluster.LabelWorker: ""}, pitstopv1alpha1.MaxMaintenanceCheck{Max: 1})},
		bounds:   []bound{{name: "profile " + profile, selects: isWorker, max: 1}},
	})
	nodes := r.opts.nodes
	r.cordon(nodes[len(nodes)-1])
	r.maintainAll()
	moment := r.awaitMidEviction()
	next := ""
	for deadline := time.Now().Add(time.Minute); next == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		next = r.watch.waiting(r.cordonedByAdmin)
	}
	if next == "" {
		t.Fatalf("no worker left that pitstop has yet to take: %s", r.describe())
	}
	t.Logf("cordoning %s, which pitstop has yet to take, while %s", next, moment)
	r.cordon(next)
	if *form == "short" || *form == "long" {
		leader := r.awaitLeader()
		t.Logf("SIGKILL %s while %s", leader.name, r.awaitMidEviction())
		leader.kill()
	}
	r.finish(runTimeout())
}

// TestFaultCoActorUncordons runs, beside pitstop, a careless script that
// uncordons every node it finds cordoned with pitstop's drain taint (as
// `kubectl uncordon` in a loop, or another controller, would) for 20 s (30
// s in the short form, 2 min in the long one). pitstop cordons again; no
// more than the budget is ever under maintenance, pods leave only through
// the Eviction API, and every node is maintained once.
func TestFaultCoActorUncordons(t *testing.T) {
	r := newRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), strike(20*time.Second, 30*time.Second, 2*time.Minute))
	defer cancel()
	var uncordons atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			uncordons.Add(int32(uncordonPitstops(ctx)))
			time.Sleep(50 * time.Millisecond)
		}
	}()
	r.maintainAll()
	<-done
	t.Logf("the co-actor uncordoned a node pitstop had cordoned %d times", uncordons.Load())
	if uncordons.Load() == 0 {
		t.Errorf("the co-actor never uncordoned a node pitstop had cordoned: the test proves nothing")
	}
	r.finish(runTimeout())
}

// uncordonPitstops uncordons every node that carries pitstop's drain taint
// and is unschedulable, and says how many it did.
func uncordonPitstops(ctx context.Context) int {
	nodes := &corev1.NodeList{}
	if err := admin.List(ctx, nodes); err != nil {
		return 0
	}
	n := 0
	for i := range nodes.Items {
		node := &nodes.Items[i]
		if !node.Spec.Unschedulable || !hasDrainTaint(node) {
			continue
		}
		patch := []byte(fmt.Sprintf(`{"metadata":{"resourceVersion":%q},"spec":{"unschedulable":false}}`, node.ResourceVersion))
		if err := admin.Patch(ctx, node, client.RawPatch(types.MergePatchType, patch)); err == nil {
			n++
		}
	}
	return n
}

func hasDrainTaint(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == pitstopv1alpha1.TaintDrain {
			return true
		}
	}
	return false
}
