package v1alpha1

// Condition reasons of a NodeMaintenance. Each is one CamelCase word; the
// condition message says the rest for people.
const (
	// ReasonCordoned: the node is unschedulable and carries pitstop's taints.
	ReasonCordoned = "Cordoned"
	// ReasonNodeNotFound: the node does not exist (any more).
	ReasonNodeNotFound = "NodeNotFound"
	// ReasonDuplicate: an older NodeMaintenance already owns the node; this
	// one does nothing until that one is deleted.
	ReasonDuplicate = "Duplicate"
	// ReasonQuorumProtected: the node is a control-plane node and taking it
	// down would leave fewer Ready control-plane nodes than quorum; the
	// maintenance waits.
	ReasonQuorumProtected = "QuorumProtected"
	// ReasonCordonFailed: the node could not be patched; see lastError.
	ReasonCordonFailed = "CordonFailed"

	// ReasonDraining: pods are being evicted or are terminating.
	ReasonDraining = "Draining"
	// ReasonBlockedByPodDisruptionBudget: a PodDisruptionBudget refused an
	// eviction; the drain retries.
	ReasonBlockedByPodDisruptionBudget = "BlockedByPodDisruptionBudget"
	// ReasonBlockedByUnmanagedPods: pods without a controller are on the
	// node and spec.drain.unmanagedPods is Block.
	ReasonBlockedByUnmanagedPods = "BlockedByUnmanagedPods"
	// ReasonEvictionFailed: an eviction failed with an error other than a
	// budget refusal; the drain retries.
	ReasonEvictionFailed = "EvictionFailed"
	// ReasonWaitingForPodDisruptionBudgetStatus: pods covered by a
	// PodDisruptionBudget whose status may be stale are held back: its
	// status.observedGeneration lags its generation, or pitstop lost its
	// view of the API server and the status has not been recomputed since.
	ReasonWaitingForPodDisruptionBudgetStatus = "WaitingForPodDisruptionBudgetStatus"
	// ReasonDrainTimedOut: spec.drain.timeout passed with pods left and
	// onTimeout is Fail; the maintenance has failed.
	ReasonDrainTimedOut = "DrainTimedOut"
	// ReasonForceDeleting: spec.drain.timeout passed and onTimeout is
	// ForceDelete: the remaining pods are being deleted past their budgets.
	ReasonForceDeleting = "ForceDeleting"
	// ReasonInvalidSpec: spec.drain cannot be used as written (for example
	// a skipPodsSelector the API server's schema let through but that is not
	// a valid selector); fix the spec.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonDrained: every pod that had to leave has left.
	ReasonDrained = "Drained"
	// ReasonDrainedByForce: drained, but some pods were force-deleted after
	// the timeout, bypassing their PodDisruptionBudgets.
	ReasonDrainedByForce = "DrainedByForce"
	// ReasonDrainSkipped: the node is only cordoned because of
	// machine.openshift.io/exclude-node-draining.
	ReasonDrainSkipped = "DrainSkipped"

	// ReasonReady: the node is cordoned and drained: maintenance may start.
	ReasonReady = "Ready"
	// ReasonInProgress: cordon or drain is still under way.
	ReasonInProgress = "InProgress"
	// ReasonFailed: the maintenance cannot finish; see the other conditions.
	ReasonFailed = "Failed"
)

// Event reasons of a NodeMaintenance.
const (
	EventMaintenanceStarted = "MaintenanceStarted"
	EventCordoned           = "Cordoned"
	EventEvictionBlocked    = "EvictionBlocked"
	EventEvictionHeld       = "EvictionHeld"
	EventDrained            = "Drained"
	EventDrainFailed        = "DrainFailed"
	EventForceDeleted       = "ForceDeleted"
	EventRestored           = "Restored"
	EventLeftCordoned       = "LeftCordoned"
	EventNodeNotFound       = "NodeNotFound"
	// EventPodEvicted and EventPodDeleted name one pod a drain evicted or
	// deleted (the related object).
	EventPodEvicted = "PodEvicted"
	EventPodDeleted = "PodDeleted"
)
