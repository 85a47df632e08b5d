package v1alpha1

// The keys pitstop reads and writes on nodes and on its own and others'
// objects: labels, annotations, taints and finalizers. Every package uses
// these names; none spells a key again.

// On nodes.
const (
	// LabelState is the node's most severe state over its profiles, for
	// selectors and `kubectl get nodes -L`.
	LabelState = "pitstop.dev/state"

	// AnnotationMaintenanceData holds the node's record as JSON: its state
	// in every profile, so that a restart resumes where it stopped.
	AnnotationMaintenanceData = "pitstop.dev/maintenance-data"

	// LabelSeedProfile is the maintenance-controller's profile label:
	// profile names joined by "--". pitstop honours it.
	LabelSeedProfile = "cloud.sap/maintenance-profile"

	// LabelSeedState is the maintenance-controller's state label (the
	// most severe state, the values of LabelState). pitstop writes it
	// beside LabelState with --smc-compat, for the tools and pod
	// affinities that read it.
	LabelSeedState = "cloud.sap/maintenance-state"

	// AnnotationSeedData is the maintenance-controller's record. A node
	// pitstop has no record of yet starts from it, so a node the
	// maintenance-controller left mid-maintenance keeps its state; with
	// --smc-compat pitstop writes it too, in the maintenance-controller's
	// form, for the tools that read it.
	AnnotationSeedData = "cloud.sap/maintenance-data"

	// LabelSeedLogDetails, "true" on a node, logs each evaluation of the
	// node: every check's result and reason, and what the node waits for
	// (the maintenance-controller's label of the same name).
	LabelSeedLogDetails = "cloud.sap/maintenance-log-details"

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

	// LabelScheduledEvent on a node names the code of its earliest
	// scheduled cloud event (instance-retirement, system-reboot, ...):
	// profiles select or check it like any label.
	LabelScheduledEvent = "pitstop.dev/scheduled-event"
	// AnnotationScheduledEventNotBefore on a node is when its earliest
	// scheduled event starts, AnnotationScheduledEventStartBy its latest
	// safe start (RFC 3339): what the deadline check reads.
	AnnotationScheduledEventNotBefore = "pitstop.dev/scheduled-event-not-before"
	AnnotationScheduledEventStartBy   = "pitstop.dev/scheduled-event-start-by"
	// AnnotationScheduledEventObject names the node's MachineMaintenance
	// (namespace/name) for that event.
	AnnotationScheduledEventObject = "pitstop.dev/scheduled-event-object"
	// ConditionScheduledEvent is the node condition that says a cloud
	// event is scheduled for the node's instance.
	ConditionScheduledEvent = "ScheduledEvent"

	// LabelExcludeFromRemediation on a node tells health checkers (pitstop's,
	// and medik8s' NodeHealthCheck) that the node is down on purpose.
	LabelExcludeFromRemediation = "remediation.medik8s.io/exclude-from-remediation"
)

// On MaintenanceProfiles and the Secret of their notifications.
const (
	// LabelManagedBy says what writes a MaintenanceProfile (or the Secret
	// its notifications read) besides the people who may edit it; pitstop
	// deletes only the objects it made itself, found by this label.
	LabelManagedBy = "pitstop.dev/managed-by"

	// ManagedBySeedFile is the LabelManagedBy of the objects pitstop applies
	// from the maintenance-controller's maintenance.yaml it follows
	// (--seed-config-file). Removing the label hands the object over to its
	// users: pitstop then neither updates nor deletes it.
	ManagedBySeedFile = "seed-file"
)

