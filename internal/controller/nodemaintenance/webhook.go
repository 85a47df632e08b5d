package nodemaintenance

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/maintenance"
)

// WebhookPath is where the manager serves the NodeMaintenance validating
// webhook (controller-runtime's naming for the type).
const WebhookPath = "/validate-pitstop-dev-v1alpha1-nodemaintenance"

// SetupWebhook registers the validating webhook with the manager's webhook
// server.
func SetupWebhook(mgr ctrl.Manager, allowSingleControlPlane bool) error {
	return ctrl.NewWebhookManagedBy(mgr, &pitstopv1alpha1.NodeMaintenance{}).
		WithValidator(&validator{reader: mgr.GetClient(), live: mgr.GetAPIReader(), allowSingle: allowSingleControlPlane}).
		Complete()
}

// validator refuses, at admission, the NodeMaintenances that could never
// proceed: for a node that does not exist, for a node another one already
// holds, and for a control-plane node whose loss would break quorum. The
// controller checks the last two again, so a refusal missed here (webhook
// down, two creates at the same instant) is still caught.
type validator struct {
	reader client.Reader
	// live reads the etcd members and guard, which are not cached.
	live        client.Reader
	allowSingle bool
}

var nodeMaintenanceResource = pitstopv1alpha1.GroupVersion.WithResource("nodemaintenances").GroupResource()

// ValidateCreate checks a new NodeMaintenance against the cluster.
func (v *validator) ValidateCreate(ctx context.Context, nm *pitstopv1alpha1.NodeMaintenance) (admission.Warnings, error) {
	if err := validateSpec(nm); err != nil {
		return nil, err
	}
	nodeName := nm.Spec.NodeName
	node := &corev1.Node{}
	if err := v.reader.Get(ctx, types.NamespacedName{Name: nodeName}, node); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, apierrors.NewInvalid(pitstopv1alpha1.GroupVersion.WithKind("NodeMaintenance").GroupKind(), nm.Name,
				field.ErrorList{field.Invalid(field.NewPath("spec", "nodeName"), nodeName, fmt.Sprintf("node %s does not exist", nodeName))})
		}
		return nil, fmt.Errorf("reading node %s: %w", nodeName, err)
	}
	existing := &pitstopv1alpha1.NodeMaintenanceList{}
	if err := v.reader.List(ctx, existing); err != nil {
		return nil, fmt.Errorf("listing NodeMaintenances: %w", err)
	}
	for _, o := range existing.Items {
		if o.Spec.NodeName == nodeName && o.Name != nm.Name && o.DeletionTimestamp.IsZero() {
			return nil, apierrors.NewForbidden(nodeMaintenanceResource, nm.Name,
				fmt.Errorf("node %s is already in maintenance by NodeMaintenance %s", nodeName, o.Name))
		}
	}
	if maintenance.IsControlPlane(node) {
		why, err := maintenance.QuorumRefusalAmong(ctx, v.reader, v.live, nm, existing.Items, v.allowSingle)
		if err != nil {
			return nil, err
		}
		if why != "" {
			return nil, apierrors.NewForbidden(nodeMaintenanceResource, nm.Name, errors.New(why))
		}
	}
	return nil, nil
}

// ValidateUpdate checks the spec again; spec.nodeName's immutability is a
// CEL rule in the CRD, checked by the API server itself.
func (v *validator) ValidateUpdate(_ context.Context, _, nm *pitstopv1alpha1.NodeMaintenance) (admission.Warnings, error) {
	return nil, validateSpec(nm)
}

// validateSpec checks what the CRD's schema cannot: that skipPodsSelector
// is a selector.
func validateSpec(nm *pitstopv1alpha1.NodeMaintenance) error {
	if errs := nm.Spec.Drain.DurationErrors(field.NewPath("spec", "drain")); len(errs) > 0 {
		return apierrors.NewInvalid(pitstopv1alpha1.GroupVersion.WithKind("NodeMaintenance").GroupKind(), nm.Name, errs)
	}
	if sel := nm.Spec.Drain.SkipPodsSelector; sel != nil {
		if _, err := metav1.LabelSelectorAsSelector(sel); err != nil {
			return apierrors.NewInvalid(pitstopv1alpha1.GroupVersion.WithKind("NodeMaintenance").GroupKind(), nm.Name,
				field.ErrorList{field.Invalid(field.NewPath("spec", "drain", "skipPodsSelector"), sel.String(), err.Error())})
		}
	}
	return nil
}

// ValidateDelete accepts every delete: deleting restores the node.
func (v *validator) ValidateDelete(context.Context, *pitstopv1alpha1.NodeMaintenance) (admission.Warnings, error) {
	return nil, nil
}
