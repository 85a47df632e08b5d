package healthcheck

import (
	"context"
	"fmt"
	"strings"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pitstop-dev/pitstop/internal/machineapi"
)

// Reasons of the RemediationAllowed condition besides the
// machine-api-operator's TooManyUnhealthy
// (machinev1beta1.TooManyUnhealthyReason).
const (
	// ReasonWithinMaxUnhealthy: no more Machines are unhealthy than
	// maxUnhealthy allows, so unhealthy ones are remediated.
	ReasonWithinMaxUnhealthy = "WithinMaxUnhealthy"
	// ReasonPaused: the cluster.x-k8s.io/paused annotation stops
	// remediation.
	ReasonPaused = "Paused"
)

// annotationRemediationStrategy on a MachineHealthCheck asks for the
// Machine API's old bare-metal reboot remediation.
const annotationRemediationStrategy = "machine.openshift.io/remediation-strategy"

// holdReason says why the health check remediates nothing even when it may
// (the pause annotation, or a remediation pitstop does not run), or "".
// External remediation is refused rather than replaced by deletion: a user
// who asked for a reboot must not get a deleted machine.
func holdReason(mhc *machinev1beta1.MachineHealthCheck) string {
	switch {
	case mhc.Spec.RemediationTemplate != nil:
		return fmt.Sprintf("spec.remediationTemplate (%s %s) asks for external remediation, which pitstop does not run; no machine is deleted instead",
			mhc.Spec.RemediationTemplate.Kind, mhc.Spec.RemediationTemplate.Name)
	case mhc.Annotations[annotationRemediationStrategy] != "":
		return fmt.Sprintf("the %s annotation asks for %q remediation, which pitstop does not run; no machine is deleted instead",
			annotationRemediationStrategy, mhc.Annotations[annotationRemediationStrategy])
	}
	if _, paused := mhc.Annotations[machineapi.AnnotationPaused]; paused {
		return "remediation is paused by the " + machineapi.AnnotationPaused + " annotation"
	}
	return ""
}

// messageLimit is how many Machines a condition message or Event names.
const messageLimit = 5

// setStatus writes the assessment into status: the counts, and the
// RemediationAllowed condition saying whether unhealthy Machines are
// remediated and why not.
func setStatus(status *machinev1beta1.MachineHealthCheckStatus, a assessment, hold string, now metav1.Time) {
	expected, healthy := a.expected(), a.currentHealthy()
	status.ExpectedMachines = &expected
	status.CurrentHealthy = &healthy
	// At most maxUnhealthy, which is an int32 or a share of the Machines.
	status.RemediationsAllowed = int32(a.remediationsAllowed())
	machineapi.SetCondition(&status.Conditions, remediationAllowedCondition(a, hold), now)
}

// remediationAllowedCondition is the RemediationAllowed condition for the
// assessment; hold, if not empty, says why nothing is remediated anyway.
// The storm guard comes before the hold: it is the more urgent news.
func remediationAllowedCondition(a assessment, hold string) machinev1beta1.Condition {
	c := machinev1beta1.Condition{Type: machinev1beta1.RemediationAllowedCondition}
	switch {
	case a.tooManyUnhealthy():
		c.Status, c.Severity, c.Reason = corev1.ConditionFalse, machinev1beta1.ConditionSeverityWarning, machinev1beta1.TooManyUnhealthyReason
		failing := ""
		if n := a.failing(); n > 0 {
			failing = fmt.Sprintf(" and %d more failing within their timeouts", n)
		}
		c.Message = fmt.Sprintf("%d of %d machines are unhealthy%s, more than maxUnhealthy %s allows (%d); none is remediated until fewer are: %s",
			a.unhealthy(), a.expected(), failing, a.maxUnhealthySpec, a.maxUnhealthy, names(a.with(unhealthy), messageLimit))
	case hold != "":
		c.Status, c.Severity, c.Reason = corev1.ConditionFalse, machinev1beta1.ConditionSeverityInfo, ReasonPaused
		c.Message = hold + "; " + counts(a)
	default:
		c.Status, c.Reason = corev1.ConditionTrue, ReasonWithinMaxUnhealthy
		c.Message = counts(a)
	}
	if held := a.with(inMaintenance); len(held) > 0 {
		c.Message += fmt.Sprintf("; %d not remediated while their nodes are in planned maintenance (a reboot is not a failure): %s",
			len(held), names(held, messageLimit))
	}
	return c
}

// counts says how many Machines are unhealthy against how many may be.
func counts(a assessment) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d machines unhealthy, maxUnhealthy %s allows %d", a.unhealthy(), a.expected(), a.maxUnhealthySpec, a.maxUnhealthy)
	if bad := a.with(unhealthy); len(bad) > 0 {
		b.WriteString(": " + names(bad, messageLimit))
	}
	return b.String()
}

// patchStatus writes the status once, only when it changed, with
// optimistic locking so that a reconcile working from a stale copy cannot
// overwrite a newer status.
func (r *Reconciler) patchStatus(ctx context.Context, before, after *machinev1beta1.MachineHealthCheck) error {
	if equality.Semantic.DeepEqual(before.Status, after.Status) {
		return nil
	}
	if err := r.client.Status().Patch(ctx, after, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("patching status of MachineHealthCheck %s: %w", klog.KObj(after), err)
	}
	return nil
}
