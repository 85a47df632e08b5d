package nodemaintenance_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// TestAPoisonObjectDoesNotStopTheOthers stores a NodeMaintenance whose
// drain timeout is "1 hour", as a CRD without validation let through (the
// test relaxes the CRD, stores it, then puts the CRD back): the manager's
// cache must still sync and every other NodeMaintenance be served, while
// the bad one is refused with a condition naming the field and its node is
// left alone.
func TestAPoisonObjectDoesNotStopTheOthers(t *testing.T) {
	poison := storeWithoutValidation(t, "poison", "poison-1", "1 hour")
	create(t, testutil.Node("poison-1"), testutil.Node("poison-2"))
	startManager(t, false)
	testutil.Kubelet(t, env.Clientset)
	ns := namespace(t, "poison")
	managedPods(t, ns, "poison-2", "web", 2)

	good := nodeMaintenance("poison-neighbour", "poison-2")
	create(t, good)
	awaitCondition(t, good, condReady, metav1.ConditionTrue, pitstopv1alpha1.ReasonReady, 20*time.Second)

	bad := &pitstopv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: poison.GetName()}}
	got := awaitCondition(t, bad, pitstopv1alpha1.ConditionDrained, metav1.ConditionFalse, pitstopv1alpha1.ReasonInvalidSpec, 10*time.Second)
	msg := conditionMessage(got, pitstopv1alpha1.ConditionDrained)
	if !strings.Contains(msg, "spec.drain.timeout") || !strings.Contains(msg, "1 hour") {
		t.Errorf("condition message %q, want the field and its value", msg)
	}
	if node := testutil.GetNode(t, env.Client, "poison-1"); node.Spec.Unschedulable {
		t.Error("the node of the NodeMaintenance with a bad spec was cordoned")
	}
	// Written back by pitstop (its finalizer), the value is the user's.
	stored := &unstructured.Unstructured{}
	stored.SetGroupVersionKind(pitstopv1alpha1.GroupVersion.WithKind("NodeMaintenance"))
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(poison), stored); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := unstructured.NestedString(stored.Object, "spec", "drain", "timeout"); v != "1 hour" {
		t.Errorf("spec.drain.timeout is now %q, want the %q that was stored", v, "1 hour")
	}
	if err := env.Client.Delete(t.Context(), bad); err != nil {
		t.Fatal(err)
	}
}

// storeWithoutValidation stores a NodeMaintenance with the drain timeout
// given, through a copy of the CRD without the timeout's validation, and
// then puts the CRD back as it was.
func storeWithoutValidation(t *testing.T, name, node, timeout string) *unstructured.Unstructured {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	key := client.ObjectKey{Name: "nodemaintenances.pitstop.dev"}
	if err := env.Client.Get(t.Context(), key, crd); err != nil {
		t.Fatal(err)
	}
	original := crd.Spec.DeepCopy()
	drain := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["drain"]
	relaxed := drain.Properties["timeout"]
	relaxed.Pattern, relaxed.MaxLength, relaxed.XValidations = "", nil, nil
	drain.Properties["timeout"] = relaxed
	crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["drain"] = drain
	if err := env.Client.Update(t.Context(), crd); err != nil {
		t.Fatal(err)
	}
	restore := func() {
		got := &apiextensionsv1.CustomResourceDefinition{}
		if err := env.Client.Get(t.Context(), key, got); err != nil {
			t.Fatal(err)
		}
		got.Spec = *original
		if err := env.Client.Update(t.Context(), got); err != nil {
			t.Fatal(err)
		}
	}
	defer restore()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "pitstop.dev/v1alpha1", "kind": "NodeMaintenance",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"nodeName": node, "drain": map[string]any{"timeout": timeout}},
	}}
	testutil.Eventually(t, 10*time.Second, 100*time.Millisecond, func() error {
		if err := env.Client.Create(t.Context(), obj); err != nil {
			return fmt.Errorf("storing the bad NodeMaintenance through the relaxed CRD: %w", err)
		}
		return nil
	})
	return obj
}

func conditionMessage(nm *pitstopv1alpha1.NodeMaintenance, condType string) string {
	for _, c := range nm.Status.Conditions {
		if c.Type == condType {
			return c.Message
		}
	}
	return ""
}
