package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// UnmanagedPodPolicy says what a drain does with pods that no controller owns.
// +kubebuilder:validation:Enum=Block;Delete
type UnmanagedPodPolicy string

const (
	// UnmanagedPodsBlock leaves pods without a controller in place and reports
	// them as blockers: nothing would recreate them after an eviction.
	UnmanagedPodsBlock UnmanagedPodPolicy = "Block"
	// UnmanagedPodsDelete evicts pods without a controller like any other pod.
	UnmanagedPodsDelete UnmanagedPodPolicy = "Delete"
)

// DrainTimeoutPolicy says what happens when a drain runs past its timeout.
// +kubebuilder:validation:Enum=Fail;ForceDelete
type DrainTimeoutPolicy string

const (
	// DrainTimeoutFail marks the maintenance Failed and leaves the remaining
	// pods running; the node stays cordoned.
	DrainTimeoutFail DrainTimeoutPolicy = "Fail"
	// DrainTimeoutForceDelete deletes the pods still on the node, bypassing
	// their PodDisruptionBudgets. It is recorded in an Event and in status.
	DrainTimeoutForceDelete DrainTimeoutPolicy = "ForceDelete"
)

// DrainSpec tunes how a node is emptied. The defaults match
// `kubectl drain --ignore-daemonsets --delete-emptydir-data`.
type DrainSpec struct {
	// Timeout bounds the whole drain. Unset means the drain waits as long as
	// it takes. A Go duration ("30m", "1h30m"), at least 1s: a zero timeout
	// would give up (or force-delete every pod) on the drain's first pass.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') || duration(self) >= duration('1s')",message="must be at least 1s"
	// +optional
	Timeout *Duration `json:"timeout,omitempty"`

	// PodEvictionRetryInterval is how long to wait before asking again for an
	// eviction that a PodDisruptionBudget refused: from 1s (shorter is a hot
	// loop against the API server) to 1h.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') || duration(self) >= duration('1s') && duration(self) <= duration('1h')",message="must be from 1s to 1h"
	// +kubebuilder:default="5s"
	// +optional
	PodEvictionRetryInterval *Duration `json:"podEvictionRetryInterval,omitempty"`

	// GracePeriodSeconds overrides each pod's own termination grace period.
	// Unset means each pod's own. At least 1: 0 would kill pods without
	// letting them stop.
	// +kubebuilder:validation:Minimum=1
	// +optional
	GracePeriodSeconds *int64 `json:"gracePeriodSeconds,omitempty"`

	// UnmanagedPods says what to do with pods that no controller owns.
	// +kubebuilder:default=Block
	// +optional
	UnmanagedPods UnmanagedPodPolicy `json:"unmanagedPods,omitempty"`

	// SkipPodsSelector selects pods the drain leaves alone.
	// +optional
	SkipPodsSelector *metav1.LabelSelector `json:"skipPodsSelector,omitempty"`

	// ForceDeleteTerminating deletes without grace (as `kubectl delete
	// --force`) a pod still terminating once its deletion grace period has
	// passed: its kubelet is not finishing it, most often because the node
	// is down. The pod's containers may still run on the node; set it for
	// drains of nodes that may be unreachable. Each such deletion is an
	// Event. The maintenance-controller's forceEviction.
	// +optional
	ForceDeleteTerminating bool `json:"forceDeleteTerminating,omitempty"`
	// OnTimeout says what happens when Timeout passes with pods still on the node.
	// +kubebuilder:default=Fail
	// +optional
	OnTimeout DrainTimeoutPolicy `json:"onTimeout,omitempty"`
}

// NodeMaintenanceSpec names the node to take out of service and how.
// +kubebuilder:validation:XValidation:rule="self.nodeName == oldSelf.nodeName",message="spec.nodeName is immutable: delete this NodeMaintenance and create a new one for the other node"
type NodeMaintenanceSpec struct {
	// NodeName is the node to cordon and drain. It cannot be changed.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	NodeName string `json:"nodeName"`

	// Reason says why the node is in maintenance; it is shown in Events and
	// notifications.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Reason string `json:"reason,omitempty"`

	// Drain tunes how the node is emptied.
	// +kubebuilder:default={}
	// +optional
	Drain DrainSpec `json:"drain,omitempty"`
}

// MaintenancePhase is a one-word summary of a NodeMaintenance for
// `kubectl get`. It is derived from the conditions and never branched on.
// +kubebuilder:validation:Enum=Running;Succeeded;Failed
type MaintenancePhase string

const (
	// PhaseRunning means the node is being cordoned or drained.
	PhaseRunning MaintenancePhase = "Running"
	// PhaseSucceeded means the node is cordoned and drained.
	PhaseSucceeded MaintenancePhase = "Succeeded"
	// PhaseFailed means the drain gave up; see the conditions for why.
	PhaseFailed MaintenancePhase = "Failed"
)

