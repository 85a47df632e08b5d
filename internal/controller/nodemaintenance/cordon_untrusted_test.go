package nodemaintenance_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/nodeview"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// TestUntrustedCordonedBeforeEditedByTheNode: the node's record of whether
// it was cordoned before pitstop came is writable by anyone who may patch
// the node, its own kubelet too. Rewriting it to "false" during the
// maintenance, deleting it, or planting "false" before the maintenance
// starts must not make pitstop lift an administrator's cordon at the end.
func TestUntrustedCordonedBeforeEditedByTheNode(t *testing.T) {
	startManager(t, true)
	cases := []struct {
		name   string
		before func(*corev1.Node) // the node as the administrator and the forger left it
		during func(*corev1.Node) // what the forger writes once pitstop has cordoned it
	}{
		{name: "rewritten", during: func(n *corev1.Node) { n.Annotations[pitstopv1alpha1.AnnotationCordonedBefore] = "false" }},
		{name: "deleted", during: func(n *corev1.Node) { delete(n.Annotations, pitstopv1alpha1.AnnotationCordonedBefore) }},
		{name: "planted", before: func(n *corev1.Node) {
			n.Annotations = map[string]string{pitstopv1alpha1.AnnotationCordonedBefore: "false"}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			name := "forged-cordon-" + c.name
			n := testutil.Node(name, testutil.Unschedulable())
			if c.before != nil {
				c.before(n)
			}
			create(t, n)
			nm := nodeMaintenance(name, name)
			create(t, nm)
			awaitCondition(t, nm, condReady, metav1.ConditionTrue, pitstopv1alpha1.ReasonReady, 10*time.Second)
			got := &pitstopv1alpha1.NodeMaintenance{}
			if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(nm), got); err != nil {
				t.Fatal(err)
			}
			if got.Status.CordonedBefore == nil || !*got.Status.CordonedBefore {
				t.Errorf("status.cordonedBefore = %v, want true", got.Status.CordonedBefore)
			}
			if v := node(t, name).Annotations[pitstopv1alpha1.AnnotationCordonedBefore]; v != "true" {
				t.Errorf("the node's copy of the record = %q, want true", v)
			}
			if c.during != nil {
				forged := node(t, name)
				c.during(forged)
				if err := env.Client.Update(t.Context(), forged); err != nil {
					t.Fatal(err)
				}
			}
			if err := env.Client.Delete(t.Context(), nm); err != nil {
				t.Fatal(err)
			}
			testutil.Eventually(t, 10*time.Second, 100*time.Millisecond, func() error {
				return ignoreGone(env.Client.Get(t.Context(), client.ObjectKeyFromObject(nm), &pitstopv1alpha1.NodeMaintenance{}))
			})
			after := node(t, name)
			if !after.Spec.Unschedulable {
				t.Error("pitstop lifted the administrator's cordon after the node's record was forged")
			}
			if nodeview.HasTaint(after, pitstopv1alpha1.TaintDrain) {
				t.Error("pitstop's taint left on the node")
			}
		})
	}
}
