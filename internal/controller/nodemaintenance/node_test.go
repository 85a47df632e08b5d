package nodemaintenance

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/scheme"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// TestPatchNodeWritesOverAStaleRead: the cached node is one version
// behind (the kubelet reported in since); the cordon loses its optimistic
// lock, is applied to the API server's copy and written at once, keeping
// the kubelet's status. The restore goes the same way.
func TestPatchNodeWritesOverAStaleRead(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(testutil.Node("worker")).WithStatusSubresource(&corev1.Node{}).Build()
	r := &Reconciler{client: c, apiReader: c}
	stale := &corev1.Node{}
	if err := c.Get(t.Context(), client.ObjectKey{Name: "worker"}, stale); err != nil {
		t.Fatal(err)
	}
	heartbeat := func() {
		live := &corev1.Node{}
		if err := c.Get(t.Context(), client.ObjectKey{Name: "worker"}, live); err != nil {
			t.Fatal(err)
		}
		live.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}
		if err := c.Status().Update(t.Context(), live); err != nil {
			t.Fatal(err)
		}
	}
	heartbeat()

	now, wrote, err := r.patchNode(t.Context(), stale, cordoned)
	if err != nil || !wrote {
		t.Fatalf("cordon over a stale read: wrote %v, err %v", wrote, err)
	}
	got := &corev1.Node{}
	if err := c.Get(t.Context(), client.ObjectKey{Name: "worker"}, got); err != nil {
		t.Fatal(err)
	}
	if !got.Spec.Unschedulable || !hasTaint(got, pitstopv1alpha1.TaintDrain) || len(got.Status.Conditions) != 1 {
		t.Fatalf("after the cordon: unschedulable %v, taints %v, conditions %v", got.Spec.Unschedulable, got.Spec.Taints, got.Status.Conditions)
	}
	if now.ResourceVersion == stale.ResourceVersion {
		t.Errorf("the returned node is the stale read")
	}

	stale = got.DeepCopy()
	heartbeat()
	if _, wrote, err := r.patchNode(t.Context(), stale, restored); err != nil || !wrote {
		t.Fatalf("restore over a stale read: wrote %v, err %v", wrote, err)
	}
	if err := c.Get(t.Context(), client.ObjectKey{Name: "worker"}, got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Unschedulable || hasTaint(got, pitstopv1alpha1.TaintDrain) || got.Annotations[pitstopv1alpha1.AnnotationCordonedBefore] != "" {
		t.Fatalf("after the restore: unschedulable %v, taints %v, annotations %v", got.Spec.Unschedulable, got.Spec.Taints, got.Annotations)
	}

	// Nothing left to change on the API server's copy: no write.
	if _, wrote, err := r.patchNode(t.Context(), stale, restored); err != nil || wrote {
		t.Fatalf("a restore the API server's copy does not need: wrote %v, err %v", wrote, err)
	}
}
