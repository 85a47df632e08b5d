// Package profile is the controller of MaintenanceProfiles: for every node
// it evaluates the profiles that select it, moves the node through their
// states as internal/engine decides, runs transitions' triggers, and keeps
// the node's state on the node itself. Entry into maintenance under a
// budget goes through internal/admission; what the engine reads and
// decides is internal/fleet's read model. It never cordons or evicts: the
// drain and restore triggers create and delete NodeMaintenances.
//
// +kubebuilder:rbac:groups=pitstop.dev,resources=maintenanceprofiles,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=pitstop.dev,resources=maintenanceprofiles/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;patch;update
package profile
