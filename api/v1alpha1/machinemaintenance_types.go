package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MachineMaintenancePhase is where a scheduled event stands.
// +kubebuilder:validation:Enum=Scheduled;Planned;InProgress;Completed;Canceled;Missed;Failed
type MachineMaintenancePhase string

const (
	// EventScheduled: the provider has scheduled the event; no profile
	// selects the node to act on it yet.
	EventScheduled MachineMaintenancePhase = "Scheduled"
	// EventPlanned: a profile selects the node; it acts when its checks
	// pass (a window, or the deadline).
	EventPlanned MachineMaintenancePhase = "Planned"
	// EventInProgress: pitstop is replacing or rebooting the machine.
	EventInProgress MachineMaintenancePhase = "InProgress"
	// EventCompleted: the event is over: pitstop did what it planned, or
	// the provider carried the event out or no longer lists it after its
	// start.
	EventCompleted MachineMaintenancePhase = "Completed"
	// EventCanceled: the provider withdrew the event before it started.
	EventCanceled MachineMaintenancePhase = "Canceled"
	// EventMissed: the provider carried the event out before pitstop acted.
	EventMissed MachineMaintenancePhase = "Missed"
	// EventFailed: pitstop's action failed and will not be retried; see
	// the conditions.
	EventFailed MachineMaintenancePhase = "Failed"
)

// Finished says whether a phase is final: the object is only kept for the
// record.
func (p MachineMaintenancePhase) Finished() bool {
	switch p {
	case EventCompleted, EventCanceled, EventMissed, EventFailed:
		return true
	}
	return false
}

// MachineMaintenanceSpec is one event a cloud provider scheduled for one
// instance. pitstop writes it from what the provider says.
type MachineMaintenanceSpec struct {
	// Provider is the cloud that scheduled the event ("aws"), or "pitstop"
	// for a replacement or reboot a profile asked for without one.
	// +kubebuilder:validation:Enum=aws;pitstop
	Provider string `json:"provider"`
	// InstanceID is the provider's name for the instance (i-0123...).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	InstanceID string `json:"instanceID"`
	// EventID is the provider's ID of the event (instance-event-0abc...).
	// +optional
	// +kubebuilder:validation:MaxLength=128
	EventID string `json:"eventID,omitempty"`
	// Code is the kind of event: instance-reboot, system-reboot,
	// system-maintenance, instance-retirement, instance-stop; replace or
	// reboot for one a profile asked for.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	Code string `json:"code"`
	// Description is the provider's, as it gave it.
	// +optional
	Description string `json:"description,omitempty"`
	// NotBefore is the earliest the provider starts the event: the
	// deadline pitstop plans against.
	// +optional
	NotBefore *metav1.Time `json:"notBefore,omitempty"`
	// NotAfter is the latest the event ends, when the provider says.
	// +optional
	NotAfter *metav1.Time `json:"notAfter,omitempty"`
	// NodeName is the Node the instance runs, when it has joined.
	// +optional
	NodeName string `json:"nodeName,omitempty"`
	// MachineName is the Machine (in this namespace) the instance backs,
	// when there is one; the object is owned by it.
	// +optional
	MachineName string `json:"machineName,omitempty"`
}

// StartsBefore orders events by notBefore, those without one last.
func (s *MachineMaintenanceSpec) StartsBefore(o *MachineMaintenanceSpec) bool {
	return s.NotBefore != nil && (o.NotBefore == nil || s.NotBefore.Before(o.NotBefore))
}

// MachineActionType is what pitstop does about an event.
// +kubebuilder:validation:Enum=Replace;Reboot
type MachineActionType string

const (
	// ActionReplace replaces the machine: with surge, a new machine first.
	ActionReplace MachineActionType = "Replace"
	// ActionReboot drains the node, reboots the instance through the
	// provider and restores the node once it is back.
	ActionReboot MachineActionType = "Reboot"
)

// ActionStep is where an action stands. A restart resumes from it. A
// reboot's drain and restore are the profile's drain and restore
// triggers, around the action (their NodeMaintenance says how they stand),
// not steps of it.
// +kubebuilder:validation:Enum=Requested;ScalingUp;WaitingForReplacement;DeletingMachine;UndoingSurge;Rebooting;WaitingForNode;Done;Failed
type ActionStep string

const (
	StepRequested             ActionStep = "Requested"
	StepScalingUp             ActionStep = "ScalingUp"
	StepWaitingForReplacement ActionStep = "WaitingForReplacement"
	StepDeletingMachine       ActionStep = "DeletingMachine"
	StepRebooting             ActionStep = "Rebooting"
	StepWaitingForNode        ActionStep = "WaitingForNode"
	StepDone                  ActionStep = "Done"
	StepFailed                ActionStep = "Failed"

	// StepUndoingSurge takes a surge's replica back without replacing
	// the machine (the replacement was not Ready in time, the old
	// machine's links disagree, or the object is being deleted): the
	// new machine is marked for deletion, the set shrinks, and the
	// action fails.
	StepUndoingSurge ActionStep = "UndoingSurge"
)

