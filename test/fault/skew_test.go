//go:build fault && linux

package fault

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/engine"
	"github.com/pitstop-dev/pitstop/internal/localcluster"
)

// skewProfile is TestFaultSkewedSlotClocks' profile: a worker that carries
// the annotation enters maintenance when the stagger lets it (one node
// per pace), stays 2 s and leaves, its annotation cleared.
func skewProfile(pace time.Duration) *pitstopv1alpha1.MaintenanceProfile {
	return &pitstopv1alpha1.MaintenanceProfile{
		ObjectMeta: metav1.ObjectMeta{Name: "skew"},
		Spec: pitstopv1alpha1.MaintenanceProfileSpec{
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{localcluster.LabelWorker: ""}},
			Checks: []pitstopv1alpha1.CheckInstance{
				{Name: "wanted", HasAnnotation: &pitstopv1alpha1.KeyValueCheck{Key: annotation}},
				{Name: "pace", Stagger: &pitstopv1alpha1.StaggerCheck{Duration: pitstopv1alpha1.Duration{Duration: pace}, Parallel: 1}},
				{Name: "done", Wait: &pitstopv1alpha1.WaitCheck{Duration: pitstopv1alpha1.Duration{Duration: 2 * time.Second}}},
			},
			Triggers: []pitstopv1alpha1.TriggerInstance{
				{Name: "clear", AlterAnnotation: &pitstopv1alpha1.AlterTrigger{Key: annotation, Remove: true}},
			},
			States: pitstopv1alpha1.StatesSpec{
				Operational: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{
					{Check: "wanted", Next: pitstopv1alpha1.StateMaintenanceRequired},
				}},
				MaintenanceRequired: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{
					{Check: "pace", Next: pitstopv1alpha1.StateInMaintenance},
				}},
				InMaintenance: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{
					{Check: "done", Triggers: []string{"clear"}, Next: pitstopv1alpha1.StateOperational},
				}},
			},
		},
	}
}

// entries follows, on this test's clock, when each node is first seen in
// maintenance for a profile and when it is first seen out of it again.
type entries struct {
	mu      sync.Mutex
	entered map[string]time.Time
	left    map[string]time.Time
}

