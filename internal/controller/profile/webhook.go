package profile

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/fleet"
	"github.com/pitstop-dev/pitstop/internal/plugin/check"
)

// WebhookPath is where the manager serves the MaintenanceProfile validating
// webhook.
const WebhookPath = "/validate-pitstop-dev-v1alpha1-maintenanceprofile"

// SetupWebhook registers the validating webhook: a profile is refused at
// admission when it would not compile with checks (unknown names in an
// expression, a syntax error, a bad time zone or date, a notification
// template past its bounds, a Prometheus URL outside
// checks.PrometheusURLs), with the profile, the field path and the
// problem. The controller never runs such a generation anyway. Compiling
// runs each template once on sample data, within notify's bounds, so a
// template cannot hold the webhook past its timeout.
func SetupWebhook(mgr ctrl.Manager, checks check.Deps) error {
	return ctrl.NewWebhookManagedBy(mgr, &pitstopv1alpha1.MaintenanceProfile{}).
		WithValidator(&validator{deps: checks}).
		Complete()
}

type validator struct{ deps check.Deps }

func (v *validator) validate(p *pitstopv1alpha1.MaintenanceProfile) error {
	if _, err := fleet.Compile(p, v.deps); err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	return nil
}

// ValidateCreate refuses a profile that does not compile.
func (v *validator) ValidateCreate(_ context.Context, p *pitstopv1alpha1.MaintenanceProfile) (admission.Warnings, error) {
	return nil, v.validate(p)
}

// ValidateUpdate refuses an update that does not compile; the running
// generation stays.
func (v *validator) ValidateUpdate(_ context.Context, _, p *pitstopv1alpha1.MaintenanceProfile) (admission.Warnings, error) {
	return nil, v.validate(p)
}

// ValidateDelete accepts every delete.
func (v *validator) ValidateDelete(context.Context, *pitstopv1alpha1.MaintenanceProfile) (admission.Warnings, error) {
	return nil, nil
}