// MachineAction is what a profile's trigger asked for and how far it got.
type MachineAction struct {
	// Type is Replace or Reboot.
	Type MachineActionType `json:"type"`
	// Profile is the profile whose trigger asked for it.
	// +optional
	Profile string `json:"profile,omitempty"`
	// Surge adds the replacement before the old machine goes.
	// +optional
	Surge bool `json:"surge,omitempty"`
	// ControlPlane says the machine runs the control plane: it is
	// replaced with surge only, one at a time.
	// +optional
	ControlPlane bool `json:"controlPlane,omitempty"`
	// Timeout bounds a reboot's wait for the node to come back, and a
	// surge's wait for its new machine to run with its node Ready.
	// +kubebuilder:validation:Type=string
	// +optional
	Timeout *Duration `json:"timeout,omitempty"`
	// Step is where the action stands.
	Step ActionStep `json:"step"`
	// MachineSet is the set the machine belongs to (surge scales it).
	// +optional
	MachineSet string `json:"machineSet,omitempty"`
	// Existing are the set's Machines when the surge began: the
	// replacement is none of them.
	// +optional
	// +kubebuilder:validation:MaxItems=10000
	Existing []string `json:"existing,omitempty"`
	// Replacement is the new Machine that took this one's place (surge).
	// +optional
	Replacement string `json:"replacement,omitempty"`
	// BootID is the node's boot ID before the reboot: the node is back
	// when it reports another.
	// +optional
	BootID string `json:"bootID,omitempty"`
	// ScaledUpTime is when the MachineSet was scaled up (surge): the new
	// machine must run with its node Ready within timeout of it.
	// +optional
	ScaledUpTime *metav1.Time `json:"scaledUpTime,omitempty"`
	// MarkedTime is when pitstop last marked a Machine for deletion, or
	// took a mark off, for a surge: the old Machine, or the new one when
	// the surge is undone. The set is shrunk once the mark has had time
	// to reach the MachineSet controller, so that it removes that Machine
	// and no other.
	// +optional
	MarkedTime *metav1.Time `json:"markedTime,omitempty"`
	// StartTime is when the action began, CompletionTime when it ended.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// Message says what the step waits for, for people.
	// +optional
	Message string `json:"message,omitempty"`
}

// MachineMaintenanceStatus is what pitstop decided and did about the event.
type MachineMaintenanceStatus struct {
	// Phase is where the event stands.
	// +optional
	Phase MachineMaintenancePhase `json:"phase,omitempty"`
	// LatestSafeStart is the last moment pitstop can start acting and be
	// done before notBefore: notBefore minus the time a replacement (or a
	// reboot) takes on this cluster, minus a margin.
	// +optional
	LatestSafeStart *metav1.Time `json:"latestSafeStart,omitempty"`
	// Plan says what pitstop will do and when, for people: the profile
	// that acts and what it waits for.
	// +optional
	Plan string `json:"plan,omitempty"`
	// Action is the replacement or reboot under way or done.
	// +optional
	Action *MachineAction `json:"action,omitempty"`
	// LastSeenTime is when the provider last listed the event.
	// +optional
	LastSeenTime *metav1.Time `json:"lastSeenTime,omitempty"`
	// CompletionTime is when the object reached a final phase; it is
	// removed a retention period after.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// Conditions: Synced (the provider's events were read at the last
	// poll), DeadlineAtRisk (no profile will act before latestSafeStart).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// MachineMaintenance is one scheduled cloud event for one machine (or
// node), and what pitstop decided and did about it. pitstop creates it
// when the provider schedules an event and ends it when the provider no
// longer lists the event.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=mm,categories=pitstop
// +kubebuilder:printcolumn:name="Machine",type=string,JSONPath=`.spec.machineName`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.spec.nodeName`
// +kubebuilder:printcolumn:name="Code",type=string,JSONPath=`.spec.code`
// +kubebuilder:printcolumn:name="Not Before",type=string,JSONPath=`.spec.notBefore`
// +kubebuilder:printcolumn:name="Start By",type=string,JSONPath=`.status.latestSafeStart`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type MachineMaintenance struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec MachineMaintenanceSpec `json:"spec"`
	// +optional
	Status MachineMaintenanceStatus `json:"status,omitempty"`
}

// MachineMaintenanceList is a list of MachineMaintenance objects.
// +kubebuilder:object:root=true
type MachineMaintenanceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MachineMaintenance `json:"items"`
}

func init() {
	SchemeBuilder.Register(&MachineMaintenance{}, &MachineMaintenanceList{})
}
