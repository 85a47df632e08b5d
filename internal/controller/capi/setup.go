package capi

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/pitstop-dev/pitstop/internal/cloud/clusterapi"
	"github.com/pitstop-dev/pitstop/internal/ctrlqueue"
)

// Options configure the bridge.
type Options struct {
	// Metal3 reboots the BareMetalHost of a Machine whose maintenance is
	// approved.
	Metal3 bool
	// SecretRecheck is how often each workload connection reads its
	// kubeconfig Secret again, closing once it is deleted (0: 30s).
	SecretRecheck time.Duration
}

// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines/status,verbs=patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups=metal3.io,resources=baremetalhosts,verbs=get;patch

// Setup registers the Machine controller and the workload connections,
// once the API server is known to serve Cluster API Machines.
func Setup(mgr ctrl.Manager, opts Options) (*clusterapi.Clusters, error) {
	gvk := clusterv1.GroupVersion.WithKind("Machine")
	if _, err := mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
		return nil, fmt.Errorf("the API server does not serve %s: is this a Cluster API management cluster? %w", gvk, err)
	}
	if opts.Metal3 {
		if _, err := mgr.GetRESTMapper().RESTMapping(bareMetalHostGVK.GroupKind(), bareMetalHostGVK.Version); err != nil && !meta.IsNoMatchError(err) {
			return nil, err
		}
	}
	clusters := clusterapi.NewClusters(mgr.GetAPIReader(), mgr.GetLogger().WithName("cluster-api"), opts.SecretRecheck)
	if err := mgr.Add(clusters); err != nil {
		return nil, err
	}
	r := &Reconciler{client: mgr.GetClient(), clusters: clusters, recorder: mgr.GetEventRecorder("pitstop-cluster-api"), metal3: opts.Metal3}
	err := ctrl.NewControllerManagedBy(mgr).
		Named("cluster-api-machine").
		For(&clusterv1.Machine{}, builder.WithPredicates(predicate.Funcs{
			CreateFunc:  func(e event.CreateEvent) bool { return relevant(e.Object) },
			UpdateFunc:  func(e event.UpdateEvent) bool { return relevant(e.ObjectOld) || relevant(e.ObjectNew) },
			DeleteFunc:  func(e event.DeleteEvent) bool { return relevant(e.Object) },
			GenericFunc: func(e event.GenericEvent) bool { return relevant(e.Object) },
		})).
		WatchesRawSource(source.Channel(clusters.Wakes(), &handler.EnqueueRequestForObject{})).
		WithOptions(ctrlqueue.ControllerOptions(mgr.GetLogger(), 1)).
		Complete(r)
	return clusters, err
}
