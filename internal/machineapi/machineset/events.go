package machineset

import (
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
)

// Event reasons on a MachineSet. The creation and deletion reasons are
// those of OpenShift's machine-api-operator (and of the ReplicaSet
// controller), so alerts and dashboards built on them keep working.
const (
	EventSuccessfulCreate     = "SuccessfulCreate"
	EventFailedCreate         = "FailedCreate"
	EventSuccessfulDelete     = "SuccessfulDelete"
	EventFailedDelete         = "FailedDelete"
	EventSuccessfulAdopt      = "SuccessfulAdopt"
	EventSuccessfulRelease    = "SuccessfulRelease"
	EventFailedClaim          = "FailedClaim"
	EventInvalidConfiguration = "InvalidConfiguration"
)

// Events are emitted after the write they report succeeded, or when it
// failed; the Machine is the related object.

func (r *Reconciler) eventCreated(ms *machinev1beta1.MachineSet, m *machinev1beta1.Machine) {
	r.recorder.Eventf(ms, m, corev1.EventTypeNormal, EventSuccessfulCreate, "Create", "Created machine %s", m.Name)
}

func (r *Reconciler) eventCreateFailed(ms *machinev1beta1.MachineSet, err error) {
	r.recorder.Eventf(ms, nil, corev1.EventTypeWarning, EventFailedCreate, "Create", "Error creating machine: %v", err)
}

func (r *Reconciler) eventDeleted(ms *machinev1beta1.MachineSet, m *machinev1beta1.Machine) {
	r.recorder.Eventf(ms, m, corev1.EventTypeNormal, EventSuccessfulDelete, "Delete", "Deleted machine %s", m.Name)
}

func (r *Reconciler) eventDeleteFailed(ms *machinev1beta1.MachineSet, m *machinev1beta1.Machine, err error) {
	r.recorder.Eventf(ms, m, corev1.EventTypeWarning, EventFailedDelete, "Delete", "Error deleting machine %s: %v", m.Name, err)
}

func (r *Reconciler) eventAdopted(ms *machinev1beta1.MachineSet, m *machinev1beta1.Machine) {
	r.recorder.Eventf(ms, m, corev1.EventTypeNormal, EventSuccessfulAdopt, "Adopt", "Adopted machine %s: it matches spec.selector and had no controller", m.Name)
}

func (r *Reconciler) eventReleased(ms *machinev1beta1.MachineSet, m *machinev1beta1.Machine) {
	r.recorder.Eventf(ms, m, corev1.EventTypeNormal, EventSuccessfulRelease, "Release", "Released machine %s: it no longer matches spec.selector", m.Name)
}

func (r *Reconciler) eventClaimFailed(ms *machinev1beta1.MachineSet, m *machinev1beta1.Machine, action string, err error) {
	r.recorder.Eventf(ms, m, corev1.EventTypeWarning, EventFailedClaim, action, "Error claiming machine %s: %v", m.Name, err)
}

// eventInvalid reports a spec the set cannot act on, when the error is new
// or has changed: a set that stays invalid is not reported again on every
// reconcile.
func (r *Reconciler) eventInvalid(ms *machinev1beta1.MachineSet, before, after machinev1beta1.MachineSetStatus) {
	if after.ErrorMessage == nil || before.ErrorMessage != nil && *before.ErrorMessage == *after.ErrorMessage {
		return
	}
	r.recorder.Eventf(ms, nil, corev1.EventTypeWarning, EventInvalidConfiguration, "Validate", "%s", *after.ErrorMessage)
}
