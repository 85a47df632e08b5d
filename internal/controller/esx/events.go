package esx

// Reasons of the Events the ESX integration records on nodes.
const (
	EventHostMaintenance       = "ESXHostMaintenance"
	EventDrainFailed           = "ESXDrainFailed"
	EventVMRefused             = "ESXVMRefused"
	EventWaitingForBudget      = "ESXWaitingForBudget"
	EventGuestShutdown         = "ESXGuestShutdown"
	EventGuestShutdownFailed   = "ESXGuestShutdownFailed"
	EventGuestShutdownTimedOut = "ESXGuestShutdownTimedOut"
	EventPoweredOn             = "ESXPoweredOn"
	EventHostBack              = "ESXHostBack"
)
