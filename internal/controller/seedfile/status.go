package seedfile

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

// maxConditionMessage bounds the condition's message; the importer's
// errors are bounded already (ten problems at most).
const maxConditionMessage = 4096

// setCurrentCondition is the status apply that sets the profile's
// SeedConfigCurrent condition, and nothing else: conditions are a list
// map keyed by type, so server-side apply merges this one entry with the
// profile controller's Valid and Ready, whichever writes last. Its
// lastTransitionTime is kept while the status stays.
func setCurrentCondition(p *pitstopv1alpha1.MaintenanceProfile, status metav1.ConditionStatus, reason, message string, generation int64, now time.Time) *unstructured.Unstructured {
	since := now
	if had := meta.FindStatusCondition(p.Status.Conditions, pitstopv1alpha1.ConditionSeedConfigCurrent); had != nil && had.Status == status {
		since = had.LastTransitionTime.Time
	}
	message = cut(message, maxConditionMessage)
	u := &unstructured.Unstructured{Object: map[string]any{
		"status": map[string]any{"conditions": []any{map[string]any{
			"type":               pitstopv1alpha1.ConditionSeedConfigCurrent,
			"status":             string(status),
			"reason":             reason,
			"message":            message,
			"observedGeneration": generation,
			"lastTransitionTime": since.UTC().Format(time.RFC3339),
		}}},
	}}
	u.SetAPIVersion(pitstopv1alpha1.GroupVersion.String())
	u.SetKind("MaintenanceProfile")
	u.SetName(p.Name)
	return u
}

// isCurrent says the profile's SeedConfigCurrent condition is True.
func isCurrent(p *pitstopv1alpha1.MaintenanceProfile) bool {
	return meta.IsStatusConditionTrue(p.Status.Conditions, pitstopv1alpha1.ConditionSeedConfigCurrent)
}

// writeCondition applies the condition to the profile's status.
func (c *Controller) writeCondition(ctx context.Context, p *pitstopv1alpha1.MaintenanceProfile, status metav1.ConditionStatus, reason, message string, generation int64) error {
	obj := setCurrentCondition(p, status, reason, message, generation, c.opts.Clock.Now())
	err := c.client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(FieldManager), client.ForceOwnership)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("writing the %s condition of MaintenanceProfile %s: %w", pitstopv1alpha1.ConditionSeedConfigCurrent, p.Name, err)
	}
	return nil
}
