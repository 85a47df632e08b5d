package profile_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/budget"
	"github.com/pitstop-dev/pitstop/internal/controller/profile"
	"github.com/pitstop-dev/pitstop/internal/maintenance"
	"github.com/pitstop-dev/pitstop/internal/plugin/trigger"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// TestANodeWaitingOnlyForABudgetIsWokenNotPolled: a node waiting for a
// slot asks to be evaluated again at no time of its own: a maxMaintenance
// slot is freed by a node that wakes it, and a stagger slot's expiry wakes
// the front of the budget's line, not every node in it. A node whose
// transition also waits on a check that reads other nodes (anyLabel) is
// evaluated again within 30 s, since nothing announces a change of those.
func TestANodeWaitingOnlyForABudgetIsWokenNotPolled(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*pitstopv1alpha1.MaintenanceProfile)
		// recheck is the longest the waiting node may ask to wait; 0:
		// it must not ask.
		recheck time.Duration
	}{
		{name: "max"},
		{name: "stagger", edit: func(p *pitstopv1alpha1.MaintenanceProfile) {
			p.Spec.Checks[1] = pitstopv1alpha1.CheckInstance{Name: "budget", Stagger: &pitstopv1alpha1.StaggerCheck{Duration: pitstopv1alpha1.Duration{Duration: time.Hour}, Parallel: 1}}
		}},
		{name: "anylabel", recheck: 30 * time.Second, edit: func(p *pitstopv1alpha1.MaintenanceProfile) {
			p.Spec.Checks = append(p.Spec.Checks, pitstopv1alpha1.CheckInstance{Name: "somewhere", AnyLabel: &pitstopv1alpha1.KeyValueCheck{Key: "kubernetes.io/os"}})
			p.Spec.States.MaintenanceRequired.Transitions[0].Check = "budget && somewhere"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "woken-" + tc.name
			ns := testutil.Namespace(t, env.Client, name)
			p := rollingProfile(name, name, 1)
			if tc.edit != nil {
				tc.edit(p)
			}
			testutil.Create(t, env.Client, p)
			var nodes []string
			for _, suffix := range []string{"first", "second", "third"} {
				n := testutil.Node(name+"-"+suffix, testutil.WithLabels(map[string]string{"pool": name, "kubernetes.io/os": "linux"}),
					func(n *corev1.Node) { n.Annotations = map[string]string{"reboot-needed": "true"} })
				testutil.Create(t, env.Client, n)
				nodes = append(nodes, n.Name)
			}
			r := profile.NewBareReconciler(env.Client, env.Client).WithSlots(&budget.Slots{Client: env.Client, Cache: env.Client, Namespace: ns})
			_, state := drive(t, r, p.Name)
			reconcile := func(node string) ctrl.Result {
				t.Helper()
				res, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: node}})
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			for range 2 { // maintenance-required, then in maintenance with the slot
				reconcile(nodes[0])
			}
			if got := state(testutil.GetNode(t, env.Client, nodes[0])); got != pitstopv1alpha1.StateInMaintenance {
				t.Fatalf("%s is %s, want %s", nodes[0], got, pitstopv1alpha1.StateInMaintenance)
			}
			for _, node := range nodes[1:] {
				reconcile(node) // maintenance-required
				for range 2 {
					res := reconcile(node) // waiting for the slot
					if got := state(testutil.GetNode(t, env.Client, node)); got != pitstopv1alpha1.StateMaintenanceRequired {
						t.Fatalf("%s is %s, want %s", node, got, pitstopv1alpha1.StateMaintenanceRequired)
					}
					switch {
					case tc.recheck == 0 && res.RequeueAfter != 0:
						t.Errorf("%s, waiting for a slot only, asks to be evaluated again in %s; want it woken", node, res.RequeueAfter)
					case tc.recheck != 0 && (res.RequeueAfter == 0 || res.RequeueAfter > tc.recheck):
						t.Errorf("%s, waiting on a check that reads other nodes, asks to be evaluated again in %s; want within %s", node, res.RequeueAfter, tc.recheck)
					}
				}
			}
			if woken := r.Woken(); len(woken) != 0 {
				t.Errorf("woken while the slot is held: %v", woken)
			}
		})
	}
}

// TestANodeWaitingForItsDrainIsWokenNotPolled: a node whose drain trigger
// waits for its NodeMaintenance is evaluated again when the
// NodeMaintenance's Ready condition changes (the controller's watch): it
// asks for a look of its own only after 5 minutes, in case a wake-up is
// missed. Without that watch it looks every 10 s.
func TestANodeWaitingForItsDrainIsWokenNotPolled(t *testing.T) {
	for _, tc := range []struct {
		name    string
		watched bool
		want    time.Duration
	}{
		{name: "watched", watched: true, want: 5 * time.Minute},
		{name: "unwatched", want: 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "drainwait-" + tc.name
			ns := testutil.Namespace(t, env.Client, name)
			p := rollingProfile(name, name, 1)
			p.Spec.Triggers = append(p.Spec.Triggers,
				pitstopv1alpha1.TriggerInstance{Name: "drain", Drain: &pitstopv1alpha1.DrainTrigger{}},
				pitstopv1alpha1.TriggerInstance{Name: "restore", Restore: &pitstopv1alpha1.RestoreTrigger{}})
			p.Spec.States.MaintenanceRequired.Transitions[0].Triggers = []string{"drain"}
			p.Spec.States.InMaintenance.Transitions[0].Triggers = []string{"restore"}
			testutil.Create(t, env.Client, p)
			n := testutil.Node(name+"-0", testutil.WithLabels(map[string]string{"pool": name}),
				func(n *corev1.Node) { n.Annotations = map[string]string{"reboot-needed": "true"} })
			testutil.Create(t, env.Client, n)
			r := profile.NewBareReconciler(env.Client, env.Client).WithSlots(&budget.Slots{Client: env.Client, Cache: env.Client, Namespace: ns})
			if tc.watched {
				r.Watching(trigger.WaitsOnNodeMaintenance)
			}
			t.Cleanup(func() { deleteMaintenanceOf(t, n.Name) })
			reconcile := func() ctrl.Result {
				t.Helper()
				res, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: n.Name}})
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			nm := &pitstopv1alpha1.NodeMaintenance{}
			for i := 0; ; i++ { // into maintenance-required, then the slot and the drain's NodeMaintenance
				reconcile()
				err := env.Client.Get(t.Context(), types.NamespacedName{Name: maintenance.ForProfile(n.Name)}, nm)
				if err == nil {
					break
				}
				if i == 5 {
					t.Fatalf("the drain's NodeMaintenance after %d evaluations: %v (the node waits for %q; its record %s)", i+1, err, r.Decisions(n.Name)[p.Name].Blocking(), testutil.GetNode(t, env.Client, n.Name).Annotations[pitstopv1alpha1.AnnotationMaintenanceData])
				}
			}
			res := reconcile() // still draining: no controller runs it
			if res.RequeueAfter != tc.want {
				t.Errorf("a node waiting for its drain asks to be evaluated again in %s, want %s", res.RequeueAfter, tc.want)
			}
		})
	}
}

// deleteMaintenanceOf deletes the node's profile NodeMaintenance, which no
// controller runs here, finalizers and all.
func deleteMaintenanceOf(t *testing.T, node string) {
	nm := &pitstopv1alpha1.NodeMaintenance{}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Name: maintenance.ForProfile(node)}, nm); err != nil {
		return
	}
	nm.Finalizers = nil
	_ = env.Client.Update(context.Background(), nm)
	_ = env.Client.Delete(context.Background(), nm)
}
