package profile_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/budget"
	"github.com/pitstop-dev/pitstop/internal/controller/profile"
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