// On NodeMaintenances.
const (
	// LabelProfile marks the NodeMaintenances a profile created, with its
	// name.
	LabelProfile = "pitstop.dev/profile"

	// LabelSource on a NodeMaintenance says which API asked for it: its
	// controller owner reference names the object.
	LabelSource = "pitstop.dev/source"

	// SourceMedik8s is the LabelSource of a NodeMaintenance made for a
	// medik8s NodeMaintenance (--medik8s-compat): its node also gets the
	// medik8s.io/drain taint.
	SourceMedik8s = "nodemaintenance.medik8s.io"

	// SourceKubevirt is the LabelSource of a NodeMaintenance made for a
	// kubevirt.io/v1alpha3 NodeMaintenance, the medik8s operator's first
	// API (--medik8s-compat): its node gets the medik8s.io/drain taint too.
	SourceKubevirt = "kubevirt.io"

	// SourceESX is the LabelSource of a NodeMaintenance the ESX integration
	// (--esx) made to drain a node before its VM is shut down.
	SourceESX = "esx"

	// SourceKubernikus is the LabelSource of a NodeMaintenance the
	// Kubernikus integration (--kubernikus) made to drain a node before its
	// server is deleted.
	SourceKubernikus = "kubernikus"

	// AnnotationOwner on a NodeMaintenance names the namespaced object it
	// was made for ("<namespace>/<name>"), and AnnotationOwnerUID that
	// object's UID. A namespaced object cannot own a cluster-scoped one,
	// so these stand in for the owner reference; LabelSource says the
	// object's API.
	AnnotationOwner    = "pitstop.dev/owner"
	AnnotationOwnerUID = "pitstop.dev/owner-uid"

	// AnnotationMachine on a NodeMaintenance names the Machine (namespace/
	// name) whose deletion it drains for.
	AnnotationMachine = "pitstop.dev/machine"
)

// On MachineMaintenances and MachineSets.
const (
	// LabelMachineMaintenanceNode marks a MachineMaintenance with its
	// node's name, so that a node's events can be listed.
	LabelMachineMaintenanceNode = "pitstop.dev/node"
	// AnnotationSurgePrefix + a MachineMaintenance's name on a MachineSet
	// says that its replacement added one replica there; the value is the
	// replica count before (less one for each earlier surge taken back
	// since). Written in the same update as the count, so a restart never
	// scales up twice or forgets to scale back.
	AnnotationSurgePrefix = "surge.pitstop.dev/"
	// FinalizerSurge holds a MachineMaintenance while its surge is
	// recorded on a MachineSet: deleting it mid-surge first takes the
	// surge's replica back.
	FinalizerSurge = "pitstop.dev/surge"
)

// On Leases and Secrets.
const (
	// LabelBudget marks a budget's slot Leases, so that its slots can be
	// listed; its value is a hash of the budget.
	LabelBudget = "pitstop.dev/budget"
	// AnnotationBudgetName and AnnotationBudgetGroup say which budget a
	// slot Lease belongs to.
	AnnotationBudgetName  = "pitstop.dev/budget-name"
	AnnotationBudgetGroup = "pitstop.dev/budget-group"

	// LabelSlackThread marks the Leases that slackThread notifications
	// create: the only Leases the sender writes.
	LabelSlackThread = "pitstop.dev/slack-thread"
	// AnnotationSlackChannel and AnnotationSlackThread on a Slack thread's
	// Lease say where the thread is. The Lease's acquireTime is when the
	// thread was opened, its duration the period.
	AnnotationSlackChannel = "pitstop.dev/slack-channel"
	AnnotationSlackThread  = "pitstop.dev/slack-thread-ts"

	// LabelUsableByProfiles, set to "true", opts a Secret of pitstop's
	// namespace in for profiles: it is the only kind their notifications
	// and checks read. That namespace holds Secrets of pitstop's own (the
	// webhook's serving key), and a profile's author names both the Secret
	// and where its value goes (the mail server a password is sent to, the
	// Prometheus a token is): without the opt-in, pitstop would hand them
	// any of its Secrets.
	LabelUsableByProfiles = "pitstop.dev/usable-by-profiles"
)

// On the simulated nodes of the kwok machine provider.
const (
	// AnnotationKwokMachine on a kwok Node names the Machine it was made
	// for.
	AnnotationKwokMachine = "pitstop.dev/kwok-machine"
	// AnnotationKwokDeleteAt on a kwok Node is when the provider's Delete
	// lets it disappear (RFC 3339); the Node exists, shutting down, until
	// then.
	AnnotationKwokDeleteAt = "pitstop.dev/kwok-delete-at"
)
