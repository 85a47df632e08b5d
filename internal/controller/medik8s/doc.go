// Package medik8s lets clusters that use the medik8s Node Maintenance
// Operator switch to pitstop without rewriting their manifests. It watches
// nodemaintenance.medik8s.io/v1beta1 NodeMaintenance objects, and the
// kubevirt.io/v1alpha3 ones of that operator's first releases (as
// unstructured: pitstop does not vendor those APIs), creates one pitstop
// NodeMaintenance for each, mirrors pitstop's status back under medik8s'
// field names, and holds medik8s' own finalizer until pitstop has restored
// the node. It must not cordon, drain or evict anything itself: the
// nodemaintenance controller is the only drainer, and this package only
// creates and deletes its objects.
//
// +kubebuilder:rbac:groups=nodemaintenance.medik8s.io,resources=nodemaintenances,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=nodemaintenance.medik8s.io,resources=nodemaintenances/status,verbs=update;patch
// +kubebuilder:rbac:groups=nodemaintenance.medik8s.io,resources=nodemaintenances/finalizers,verbs=update
// +kubebuilder:rbac:groups=kubevirt.io,resources=nodemaintenances,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=kubevirt.io,resources=nodemaintenances/status,verbs=update;patch
// +kubebuilder:rbac:groups=kubevirt.io,resources=nodemaintenances/finalizers,verbs=update
// +kubebuilder:rbac:groups=pitstop.dev,resources=nodemaintenances,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update;delete,namespace=medik8s-leases
package medik8s
