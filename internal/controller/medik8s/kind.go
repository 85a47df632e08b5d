package medik8s

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/maintenance"
)

// KubevirtGroupVersionKind is the NodeMaintenance of the medik8s operator's
// first releases, still in its README: namespaced, named after its node,
// with spec.reason only.
var KubevirtGroupVersionKind = schema.GroupVersionKind{Group: "kubevirt.io", Version: "v1alpha3", Kind: "NodeMaintenance"}

// KubevirtCRDName is the name of the CustomResourceDefinition that serves
// KubevirtGroupVersionKind.
const KubevirtCRDName = "nodemaintenances.kubevirt.io"

// KubevirtWebhookPath is where pitstop judges KubevirtGroupVersionKind
// objects at admission.
const KubevirtWebhookPath = "/validate-kubevirt-io-v1alpha3-nodemaintenance"

// kind is one NodeMaintenance API of the medik8s operator's lineage: what
// tells the two apart, and nothing else. Both are reconciled the same way.
type kind struct {
	gvk     schema.GroupVersionKind
	crdName string
	// namespaced objects are named after their node and own pitstop's
	// NodeMaintenance through annotations; the others name the node in
	// spec.nodeName and own it through an owner reference.
	namespaced bool
	// source is the LabelSource of pitstop's NodeMaintenances for it, and
	// prefix starts their names.
	source, prefix string
	// controllerName names its controller in logs and metrics.
	controllerName string
	webhookPath    string
}

var (
	medik8sKind = kind{
		gvk: GroupVersionKind, crdName: CRDName,
		source: SourceMedik8s, prefix: maintenance.PrefixMedik8s,
		controllerName: "medik8s-nodemaintenance", webhookPath: WebhookPath,
	}
	kubevirtKind = kind{
		gvk: KubevirtGroupVersionKind, crdName: KubevirtCRDName, namespaced: true,
		source: pitstopv1alpha1.SourceKubevirt, prefix: maintenance.PrefixKubevirt,
		controllerName: "kubevirt-nodemaintenance", webhookPath: KubevirtWebhookPath,
	}
	// kinds are both, the one the compatibility requires first.
	kinds = []kind{medik8sKind, kubevirtKind}
)

// newObject returns an empty object of the kind.
func (k kind) newObject() *unstructured.Unstructured {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(k.gvk)
	return obj
}

// newList returns an empty list of the kind.
func (k kind) newList() *unstructured.UnstructuredList {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(k.gvk.GroupVersion().WithKind(k.gvk.Kind + "List"))
	return list
}

// describe names obj for messages: "NodeMaintenance <name>", with its
// namespace and API for the namespaced kind.
func (k kind) describe(obj client.Object) string {
	if k.namespaced {
		return fmt.Sprintf("%s NodeMaintenance %s/%s", k.gvk.GroupVersion(), obj.GetNamespace(), obj.GetName())
	}
	return "NodeMaintenance " + obj.GetName()
}

// specOf reads what pitstop needs of obj's spec; the namespaced kind's
// node is its name.
func (k kind) specOf(obj *unstructured.Unstructured) (spec, error) {
	var s spec
	if err := fromField(obj, "spec", &s); err != nil {
		return s, err
	}
	if k.namespaced {
		s.NodeName = obj.GetName()
	}
	return s, nil
}

// maintenanceName names pitstop's NodeMaintenance for the object key:
// "medik8s-<name>", or "kubevirt-<namespace>.<name>", cut and hashed when
// too long.
func (k kind) maintenanceName(key types.NamespacedName) string {
	if k.namespaced {
		return maintenance.Name(k.prefix, key.Namespace+"."+key.Name)
	}
	return maintenance.Name(k.prefix, key.Name)
}

// newMaintenance is the pitstop NodeMaintenance for obj. Its drain is
// medik8s' drain: pods without a controller are evicted too (medik8s runs
// kubectl's drain with Force), DaemonSet pods stay, emptyDir pods go, each
// pod keeps its own grace period, refused evictions are retried every 5s
// and there is no overall timeout. These are pitstop's defaults except for
// unmanaged pods.
func (k kind) newMaintenance(obj *unstructured.Unstructured, s spec) *pitstopv1alpha1.NodeMaintenance {
	nm := &pitstopv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{
			Name:   k.maintenanceName(client.ObjectKeyFromObject(obj)),
			Labels: map[string]string{pitstopv1alpha1.LabelSource: k.source},
		},
		Spec: pitstopv1alpha1.NodeMaintenanceSpec{
			NodeName: s.NodeName,
			Reason:   s.Reason,
			Drain:    pitstopv1alpha1.DrainSpec{UnmanagedPods: pitstopv1alpha1.UnmanagedPodsDelete},
		},
	}
	if k.namespaced {
		nm.Annotations = map[string]string{
			pitstopv1alpha1.AnnotationOwner:    obj.GetNamespace() + "/" + obj.GetName(),
			pitstopv1alpha1.AnnotationOwnerUID: string(obj.GetUID()),
		}
		return nm
	}
	// Controller and BlockOwnerDeletion: the garbage collector removes it
	// with its owner, and a foreground deletion of the owner waits for it.
	nm.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(obj, k.gvk)}
	return nm
}

// owns says nm was made for obj (this very object, not an earlier one of
// the same name).
func (k kind) owns(nm *pitstopv1alpha1.NodeMaintenance, obj client.Object) bool {
	if !k.namespaced {
		return metav1.IsControlledBy(nm, obj)
	}
	return nm.Labels[pitstopv1alpha1.LabelSource] == k.source &&
		nm.Annotations[pitstopv1alpha1.AnnotationOwner] == obj.GetNamespace()+"/"+obj.GetName() &&
		nm.Annotations[pitstopv1alpha1.AnnotationOwnerUID] == string(obj.GetUID())
}

// ownerKey is the object of the namespaced kind nm was made for, if any.
func (k kind) ownerKey(nm client.Object) (types.NamespacedName, bool) {
	if nm.GetLabels()[pitstopv1alpha1.LabelSource] != k.source {
		return types.NamespacedName{}, false
	}
	ns, name, ok := strings.Cut(nm.GetAnnotations()[pitstopv1alpha1.AnnotationOwner], "/")
	return types.NamespacedName{Namespace: ns, Name: name}, ok && ns != "" && name != ""
}
