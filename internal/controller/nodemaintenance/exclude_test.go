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

// TestExcludeNodeDrainingOnTheNodeCordonsOnly: the Machine API's
// exclude-node-draining annotation on the node, not on the NodeMaintenance,
// also makes the maintenance a cordon only: the node is cordoned and
// tainted, its pods stay, and Drained is True with reason DrainSkipped.
func TestExcludeNodeDrainingOnTheNodeCordonsOnly(t *testing.T) {
	startManager(t, true)
	removeAtEnd(t, "exclnode")
	testutil.Kubelet(t, env.Clientset)
	ns := namespace(t, "exclnode")
	create(t, testutil.Node("exclnode-1", func(n *corev1.Node) {
		n.Annotations = map[string]string{pitstopv1alpha1.AnnotationExcludeNodeDraining: ""}
	}))
	pods := managedPods(t, ns, "exclnode-1", "web", 2)

	nm := nodeMaintenance("exclnode", "exclnode-1")
	create(t, nm)
	got := awaitCondition(t, nm, condDrained, metav1.ConditionTrue, pitstopv1alpha1.ReasonDrainSkipped, 10*time.Second)
	if c := condition(got, condCordoned); c.Status != metav1.ConditionTrue {
		t.Errorf("Cordoned %+v, want True", c)
	}
	n := node(t, "exclnode-1")
	if !n.Spec.Unschedulable || !nodeview.HasTaint(n, pitstopv1alpha1.TaintDrain) {
		t.Errorf("node not cordoned: unschedulable=%v taints=%v", n.Spec.Unschedulable, n.Spec.Taints)
	}
	for _, p := range pods {
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(p), p); err != nil {
			t.Fatalf("pod %s: %v", p.Name, err)
		}
		if p.DeletionTimestamp != nil {
			t.Errorf("pod %s evicted although the node excludes draining", p.Name)
		}
	}
}
