package kubernikus

// Reasons of the Events the Kubernikus integration records on nodes.
const (
	EventDrain             = "KubernikusDrain"
	EventDrainFailed       = "KubernikusDrainFailed"
	EventDeleteFailed      = "KubernikusDeleteFailed"
	EventServerDeleted     = "KubernikusServerDeleted"
	EventServerRefused     = "KubernikusServerRefused"
	EventWaitingForBudget  = "KubernikusWaitingForBudget"
	EventDeletionCancelled = "KubernikusDeletionCancelled"
)
