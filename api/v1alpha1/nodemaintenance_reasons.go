package v1alpha1

// Keys pitstop sets on nodes and its objects.
const (
	// TaintDrain marks a node that pitstop is draining, next to the standard
	// node.kubernetes.io/unschedulable taint. Pods that tolerate the cordon
	// (but not this taint) do not land on the node while it drains.
	TaintDrain = "pitstop.dev/drain"

	// AnnotationCordonedBefore records on the node whether it was already
	// cordoned when pitstop first cordoned it ("true" or "false"), so that
	// restoring it does not uncordon a node someone else had cordoned.
	AnnotationCordonedBefore = "pitstop.dev/cordoned-before"

	// AnnotationExcludeNodeDraining on a NodeMaintenance or its node means
	// cordon only, no drain. It is the key the Machine API uses, so Machines
	// and nodes that carry it keep their meaning.
	AnnotationExcludeNodeDraining = "machine.openshift.io/exclude-node-draining"

	// FinalizerNodeMaintenance holds a NodeMaintenance until its node is
	// restored.
	FinalizerNodeMaintenance = "pitstop.dev/node-maintenance"

	// FinalizerMaintenanceProfile holds a deleted MaintenanceProfile until
	// every node it had out of operational has left it: restored, and its
	// budget slots given back.
	FinalizerMaintenanceProfile = "pitstop.dev/maintenance-profile"

	// LabelExcludeFromRemediation on a node tells health checkers (pitstop's,
	// and medik8s' NodeHealthCheck) that the node is down on purpose.
	LabelExcludeFromRemediation = "remediation.medik8s.io/exclude-from-remediation"
)

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
	EventDrained            = "Drained"
	EventDrainFailed        = "DrainFailed"
	EventForceDeleted       = "ForceDeleted"
	EventRestored           = "Restored"
	EventLeftCordoned       = "LeftCordoned"
	EventNodeNotFound       = "NodeNotFound"
)
