package profile_test

import (
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/budget"
	"github.com/pitstop-dev/pitstop/internal/controller/profile"
	"github.com/pitstop-dev/pitstop/internal/engine"
	"github.com/pitstop-dev/pitstop/internal/nodepatch"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// TestNodeWriteIsLockedOnWhatItDependsOn writes the engine's changes to a
// node that someone else changed since the engine read it, against the
// real API server: a cordon and another controller's label do not make the
// write fail, while a second writer of the record, or of a label the write
// changes, does, and then nothing is written.
func TestNodeWriteIsLockedOnWhatItDependsOn(t *testing.T) {
	ctx := t.Context()
	r := profile.NewBareReconciler(env.Client, env.Client)
	node := testutil.Node("write-lock-1")
	node.Annotations = map[string]string{pitstopv1alpha1.AnnotationMaintenanceData: "r0", "reboot-needed": "true"}
	testutil.Create(t, env.Client, node)
	read := testutil.GetNode(t, env.Client, node.Name)

	// Someone cordons the node and labels it while the engine evaluates.
	other := read.DeepCopy()
	other.Spec.Unschedulable = true
	other.Labels["example.com/team"] = "a"
	if err := env.Client.Patch(ctx, other, client.MergeFrom(read)); err != nil {
		t.Fatal(err)
	}
	want := read.DeepCopy()
	want.Annotations[pitstopv1alpha1.AnnotationMaintenanceData] = "r1"
	want.Labels[pitstopv1alpha1.LabelState] = "in-maintenance"
	delete(want.Annotations, "reboot-needed")
	if err := r.WriteNode(ctx, read, want); err != nil {
		t.Fatalf("writing over a cordon and another controller's label: %v", err)
	}
	got := testutil.GetNode(t, env.Client, node.Name)
	if got.Annotations[pitstopv1alpha1.AnnotationMaintenanceData] != "r1" || got.Labels[pitstopv1alpha1.LabelState] != "in-maintenance" ||
		got.Annotations["reboot-needed"] != "" || !got.Spec.Unschedulable || got.Labels["example.com/team"] != "a" {
		t.Fatalf("after the write: record %q, state %q, reboot-needed %q, unschedulable %v, team %q; want r1, in-maintenance, gone, true, a",
			got.Annotations[pitstopv1alpha1.AnnotationMaintenanceData], got.Labels[pitstopv1alpha1.LabelState], got.Annotations["reboot-needed"], got.Spec.Unschedulable, got.Labels["example.com/team"])
	}

	// A write the API server finds invalid is an error, not a stale view.
	read = testutil.GetNode(t, env.Client, node.Name)
	want = read.DeepCopy()
	want.Annotations[pitstopv1alpha1.AnnotationMaintenanceData] = "r1b"
	want.Labels["example.com/bad"] = "not a label value!"
	if err := r.WriteNode(ctx, read, want); err == nil || errors.Is(err, nodepatch.ErrStale) {
		t.Fatalf("writing an invalid label: %v, want the API server's error", err)
	}

	for _, tc := range []struct {
		name  string
		other func(*corev1.Node)
	}{
		{"another writer of the record", func(n *corev1.Node) { n.Annotations[pitstopv1alpha1.AnnotationMaintenanceData] = "r2" }},
		{"another writer of the state label", func(n *corev1.Node) { n.Labels[pitstopv1alpha1.LabelState] = "operational" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			read := testutil.GetNode(t, env.Client, node.Name)
			other := read.DeepCopy()
			tc.other(other)
			if err := env.Client.Patch(ctx, other, client.MergeFrom(read)); err != nil {
				t.Fatal(err)
			}
			want := read.DeepCopy()
			want.Annotations[pitstopv1alpha1.AnnotationMaintenanceData] = "r3"
			want.Labels[pitstopv1alpha1.LabelState] = "maintenance-required"
			err := r.WriteNode(ctx, read, want)
			if !errors.Is(err, nodepatch.ErrStale) {
				t.Fatalf("WriteNode = %v, want ErrStale", err)
			}
			// The refused write hands over the node it read back, with
			// the other writer's change, for the next evaluation.
			if live := nodepatch.LiveNode(err); live == nil || live.ResourceVersion != other.ResourceVersion {
				t.Errorf("the stale write carried %v, want the node at resourceVersion %s", live, other.ResourceVersion)
			}
			got := testutil.GetNode(t, env.Client, node.Name)
			if got.Annotations[pitstopv1alpha1.AnnotationMaintenanceData] == "r3" || got.Labels[pitstopv1alpha1.LabelState] == "maintenance-required" {
				t.Errorf("a stale write went through: record %q, state %q", got.Annotations[pitstopv1alpha1.AnnotationMaintenanceData], got.Labels[pitstopv1alpha1.LabelState])
			}
		})
	}
}

// TestANodeThatMustWaitIsWrittenOnceAsItJoinsTheLine: a node entering a
// state whose way into maintenance needs a budget slot is recorded as
// admission expects it to go, in the write of its move. The first to
// enter, with a slot free, is recorded passing the budget check; the next,
// with that slot promised to the node ahead of it in line, is recorded
// failing it, and its refusals then write nothing: a fleet of waiting
// nodes costs one write each to line up, not two.
func TestANodeThatMustWaitIsWrittenOnceAsItJoinsTheLine(t *testing.T) {
	const name = "joins"
	ns := testutil.Namespace(t, env.Client, name)
	p := rollingProfile(name, name, 1)
	testutil.Create(t, env.Client, p)
	first, second, third := name+"-first", name+"-second", name+"-third"
	for _, n := range []string{first, second, third} {
		testutil.Create(t, env.Client, testutil.Node(n, testutil.WithLabels(map[string]string{"pool": name}),
			func(n *corev1.Node) { n.Annotations = map[string]string{"reboot-needed": "true"} }))
	}
	r := profile.NewBareReconciler(env.Client, env.Client).WithSlots(&budget.Slots{Client: env.Client, Cache: env.Client, Namespace: ns})
	reconcile := func(node string) {
		t.Helper()
		if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: node}}); err != nil {
			t.Fatal(err)
		}
	}
	recorded := func(node string) (pitstopv1alpha1.MaintenanceState, map[string]bool, string) {
		t.Helper()
		n := testutil.GetNode(t, env.Client, node)
		rec, err := engine.ReadRecord(n)
		if err != nil {
			t.Fatal(err)
		}
		return rec.Profiles[name].Current, rec.Profiles[name].Checks, n.ResourceVersion
	}
	expect := func(node string, state pitstopv1alpha1.MaintenanceState, budgetPassed bool) string {
		t.Helper()
		got, checks, rv := recorded(node)
		if passed, ok := checks["budget"]; got != state || !ok || passed != budgetPassed {
			t.Fatalf("%s is %s with checks %v; want %s with budget %v", node, got, checks, state, budgetPassed)
		}
		return rv
	}

	reconcile(first)
	expect(first, pitstopv1alpha1.StateMaintenanceRequired, true)
	time.Sleep(10 * time.Millisecond) // the record's times are to the millisecond
	reconcile(second)
	rv := expect(second, pitstopv1alpha1.StateMaintenanceRequired, false)
	for range 2 { // refused: the node ahead takes the free slot
		reconcile(second)
		if _, _, now := recorded(second); now != rv {
			t.Fatalf("%s was written again while it waited (resourceVersion %s, then %s)", second, rv, now)
		}
	}
	reconcile(first)
	if got, _, _ := recorded(first); got != pitstopv1alpha1.StateInMaintenance {
		t.Fatalf("%s is %s, want %s", first, got, pitstopv1alpha1.StateInMaintenance)
	}
	reconcile(third)
	rv = expect(third, pitstopv1alpha1.StateMaintenanceRequired, false)
	reconcile(third)
	if _, _, now := recorded(third); now != rv {
		t.Fatalf("%s was written again while it waited (resourceVersion %s, then %s)", third, rv, now)
	}
}
