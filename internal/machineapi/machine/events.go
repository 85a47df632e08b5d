package machine

import (
	"strings"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/machineapi/provider"
)

// Condition reasons of this controller beyond the Machine API's own.
const (
	ReasonProviderNotServed      = "ProviderNotServed"
	ReasonDrainSkipped           = "DrainSkipped"
	ReasonDrained                = "Drained"
	ReasonDraining               = "Draining"
	ReasonWaitingForControlPlane = "WaitingForControlPlaneDrain"
	ReasonNoHooks                = "NoHooksPresent"
)

// Events: each pairs with a phase or condition change above.
func (r *Reconciler) eventCreated(m *machinev1beta1.Machine, inst *provider.Instance) {
	r.recorder.Eventf(m, nil, corev1.EventTypeNormal, "Created", "Create", "created instance %s (%s)", inst.ID, inst.ProviderID)
}

func (r *Reconciler) eventCreateFailed(m *machinev1beta1.Machine, err error) {
	r.recorder.Eventf(m, nil, corev1.EventTypeWarning, "FailedCreate", "Create", "creating the instance: %v", err)
}

func (r *Reconciler) eventFailed(m *machinev1beta1.Machine, reason machinev1beta1.MachineStatusError, err error) {
	r.recorder.Eventf(m, nil, corev1.EventTypeWarning, "Failed"+string(reason), "Fail", "machine failed: %v", err)
}

func (r *Reconciler) eventProviderNotServed(m *machinev1beta1.Machine, err error) {
	r.recorder.Eventf(m, nil, corev1.EventTypeWarning, ReasonProviderNotServed, "Create", "%v", err)
}

func (r *Reconciler) eventDrainSkipped(m *machinev1beta1.Machine, node *corev1.Node) {
	r.recorder.Eventf(m, node, corev1.EventTypeNormal, "DrainSkipped", "Drain", "drain of node %s skipped (%s)", node.Name, "machine.openshift.io/exclude-node-draining")
}

func (r *Reconciler) eventDrainBlocked(m *machinev1beta1.Machine, hooks []machinev1beta1.LifecycleHook) {
	r.recorder.Eventf(m, nil, corev1.EventTypeNormal, "DrainBlocked", "Drain", "drain waits for preDrain hooks: %s", hookNames(hooks))
}

func (r *Reconciler) eventDrainStarted(m *machinev1beta1.Machine, node *corev1.Node, nm *pitstopv1alpha1.NodeMaintenance) {
	r.recorder.Eventf(m, nm, corev1.EventTypeNormal, "DrainProceeds", "Drain", "draining node %s through NodeMaintenance %s", node.Name, nm.Name)
}

func (r *Reconciler) eventDrained(m *machinev1beta1.Machine, node *corev1.Node, nm *pitstopv1alpha1.NodeMaintenance) {
	r.recorder.Eventf(m, nm, corev1.EventTypeNormal, "DrainSucceeded", "Drain", "node %s drained", node.Name)
}

func (r *Reconciler) eventTerminationBlocked(m *machinev1beta1.Machine, hooks []machinev1beta1.LifecycleHook) {
	r.recorder.Eventf(m, nil, corev1.EventTypeNormal, "TerminationBlocked", "Delete", "instance deletion waits for preTerminate hooks: %s", hookNames(hooks))
}

func (r *Reconciler) eventDeleteFailed(m *machinev1beta1.Machine, err error) {
	r.recorder.Eventf(m, nil, corev1.EventTypeWarning, "FailedDelete", "Delete", "deleting the instance: %v", err)
}

func (r *Reconciler) eventDeleted(m *machinev1beta1.Machine) {
	r.recorder.Eventf(m, nil, corev1.EventTypeNormal, "Deleted", "Delete", "instance and node deleted")
}

func hookNames(hooks []machinev1beta1.LifecycleHook) string {
	names := make([]string, len(hooks))
	for i, h := range hooks {
		names[i] = h.Name
	}
	return strings.Join(names, ", ")
}
