package profile_test

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pitstop-dev/pitstop/internal/controller/profile"
	"github.com/pitstop-dev/pitstop/internal/nodepatch"
	"github.com/pitstop-dev/pitstop/internal/testutil"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
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