// Condition types of a NodeMaintenance.
const (
	// ConditionCordoned is true once the node is unschedulable and tainted.
	ConditionCordoned = "Cordoned"
	// ConditionDrained is true once every pod that must leave has left.
	ConditionDrained = "Drained"
	// ConditionReady summarises the others: true when the node is ready for
	// maintenance work.
	ConditionReady = "Ready"
)

// PodReference names a pod.
type PodReference struct {
	// Namespace of the pod.
	Namespace string `json:"namespace"`
	// Name of the pod.
	Name string `json:"name"`
}

// DrainBlocker says why one pod has not left the node.
type DrainBlocker struct {
	// Pod is the pod that is still on the node.
	Pod PodReference `json:"pod"`
	// PodDisruptionBudget is the budget that refused the eviction, as
	// namespace/name, when one did.
	// +optional
	PodDisruptionBudget string `json:"podDisruptionBudget,omitempty"`
	// Reason is a CamelCase word for programs.
	Reason string `json:"reason"`
	// Message says what is in the way, for people.
	// +optional
	Message string `json:"message,omitempty"`
}

// LeftPod is a pod the drain leaves on the node, and why.
type LeftPod struct {
	// Pod is the pod that stays.
	Pod PodReference `json:"pod"`
	// Reason is DaemonSet, MirrorPod, SkipPodsSelector or ToleratesCordon
	// (a pod with a controller that tolerates both taints of the cordon:
	// evicted, its replacement could be scheduled right back).
	Reason string `json:"reason"`
}

// NodeMaintenanceStatus reports how far the maintenance has come.
type NodeMaintenanceStatus struct {
	// Conditions are Cordoned, Drained and Ready.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Phase is derived from the conditions for `kubectl get`.
	// +optional
	Phase MaintenancePhase `json:"phase,omitempty"`

	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// StartTime is when pitstop started working on the node.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// DrainWaited is how long pitstop has been draining the node: the time
	// spec.drain.timeout is measured against. It is counted by the manager
	// that runs the drain, on its own monotonic clock, and kept here so
	// that it survives restarts. Time while no manager ran the drain (pitstop
	// down, or cut off from the API server until it lost its leader lease)
	// does not count, nor does a difference between two managers' clocks.
	// +optional
	DrainWaited *metav1.Duration `json:"drainWaited,omitempty"`

	// CordonedBefore records whether the node was already cordoned by
	// someone else when pitstop first cordoned it for this maintenance.
	// The restore goes by it: such a node stays cordoned. The node's
	// annotation pitstop.dev/cordoned-before is a copy, which anyone who
	// may patch the node can change.
	// +optional
	CordonedBefore *bool `json:"cordonedBefore,omitempty"`

	// TotalPods is how many pods were on the node when the drain started.
	// +optional
	TotalPods int32 `json:"totalPods,omitempty"`

	// EvictionPods is how many of them had to be evicted.
	// +optional
	EvictionPods int32 `json:"evictionPods,omitempty"`

	// DrainProgress is the percentage of EvictionPods that have left.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	DrainProgress int32 `json:"drainProgress,omitempty"`

	// PendingPods are pods still to leave (at most 20 are listed).
	// +kubebuilder:validation:MaxItems=20
	// +optional
	PendingPods []PodReference `json:"pendingPods,omitempty"`

	// Blockers say why pods have not left (at most 20 are listed).
	// +kubebuilder:validation:MaxItems=20
	// +optional
	Blockers []DrainBlocker `json:"blockers,omitempty"`

	// LeftPods are pods the drain leaves on the node, with the reason (at
	// most 20 are listed). Drained means every pod on the node but these
	// has left.
	// +kubebuilder:validation:MaxItems=20
	// +optional
	LeftPods []LeftPod `json:"leftPods,omitempty"`

	// ForceDeletedPods is how many pods were deleted past their
	// PodDisruptionBudgets after the drain timed out (onTimeout: ForceDelete).
	// +optional
	ForceDeletedPods int32 `json:"forceDeletedPods,omitempty"`

	// LastError is the most recent error, for people.
	// +optional
	LastError string `json:"lastError,omitempty"`
}

// NodeMaintenance asks pitstop to take one node out of service: cordon it,
// taint it and drain it. Deleting the object puts the node back.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=nm,categories=pitstop
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.spec.nodeName`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Progress",type=integer,JSONPath=`.status.drainProgress`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NodeMaintenance struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec NodeMaintenanceSpec `json:"spec"`
	// +optional
	Status NodeMaintenanceStatus `json:"status,omitempty"`
}

// NodeMaintenanceList is a list of NodeMaintenance objects.
// +kubebuilder:object:root=true
type NodeMaintenanceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeMaintenance `json:"items"`
}

func init() {
	SchemeBuilder.Register(&NodeMaintenance{}, &NodeMaintenanceList{})
}