// follow polls the nodes' records every 100 ms until ctx ends.
func (e *entries) follow(ctx context.Context, profile string) {
	for ctx.Err() == nil {
		nodes := &corev1.NodeList{}
		if err := admin.List(ctx, nodes); err == nil {
			now := time.Now()
			e.mu.Lock()
			for i := range nodes.Items {
				n := &nodes.Items[i]
				rec, err := engine.ReadRecord(n)
				if err != nil {
					continue
				}
				in := rec.Profiles[profile].Current == pitstopv1alpha1.StateInMaintenance
				switch {
				case in && e.entered[n.Name].IsZero():
					e.entered[n.Name] = now
				case !in && !e.entered[n.Name].IsZero() && e.left[n.Name].IsZero():
					e.left[n.Name] = now
				}
			}
			e.mu.Unlock()
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestFaultSkewedSlotClocks strikes the budget slots with skewed clocks.
// A stagger lets one worker into maintenance per pace (20 s; 2 min in the
// long form). Three workers ask for it, and the managers that let them in
// take over from each other, each as soon as the node before is out of
// maintenance again, so that only the stagger's slot Lease holds the next
// one back:
//   - the first manager's clock is right; it lets the first worker in;
//   - the second's is 10 minutes ahead: the slot's acquireTime, written on
//     the first one's clock, looks 10 minutes old to it, far past the pace.
//     It must still let the second worker in only a pace after the first
//     (invariant 1: it judges the slot by how long it has seen it
//     unchanged, not by another replica's timestamps);
//   - the third's is 10 minutes behind: the slot the second manager took
//     looks taken 20 minutes in the future. It must not wait for its clock
//     to catch up: the third worker enters a pace after the take-over,
//     give or take the take-over's own seconds.
func TestFaultSkewedSlotClocks(t *testing.T) {
	ctx := context.Background()
	pace := strike(20*time.Second, 30*time.Second, 2*time.Minute)
	const skew = 10 * time.Minute
	nodes := workerNames()[:3]
	p := skewProfile(pace)
	if err := admin.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	followCtx, stopFollowing := context.WithCancel(ctx)
	e := &entries{entered: map[string]time.Time{}, left: map[string]time.Time{}}
	go e.follow(followCtx, p.Name)
	t.Cleanup(func() {
		stopFollowing()
		bg := context.Background()
		got := &pitstopv1alpha1.MaintenanceProfile{}
		if err := admin.Get(bg, client.ObjectKeyFromObject(p), got); err == nil {
			got.Finalizers = nil
			_ = admin.Update(bg, got)
			_ = admin.Delete(bg, got)
		}
		for _, n := range nodes {
			patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:null}}}`, annotation)
			_ = admin.Patch(bg, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, client.RawPatch(types.MergePatchType, patch))
		}
		// The stagger's slot and the managers' leader election Lease,
		// which the tests after this one must not find left behind.
		_ = admin.DeleteAllOf(bg, &coordinationv1.Lease{}, client.InNamespace(namespace), client.HasLabels{pitstopv1alpha1.LabelBudget})
		_ = admin.Delete(bg, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: clockLeaderID}})
	})
	for _, n := range nodes {
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"skew"}}}`, annotation)
		if err := admin.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
			t.Fatal(err)
		}
	}

	// The nodes take their turns in any order: the next is the one seen
	// through maintenance that was not counted before.
	counted := map[string]bool{}
	next := func(within time.Duration, what string) (string, time.Time) {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			e.mu.Lock()
			for _, n := range nodes {
				if !e.left[n].IsZero() && !counted[n] {
					counted[n] = true
					at := e.entered[n]
					e.mu.Unlock()
					return n, at
				}
			}
			e.mu.Unlock()
			if time.Now().After(deadline) {
				t.Fatalf("no other worker through maintenance within %s %s", within, what)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	stop := startInProcess(t, "on-time", 0)
	first, firstIn := next(time.Minute, "of the profile's start")
	stop()
	tookOver := time.Now()
	stop = startInProcess(t, "ahead", skew)
	second, secondIn := next(pace+time.Minute, fmt.Sprintf("of a manager %s ahead taking over", skew))
	t.Logf("%s entered maintenance %s after %s; the manager %s ahead took over %s after the first entry",
		second, secondIn.Sub(firstIn).Round(100*time.Millisecond), first, skew, tookOver.Sub(firstIn).Round(100*time.Millisecond))
	if gap := secondIn.Sub(firstIn); gap < pace {
		t.Errorf("%s entered maintenance %s after %s, within the stagger's %s, once a manager whose clock is %s ahead took over (invariant 1)",
			second, gap.Round(100*time.Millisecond), first, pace, skew)
	}
	stop()
	tookOver = time.Now()
	startInProcess(t, "behind", -skew)
	third, thirdIn := next(pace+time.Minute, fmt.Sprintf("of a manager %s behind taking over: it waits for its clock to catch up", skew))
	t.Logf("%s entered maintenance %s after %s, %s after the manager %s behind took over",
		third, thirdIn.Sub(secondIn).Round(100*time.Millisecond), second, thirdIn.Sub(tookOver).Round(100*time.Millisecond), skew)
	if gap := thirdIn.Sub(secondIn); gap < pace {
		t.Errorf("%s entered maintenance %s after %s, within the stagger's %s (invariant 1)", third, gap.Round(100*time.Millisecond), second, pace)
	}
	if late := thirdIn.Sub(tookOver); late > pace+45*time.Second {
		t.Errorf("%s entered maintenance %s after a manager whose clock is %s behind took over, want about the stagger's %s: it waited for its clock",
			third, late.Round(100*time.Millisecond), skew, pace)
	}
}
