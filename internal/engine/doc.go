// Package engine is the profile state machine: for one node and one
// MaintenanceProfile it decides, from the node's current state and the
// results of the profile's checks, whether the node changes state, through
// which transition and with which triggers. It is pure: no client, no
// clock; the reconciler gathers the inputs and carries out the decision.
// It also owns the compiled form of a profile (check expressions compiled
// with CEL) and the per-node state record kept on the node.
package engine
