package nodemaintenance_test

import (
	"context"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/controller/nodemaintenance"
	"github.com/pitstop-dev/pitstop/internal/nodeview"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// countingReader counts the reads of the API server's copy of a node.
type countingReader struct {
	client.Reader
	gets atomic.Int32
}

func (c *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.gets.Add(1)
	return c.Reader.Get(ctx, key, obj, opts...)
}

// writeBehind changes the API server's copy of a node after it was read,
// as another writer would.
func writeBehind(t *testing.T, name string, change func(*corev1.Node), status bool) {
	t.Helper()
	live := testutil.GetNode(t, env.Client, name)
	patch := client.MergeFrom(live.DeepCopy())
	change(live)
	var err error
	if status {
		err = env.Client.Status().Patch(t.Context(), live, patch)
	} else {
		err = env.Client.Patch(t.Context(), live, patch)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func heartbeat(n *corev1.Node) {
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now(), Reason: "KubeletReady"}}
}

// TestNodeWritesOverOtherWriters cordons and restores nodes read a moment
// before someone else wrote them, against the real API server. A write to
// a field the cordon does not depend on (the kubelet's status, the profile
// engine's record) does not stop it: it is written as is, without
// rereading the node. A cordon by someone else in between does: the
// cordon is applied again to the API server's copy, records the node as
// cordoned before pitstop, and the restore leaves it cordoned.
func TestNodeWritesOverOtherWriters(t *testing.T) {
	ctx := t.Context()
	reader := &countingReader{Reader: env.Client}
	w := nodemaintenance.NewNodeWriter(env.Client, reader)

	node := testutil.Node("write-over-1")
	node.Annotations = map[string]string{"pitstop.dev/maintenance-data": "r0"}
	create(t, node)
	stale := testutil.GetNode(t, env.Client, node.Name)
	writeBehind(t, node.Name, heartbeat, true)
	writeBehind(t, node.Name, func(n *corev1.Node) { n.Annotations["pitstop.dev/maintenance-data"] = "r1" }, false)
	if _, wrote, err := w.Cordon(ctx, stale); err != nil || !wrote {
		t.Fatalf("cordon over the kubelet's status and the engine's record: wrote %v, err %v", wrote, err)
	}
	got := testutil.GetNode(t, env.Client, node.Name)
	if !got.Spec.Unschedulable || got.Annotations[pitstopv1alpha1.AnnotationCordonedBefore] != "false" ||
		got.Annotations["pitstop.dev/maintenance-data"] != "r1" || len(got.Status.Conditions) != 1 {
		t.Fatalf("after the cordon: unschedulable %v, annotations %v, conditions %v", got.Spec.Unschedulable, got.Annotations, got.Status.Conditions)
	}
	if n := reader.gets.Load(); n != 0 {
		t.Errorf("the cordon reread the node %d times; nothing it depends on had changed", n)
	}

	stale = got
	writeBehind(t, node.Name, heartbeat, true)
	if _, wrote, err := w.Restore(ctx, stale); err != nil || !wrote {
		t.Fatalf("restore over the kubelet's status: wrote %v, err %v", wrote, err)
	}
	got = testutil.GetNode(t, env.Client, node.Name)
	if got.Spec.Unschedulable || nodeview.HasTaint(got, pitstopv1alpha1.TaintDrain) || nodeview.HasTaint(got, corev1.TaintNodeUnschedulable) || got.Annotations[pitstopv1alpha1.AnnotationCordonedBefore] != "" {
		t.Fatalf("after the restore: unschedulable %v, taints %v, annotations %v", got.Spec.Unschedulable, got.Spec.Taints, got.Annotations)
	}
	// Nothing left to change on the API server's copy: no write.
	if _, wrote, err := w.Restore(ctx, stale); err != nil || wrote {
		t.Fatalf("a restore the API server's copy does not need: wrote %v, err %v", wrote, err)
	}

	// Someone cordons the node between pitstop's read and its cordon.
	stale = testutil.GetNode(t, env.Client, node.Name)
	writeBehind(t, node.Name, func(n *corev1.Node) { n.Spec.Unschedulable = true }, false)
	if _, wrote, err := w.Cordon(ctx, stale); err != nil || !wrote {
		t.Fatalf("cordon over someone else's cordon: wrote %v, err %v", wrote, err)
	}
	got = testutil.GetNode(t, env.Client, node.Name)
	if got.Annotations[pitstopv1alpha1.AnnotationCordonedBefore] != "true" {
		t.Fatalf("cordoned by someone else a moment before pitstop: recorded cordoned before = %q, want true",
			got.Annotations[pitstopv1alpha1.AnnotationCordonedBefore])
	}
	if _, _, err := w.Restore(ctx, got); err != nil {
		t.Fatal(err)
	}
	if got = testutil.GetNode(t, env.Client, node.Name); !got.Spec.Unschedulable {
		t.Fatal("the restore uncordoned a node someone else had cordoned")
	}

	// The other way round: the node was cordoned by someone else when
	// pitstop read it, and uncordoned before pitstop's cordon. The cordon
	// changes nothing of spec.unschedulable as read, yet depends on it.
	fresh := testutil.Node("write-over-2")
	fresh.Annotations = map[string]string{"example.com/note": "x"}
	fresh.Spec.Unschedulable = true
	create(t, fresh)
	stale = testutil.GetNode(t, env.Client, fresh.Name)
	writeBehind(t, fresh.Name, func(n *corev1.Node) { n.Spec.Unschedulable = false }, false)
	if _, _, err := w.Cordon(ctx, stale); err != nil {
		t.Fatal(err)
	}
	got = testutil.GetNode(t, env.Client, fresh.Name)
	if !got.Spec.Unschedulable || got.Annotations[pitstopv1alpha1.AnnotationCordonedBefore] != "false" {
		t.Fatalf("uncordoned by someone else a moment before pitstop's cordon: unschedulable %v, recorded cordoned before %q; want true, false",
			got.Spec.Unschedulable, got.Annotations[pitstopv1alpha1.AnnotationCordonedBefore])
	}
}
