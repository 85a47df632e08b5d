package medik8s

import (
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/maintenance"
)

// maintenanceName names the pitstop NodeMaintenance of the medik8s one
// called name: "medik8s-<name>", cut and hashed when too long.
func maintenanceName(name string) string { return maintenance.Name(maintenance.PrefixMedik8s, name) }

// newMaintenance is the pitstop NodeMaintenance for obj. Its drain is
// medik8s' drain: pods without a controller are evicted too (medik8s runs
// kubectl's drain with Force), DaemonSet pods stay, emptyDir pods go, each
// pod keeps its own grace period, refused evictions are retried every 5s
// and there is no overall timeout. These are pitstop's defaults except for
// unmanaged pods.
func newMaintenance(obj *unstructured.Unstructured, s spec) *pitstopv1alpha1.NodeMaintenance {
	return &pitstopv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{
			Name:   maintenanceName(obj.GetName()),
			Labels: map[string]string{pitstopv1alpha1.LabelSource: SourceMedik8s},
			// Controller and BlockOwnerDeletion: the garbage collector
			// removes it with its owner, and a foreground deletion of the
			// owner waits for it.
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(obj, GroupVersionKind)},
		},
		Spec: pitstopv1alpha1.NodeMaintenanceSpec{
			NodeName: s.NodeName,
			Reason:   s.Reason,
			Drain:    pitstopv1alpha1.DrainSpec{UnmanagedPods: pitstopv1alpha1.UnmanagedPodsDelete},
		},
	}
}

// isRefusal says whether the API server, or pitstop's webhook, refused a
// request for what it asked (invalid, forbidden), as opposed to failing
// for a while.
func isRefusal(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err)
}
