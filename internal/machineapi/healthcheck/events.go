package healthcheck

import (
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"

	"github.com/pitstop-dev/pitstop/internal/machineapi"
)

// Event reasons. The first four are the machine-api-operator's, so alerts
// built on them keep working.
const (
	// EventMachineDeleted: an unhealthy Machine was deleted, for its
	// MachineSet to replace.
	EventMachineDeleted = "MachineDeleted"
	// EventMachineDeletionFailed: deleting an unhealthy Machine failed; it
	// is retried.
	EventMachineDeletionFailed = "MachineDeletionFailed"
	// EventSkippedNoController: an unhealthy Machine is left alone because
	// no MachineSet controls it, so nothing would replace it.
	EventSkippedNoController = "SkippedNoController"
	// EventRemediationRestricted: more Machines are unhealthy than
	// maxUnhealthy allows, so none is remediated.
	EventRemediationRestricted = "RemediationRestricted"
	// EventSkippedPlannedMaintenance: a Machine that looks unhealthy is left
	// alone because its node is in maintenance pitstop planned.
	EventSkippedPlannedMaintenance = "SkippedPlannedMaintenance"
)

// Events about a Machine name the health check as related object. Those
// about a Machine's remediation are emitted by every reconcile that decides
// it; the Event recorder folds repeats into one Event's series.

func (r *Reconciler) eventDeleted(mhc *machinev1beta1.MachineHealthCheck, t assessed) {
	r.recorder.Eventf(t.machine, mhc, corev1.EventTypeNormal, EventMachineDeleted, "Remediate",
		"deleted unhealthy machine, for its MachineSet to replace: %s", t.health.reason)
}

func (r *Reconciler) eventDeletionFailed(mhc *machinev1beta1.MachineHealthCheck, t assessed, err error) {
	r.recorder.Eventf(t.machine, mhc, corev1.EventTypeWarning, EventMachineDeletionFailed, "Remediate",
		"deleting unhealthy machine failed, will retry: %s", truncate(err.Error(), 500))
}

func (r *Reconciler) eventSkippedNoController(mhc *machinev1beta1.MachineHealthCheck, t assessed) {
	r.recorder.Eventf(t.machine, mhc, corev1.EventTypeWarning, EventSkippedNoController, "Remediate",
		"machine is unhealthy (%s) but no MachineSet controls it to replace it; it is not remediated", t.health.reason)
}

func (r *Reconciler) eventSkippedPlannedMaintenance(mhc *machinev1beta1.MachineHealthCheck, t assessed) {
	r.recorder.Eventf(t.machine, mhc, corev1.EventTypeNormal, EventSkippedPlannedMaintenance, "Remediate",
		"machine is not remediated: %s", t.health.reason)
}

// eventRestricted reports the storm guard when the RemediationAllowed
// condition has just turned to TooManyUnhealthy, or its counts changed,
// once the status saying so is written.
func (r *Reconciler) eventRestricted(mhc *machinev1beta1.MachineHealthCheck, before, after []machinev1beta1.Condition) bool {
	c := machineapi.Condition(after, machinev1beta1.RemediationAllowedCondition)
	if c == nil || c.Reason != machinev1beta1.TooManyUnhealthyReason {
		return false
	}
	if old := machineapi.Condition(before, machinev1beta1.RemediationAllowedCondition); old != nil && old.Status == c.Status && old.Reason == c.Reason && old.Message == c.Message {
		return false
	}
	r.recorder.Eventf(mhc, nil, corev1.EventTypeWarning, EventRemediationRestricted, "Remediate", "%s", truncate(c.Message, 900))
	return true
}
