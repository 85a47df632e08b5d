// Package machineapi brings the Machine API (machine.openshift.io/v1beta1
// Machine, MachineSet, MachineHealthCheck) to any cluster: a Machine
// controller that creates and deletes instances through a provider,
// MachineSets that keep a replica count, nodelink that ties each Node to its
// Machine, and MachineHealthChecks that replace unhealthy machines. This
// package holds what those controllers share: the keys users already know
// from OpenShift, the Machine's conditions, and the rule by which pitstop
// finds the Machine of a Node before it acts on it (MachineOfNode).
package machineapi

import (
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

// Keys of the Machine API, as OpenShift's controllers use them.
const (
	// AnnotationMachine on a Node names its Machine as namespace/name.
	AnnotationMachine = "machine.openshift.io/machine"
	// AnnotationExcludeNodeDraining on a Machine (any value) skips the drain
	// when it is deleted.
	AnnotationExcludeNodeDraining = "machine.openshift.io/exclude-node-draining"
	// AnnotationDeleteMachine on a Machine (any value) makes it the first a
	// MachineSet removes when it scales down; AnnotationDeleteMachineLegacy
	// is the older key, honoured too.
	AnnotationDeleteMachine       = "machine.openshift.io/delete-machine"
	AnnotationDeleteMachineLegacy = "machine.openshift.io/cluster-api-delete-machine"
	// AnnotationInstanceState on a Machine is its instance's state in the
	// provider's words.
	AnnotationInstanceState = "machine.openshift.io/instance-state"
	// Labels on a Machine describing its instance.
	LabelRegion       = "machine.openshift.io/region"
	LabelZone         = "machine.openshift.io/zone"
	LabelInstanceType = "machine.openshift.io/instance-type"
	// AnnotationPaused on a MachineHealthCheck stops its remediation.
	AnnotationPaused = "cluster.x-k8s.io/paused"
)

// Condition returns the machine's condition of type t, or nil.
func Condition(conditions []machinev1beta1.Condition, t machinev1beta1.ConditionType) *machinev1beta1.Condition {
	for i := range conditions {
		if conditions[i].Type == t {
			return &conditions[i]
		}
	}
	return nil
}

// SetCondition sets the condition of c.Type in *conditions, keeping the
// last transition time unless the status changes. It reports whether
// anything changed.
func SetCondition(conditions *[]machinev1beta1.Condition, c machinev1beta1.Condition, now metav1.Time) bool {
	if old := Condition(*conditions, c.Type); old != nil {
		if old.Status == c.Status && old.Reason == c.Reason && old.Message == c.Message && old.Severity == c.Severity {
			return false
		}
		c.LastTransitionTime = old.LastTransitionTime
		if old.Status != c.Status {
			c.LastTransitionTime = now
		}
		*old = c
		return true
	}
	c.LastTransitionTime = now
	*conditions = append(*conditions, c)
	return true
}

// InPlannedMaintenance says whether a node is in maintenance pitstop
// planned: a NodeMaintenance for it exists and is not being deleted, or a
// profile holds it in-maintenance. A node that is NotReady then is being
// rebooted or reinstalled, not failing, and a health check leaves it be.
// maintenances are the NodeMaintenances of the node (any others are
// ignored).
func InPlannedMaintenance(node *corev1.Node, maintenances []pitstopv1alpha1.NodeMaintenance) bool {
	if node != nil && node.Labels[pitstopv1alpha1.LabelState] == string(pitstopv1alpha1.StateInMaintenance) {
		return true
	}
	for _, nm := range maintenances {
		if node != nil && nm.Spec.NodeName == node.Name && nm.DeletionTimestamp.IsZero() {
			return true
		}
	}
	return false
}
