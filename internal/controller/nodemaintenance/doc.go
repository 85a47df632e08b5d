// Package nodemaintenance is the NodeMaintenance controller and its
// admission webhook: it cordons and taints the node, drains it through
// internal/drain, reports progress and blockers in status, and restores the
// node when the object is deleted. It is the only code in pitstop that
// cordons or drains; every other part that needs a node emptied creates a
// NodeMaintenance and waits on its conditions.
//
// +kubebuilder:rbac:groups=pitstop.dev,resources=nodemaintenances,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=pitstop.dev,resources=nodemaintenances/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=pitstop.dev,resources=nodemaintenances/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;patch;update
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups="",resources=pods/eviction,verbs=create
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch
package nodemaintenance
