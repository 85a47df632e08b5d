package medik8s

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/ctrlqueue"
)

// GroupVersionKind is the medik8s NodeMaintenance this package reconciles.
var GroupVersionKind = schema.GroupVersionKind{Group: "nodemaintenance.medik8s.io", Version: "v1beta1", Kind: "NodeMaintenance"}

// CRDName is the name of the CustomResourceDefinition that serves
// GroupVersionKind.
const CRDName = "nodemaintenances.nodemaintenance.medik8s.io"

const (
	// Finalizer is the finalizer medik8s puts on its NodeMaintenance objects.
	// pitstop uses the same name, so objects that already carry it (created
	// while the medik8s operator ran) keep working after the switch.
	Finalizer = "foregroundDeleteNodeMaintenance"

	// SourceMedik8s is the pitstopv1alpha1.LabelSource value of maintenances created here.
	SourceMedik8s = pitstopv1alpha1.SourceMedik8s
)

// ErrCRDNotInstalled means the API server does not serve GroupVersionKind,
// so there is nothing to reconcile: the compatibility mode is an explicit
// opt-in and must not start half-working.
var ErrCRDNotInstalled = errors.New("CRD " + CRDName + " is not installed")

// controllerName names the controller in logs and Events.
const controllerName = "medik8s-nodemaintenance"

// Setup registers the controller with the manager. It fails with
// ErrCRDNotInstalled when the medik8s CRD is missing.
func Setup(mgr ctrl.Manager) error {
	if err := requireCRD(mgr.GetRESTMapper()); err != nil {
		return err
	}
	r := &Reconciler{
		client:    mgr.GetClient(),
		apiReader: mgr.GetAPIReader(),
		recorder:  mgr.GetEventRecorder("pitstop-" + controllerName),
		clock:     clock.RealClock{},
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(controllerName).
		For(newObject()).
		// Status changes and deletions of the pitstop NodeMaintenance wake its
		// medik8s owner, which mirrors them.
		Owns(&pitstopv1alpha1.NodeMaintenance{}).
		WithOptions(ctrlqueue.ControllerOptions(mgr.GetLogger(), 1)).
		Complete(r)
}

// requireCRD asks the API server, through the manager's RESTMapper, whether
// it serves GroupVersionKind.
func requireCRD(mapper meta.RESTMapper) error {
	_, err := mapper.RESTMapping(GroupVersionKind.GroupKind(), GroupVersionKind.Version)
	switch {
	case meta.IsNoMatchError(err):
		return fmt.Errorf("%w: the API server does not serve %s; install medik8s' NodeMaintenance CRD first: %w", ErrCRDNotInstalled, GroupVersionKind, err)
	case err != nil:
		return fmt.Errorf("looking up %s (CRD %s): %w", GroupVersionKind, CRDName, err)
	}
	return nil
}

// newObject returns an empty medik8s NodeMaintenance.
func newObject() *unstructured.Unstructured {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(GroupVersionKind)
	return obj
}

// Requeue intervals. Both are safety nets: watches normally wake the
// reconcile first.
const (
	// awaitRequeue is how often a deletion looks again whether pitstop has
	// restored the node and let its NodeMaintenance go.
	awaitRequeue = 5 * time.Second
	// conflictRequeue is how soon a reconcile that lost a write race, or ran
	// ahead of the cache, looks again.
	conflictRequeue = time.Second
)
