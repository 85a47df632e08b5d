// Package manager assembles pitstop's controller-runtime manager: the scheme,
// leader election, health and readiness checks, the metrics endpoint and the
// controllers. `pitstop run` and `pitstop dev` both build their manager here,
// so the demo runs exactly what a cluster runs. It parses no flags: it gets
// typed, validated Options.
package manager

// The manager's own permissions; each controller's package declares what it
// needs next to the code that needs it.
//
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete,namespace=pitstop-system
//
// Events about cluster-scoped objects (nodes, NodeMaintenances, profiles)
// can only live in the default namespace: the API server refuses them
// anywhere else but kube-system. Leader election records its Events beside
// its Lease.
//
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch,namespace=pitstop-system
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch,namespace=default
//
// The dashboard, and the metrics, when they listen off loopback, are served
// over TLS only and let a request in only with a bearer token the API server
// accepts for pitstop's audience, of a user it allows: they ask it with a
// TokenReview and a SubjectAccessReview.
//
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
