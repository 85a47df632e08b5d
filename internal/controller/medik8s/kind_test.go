package medik8s

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

// TestTheKubevirtKindIsNamedAfterItsNodeAndOwnsThroughAnnotations: the
// namespaced kind's node is its name, its maintenance is named after its
// namespace and name (so two namespaces never share one), and it owns that
// maintenance only while the annotations name this very object.
func TestTheKubevirtKindIsNamedAfterItsNodeAndOwnsThroughAnnotations(t *testing.T) {
	obj := kubevirtKind.newObject()
	obj.SetNamespace("default")
	obj.SetName("node02")
	obj.SetUID("uid-1")
	if err := unstructured.SetNestedField(obj.Object, "Test node maintenance", "spec", "reason"); err != nil {
		t.Fatal(err)
	}
	s, err := kubevirtKind.specOf(obj)
	if err != nil || s.NodeName != "node02" || s.Reason != "Test node maintenance" {
		t.Fatalf("spec %+v, %v: want node02 and the reason", s, err)
	}
	nm := kubevirtKind.newMaintenance(obj, s)
	if nm.Name != "kubevirt-default.node02" || len(nm.OwnerReferences) != 0 {
		t.Errorf("name %s owner references %v, want kubevirt-default.node02 and none", nm.Name, nm.OwnerReferences)
	}
	if !kubevirtKind.owns(nm, obj) {
		t.Errorf("annotations %v do not make obj the owner", nm.Annotations)
	}
	if key, ok := kubevirtKind.ownerKey(nm); !ok || key != (types.NamespacedName{Namespace: "default", Name: "node02"}) {
		t.Errorf("owner key %v %v, want default/node02", key, ok)
	}
	later := obj.DeepCopy()
	later.SetUID("uid-2")
	if kubevirtKind.owns(nm, later) {
		t.Error("a later object of the same name owns the maintenance of an earlier one")
	}
	if medik8sKind.owns(nm, obj) {
		t.Error("the medik8s kind owns a kubevirt.io maintenance")
	}
	if _, ok := medik8sKind.ownerKey(nm); ok {
		t.Error("the medik8s kind reads an owner key from a kubevirt.io maintenance")
	}
	nm.Annotations[pitstopv1alpha1.AnnotationOwner] = "default/"
	if _, ok := kubevirtKind.ownerKey(nm); ok {
		t.Error("an owner annotation without a name parsed")
	}
	if a, b := kubevirtKind.maintenanceName(types.NamespacedName{Namespace: "a-b", Name: "c"}), kubevirtKind.maintenanceName(types.NamespacedName{Namespace: "a", Name: "b-c"}); a == b {
		t.Errorf("two objects share the maintenance name %s", a)
	}

	m := medik8sKind.newObject()
	m.SetName("upgrade")
	if err := unstructured.SetNestedField(m.Object, "worker-1", "spec", "nodeName"); err != nil {
		t.Fatal(err)
	}
	ms, _ := medik8sKind.specOf(m)
	if got := medik8sKind.newMaintenance(m, ms); got.Name != "medik8s-upgrade" || got.Spec.NodeName != "worker-1" || len(got.OwnerReferences) != 1 {
		t.Errorf("medik8s maintenance %s for %s owners %v, want medik8s-upgrade for worker-1 owned by the object", got.Name, got.Spec.NodeName, got.OwnerReferences)
	}
}
