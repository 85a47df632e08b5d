package kwok

// The provider creates and deletes the Node objects that stand for its
// machines; only clusters that run it (local clusters) grant this.
//
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;create;patch;delete
