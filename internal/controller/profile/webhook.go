package profile

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/fleet"
	"github.com/pitstop-dev/pitstop/internal/plugin/check"
)

// WebhookPath is where the manager serves the MaintenanceProfile validating
// webhook.
const WebhookPath = "/validate-pitstop-dev-v1alpha1-maintenanceprofile"

// maxWebhookWork bounds the work of one review even when its caller waits
// longer: 30 s is the longest an API server waits for a webhook
// (timeoutSeconds at most 30), and a review that outlasts it is answered
// to nobody.
const maxWebhookWork = 30 * time.Second

// SetupWebhook registers the validating webhook: a profile is refused at
// admission when it would not compile with checks (unknown names in an
// expression, a syntax error, a bad time zone or date, a notification
// template past its bounds, a Prometheus URL outside
// checks.PrometheusURLs), with the profile, the field path and the
// problem. The controller never runs such a generation anyway. Compiling
// runs each template once on sample data, within notify's bounds.
//
// The webhook port can be reached by anything that can reach the pod, not
// only the API server, so the webhook does not rely on the API server
// having checked the object against the CRD first: the lists whose length
// bounds the work of compiling (checks, triggers, notifications, each
// state's lists, a transition's expression) are checked here, before any
// work, against the CRD's own limits (boundsErrors). And it stops
// compiling, and refuses, once the request's context is done: its caller
// gave up, or maxWebhookWork passed.
func SetupWebhook(mgr ctrl.Manager, checks check.Deps) error {
	return ctrl.NewWebhookManagedBy(mgr, &pitstopv1alpha1.MaintenanceProfile{}).
		WithValidator(&validator{deps: checks}).
		Complete()
}

type validator struct{ deps check.Deps }

func (v *validator) validate(ctx context.Context, p *pitstopv1alpha1.MaintenanceProfile) error {
	if errs := boundsErrors(p); len(errs) > 0 {
		return apierrors.NewInvalid(pitstopv1alpha1.GroupVersion.WithKind("MaintenanceProfile").GroupKind(), p.Name, errs)
	}
	ctx, cancel := context.WithTimeout(ctx, maxWebhookWork)
	defer cancel()
	if _, err := fleet.CompileContext(ctx, p, v.deps); err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return apierrors.NewTimeoutError(fmt.Sprintf("MaintenanceProfile %s was not checked in time, and is refused: %v", p.Name, err), 0)
		}
		return apierrors.NewBadRequest(err.Error())
	}
	return nil
}

// Limits of the CRD (its MaxItems and MaxLength markers) that bound the
// work of compiling a profile.
const (
	maxChecks           = 64
	maxTriggers         = 64
	maxNotifications    = 32
	maxStateList        = 16 // a state's enter, transitions and notify; a transition's triggers
	maxExpressionLength = 4096
	maxMailTo           = 32
)

// boundsErrors checks the lengths the CRD bounds and compiling depends on.
func boundsErrors(p *pitstopv1alpha1.MaintenanceProfile) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	tooMany := func(path *field.Path, n, limit int) {
		if n > limit {
			errs = append(errs, field.TooMany(path, n, limit))
		}
	}
	tooMany(spec.Child("checks"), len(p.Spec.Checks), maxChecks)
	tooMany(spec.Child("triggers"), len(p.Spec.Triggers), maxTriggers)
	tooMany(spec.Child("notifications"), len(p.Spec.Notifications), maxNotifications)
	for i, n := range p.Spec.Notifications {
		if n.Mail != nil {
			tooMany(spec.Child("notifications").Index(i).Child("mail", "to"), len(n.Mail.To), maxMailTo)
		}
	}
	for _, st := range []struct {
		field string
		spec  pitstopv1alpha1.StateSpec
	}{
		{"operational", p.Spec.States.Operational},
		{"maintenanceRequired", p.Spec.States.MaintenanceRequired},
		{"inMaintenance", p.Spec.States.InMaintenance},
	} {
		path := spec.Child("states", st.field)
		tooMany(path.Child("enter"), len(st.spec.Enter), maxStateList)
		tooMany(path.Child("transitions"), len(st.spec.Transitions), maxStateList)
		tooMany(path.Child("notify"), len(st.spec.Notify), maxStateList)
		for i, t := range st.spec.Transitions {
			tp := path.Child("transitions").Index(i)
			tooMany(tp.Child("triggers"), len(t.Triggers), maxStateList)
			if len(t.Check) > maxExpressionLength {
				errs = append(errs, field.TooLong(tp.Child("check"), "", maxExpressionLength))
			}
		}
	}
	return errs
}

// ValidateCreate refuses a profile that does not compile.
func (v *validator) ValidateCreate(ctx context.Context, p *pitstopv1alpha1.MaintenanceProfile) (admission.Warnings, error) {
	return nil, v.validate(ctx, p)
}

// ValidateUpdate refuses an update that does not compile; the running
// generation stays.
func (v *validator) ValidateUpdate(ctx context.Context, _, p *pitstopv1alpha1.MaintenanceProfile) (admission.Warnings, error) {
	return nil, v.validate(ctx, p)
}

// ValidateDelete accepts every delete.
func (v *validator) ValidateDelete(context.Context, *pitstopv1alpha1.MaintenanceProfile) (admission.Warnings, error) {
	return nil, nil
}
