package profile

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/plugin/check"
	"github.com/pitstop-dev/pitstop/internal/scheme"
)

// review posts an AdmissionReview creating p straight to the profile
// webhook's handler, as anything that reaches the webhook port can,
// with the request's context ctx, and returns the answer.
func review(t *testing.T, ctx context.Context, p *pitstopv1alpha1.MaintenanceProfile) *admissionv1.AdmissionResponse {
	t.Helper()
	p.APIVersion, p.Kind = pitstopv1alpha1.GroupVersion.String(), "MaintenanceProfile"
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       "review-1",
			Kind:      metav1.GroupVersionKind{Group: pitstopv1alpha1.GroupVersion.Group, Version: pitstopv1alpha1.GroupVersion.Version, Kind: "MaintenanceProfile"},
			Resource:  metav1.GroupVersionResource{Group: pitstopv1alpha1.GroupVersion.Group, Version: pitstopv1alpha1.GroupVersion.Version, Resource: "maintenanceprofiles"},
			Name:      p.Name,
			Operation: admissionv1.Create,
			Object:    runtime.RawExtension{Raw: raw},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	handler := admission.WithValidator(scheme.New(), &validator{deps: check.Deps{}})
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, WebhookPath, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, req)
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
		t.Fatalf("the webhook answered %d %q: %v", rec.Code, rec.Body.String(), err)
	}
	return out.Response
}

// webhookProfile is a valid profile with n notifications, each a webhook
// whose message is rendered on sample data when the profile compiles.
func webhookProfile(name string, n int) *pitstopv1alpha1.MaintenanceProfile {
	p := &pitstopv1alpha1.MaintenanceProfile{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for i := range n {
		p.Spec.Notifications = append(p.Spec.Notifications, pitstopv1alpha1.NotificationInstance{
			Name:     fmt.Sprintf("n%d", i),
			Schedule: pitstopv1alpha1.NotificationSchedule{Oneshot: &pitstopv1alpha1.OneshotSchedule{}},
			Webhook: &pitstopv1alpha1.WebhookNotification{
				URL:     pitstopv1alpha1.SecretKeyRef{Name: "hook", Key: "url"},
				Message: `{{range 1000}}{{$x := $.Node.String}}{{end}}node {{.Node.Name}} is {{.State}}`,
			},
		})
		p.Spec.States.InMaintenance.Notify = append(p.Spec.States.InMaintenance.Notify, fmt.Sprintf("n%d", i))
	}
	if n > maxStateList {
		p.Spec.States.InMaintenance.Notify = p.Spec.States.InMaintenance.Notify[:maxStateList]
	}
	return p
}

// TestUntrustedWebhookReviewsAreBoundedWithoutTheAPIServer: AdmissionReviews
// posted straight to the profile webhook, past the API server and so past
// the CRD's limits, are refused before any work when a list that bounds
// compiling is longer than the CRD allows (33 notifications, 65 checks, 17
// transitions, an expression over 4096 bytes), naming the field and the
// limit; a profile within them is allowed. A review whose request is given
// up is refused, without compiling what is left.
func TestUntrustedWebhookReviewsAreBoundedWithoutTheAPIServer(t *testing.T) {
	if resp := review(t, t.Context(), webhookProfile("within", maxNotifications)); !resp.Allowed {
		t.Fatalf("a profile with %d notifications was refused: %v", maxNotifications, resp.Result)
	}
	tooManyChecks := webhookProfile("checks", 0)
	for i := range maxChecks + 1 {
		tooManyChecks.Spec.Checks = append(tooManyChecks.Spec.Checks, pitstopv1alpha1.CheckInstance{Name: fmt.Sprintf("c%d", i), HasLabel: &pitstopv1alpha1.KeyValueCheck{Key: "x"}})
	}
	tooManyTransitions := webhookProfile("transitions", 0)
	for range maxStateList + 1 {
		tooManyTransitions.Spec.States.Operational.Transitions = append(tooManyTransitions.Spec.States.Operational.Transitions, pitstopv1alpha1.Transition{Next: pitstopv1alpha1.StateMaintenanceRequired})
	}
	longExpression := webhookProfile("expression", 0)
	longExpression.Spec.States.Operational.Transitions = []pitstopv1alpha1.Transition{{Check: strings.Repeat("(", 5000), Next: pitstopv1alpha1.StateMaintenanceRequired}}
	for _, tc := range []struct {
		profile *pitstopv1alpha1.MaintenanceProfile
		want    string
	}{
		{webhookProfile("notifications", maxNotifications+1), "spec.notifications: Too many: 33: must have at most 32 items"},
		{tooManyChecks, "spec.checks: Too many: 65: must have at most 64 items"},
		{tooManyTransitions, "spec.states.operational.transitions: Too many: 17: must have at most 16 items"},
		{longExpression, "spec.states.operational.transitions[0].check: Too long: may not be more than 4096 bytes"},
	} {
		start := time.Now()
		resp := review(t, t.Context(), tc.profile)
		if resp.Allowed || resp.Result == nil || !strings.Contains(resp.Result.Message, tc.want) {
			t.Errorf("profile %s: allowed %v, %v; want refused with %q", tc.profile.Name, resp.Allowed, resp.Result, tc.want)
		}
		if !strings.Contains(resp.Result.Message, "MaintenanceProfile.pitstop.dev \""+tc.profile.Name+"\" is invalid") {
			t.Errorf("profile %s: the refusal does not name the profile: %s", tc.profile.Name, resp.Result.Message)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("profile %s: refused after %s, want before any compiling", tc.profile.Name, d)
		}
	}

	// The caller gave up: nothing is compiled, and the profile is refused.
	gone, cancel := context.WithCancel(t.Context())
	cancel()
	resp := review(t, gone, webhookProfile("gone", maxNotifications))
	if resp.Allowed || resp.Result == nil || !strings.Contains(resp.Result.Message, "was not checked in time") {
		t.Errorf("a review whose request was given up: allowed %v, %v; want refused as not checked in time", resp.Allowed, resp.Result)
	}
}
