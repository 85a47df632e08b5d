package profile_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/controller/profile"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// TestQueuePriorities: a node in maintenance is evaluated ahead of the
// rest (its slots wait for it), a node that just changed state next
// (its next transition may be due at once), everything else after.
func TestQueuePriorities(t *testing.T) {
	p := &pitstopv1alpha1.MaintenanceProfile{
		ObjectMeta: metav1.ObjectMeta{Name: "priorities"},
		Spec: pitstopv1alpha1.MaintenanceProfileSpec{
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "priorities"}},
			Checks:       []pitstopv1alpha1.CheckInstance{{Name: "wanted", HasAnnotation: &pitstopv1alpha1.KeyValueCheck{Key: "reboot-needed"}}},
			States: pitstopv1alpha1.StatesSpec{
				Operational:         pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "wanted", Next: pitstopv1alpha1.StateMaintenanceRequired}}},
				MaintenanceRequired: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "wanted", Next: pitstopv1alpha1.StateInMaintenance}}},
				InMaintenance:       pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "!wanted", Next: pitstopv1alpha1.StateOperational}}},
			},
		},
	}
	testutil.Create(t, env.Client, p)
	node := testutil.Node("priorities-0", testutil.WithLabels(map[string]string{"pool": "priorities"}),
		func(n *corev1.Node) { n.Annotations = map[string]string{"reboot-needed": "true"} })
	testutil.Create(t, env.Client, node)
	r := profile.NewBareReconciler(env.Client, env.Client)
	reconcile := func(wantState pitstopv1alpha1.MaintenanceState, wantPriority int) {
		t.Helper()
		res, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: node.Name}})
		if err != nil {
			t.Fatal(err)
		}
		state := testutil.GetNode(t, env.Client, node.Name).Labels[pitstopv1alpha1.LabelState]
		if state != string(wantState) || res.Priority == nil || *res.Priority != wantPriority {
			t.Fatalf("state %s, priority %v; want %s, %d", state, ptr.Deref(res.Priority, -1), wantState, wantPriority)
		}
	}
	reconcile(pitstopv1alpha1.StateMaintenanceRequired, 5) // just moved
	reconcile(pitstopv1alpha1.StateInMaintenance, 10)      // in maintenance
	reconcile(pitstopv1alpha1.StateInMaintenance, 10)      // still
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"reboot-needed":null}}}`))
	if err := env.Client.Patch(t.Context(), node, patch); err != nil {
		t.Fatal(err)
	}
	reconcile(pitstopv1alpha1.StateOperational, 5) // just left
	reconcile(pitstopv1alpha1.StateOperational, 0) // nothing under way
}
