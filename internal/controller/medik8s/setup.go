package medik8s

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/ctrlqueue"
)

// GroupVersionKind is the medik8s NodeMaintenance this package reconciles,
// and the one --medik8s-compat requires.
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

// ErrCRDNotInstalled means the API server does not serve a kind,
// so there is nothing to reconcile: the compatibility mode is an explicit
// opt-in and must not start half-working.
var ErrCRDNotInstalled = errors.New("CRD " + CRDName + " is not installed: install it before pitstop starts (the chart's medik8sCompat.installCRD, or kubectl apply -f config/crd/medik8s/), or keep the medik8s operator's own")

// Options configure the medik8s compatibility.
type Options struct {
	// LeaseNamespace holds the nodes' medik8s Leases: the namespace the
	// other medik8s components (Node Health Check, Self Node Remediation)
	// use, their LEASE_NAMESPACE. Empty: LeaseNamespace.
	LeaseNamespace string
}

// Setup registers a controller per kind with the manager. It fails with
// ErrCRDNotInstalled when the medik8s CRD is missing; the kubevirt.io one
// is reconciled when the API server serves it, and otherwise said in the
// log.
func Setup(mgr ctrl.Manager, opts Options) error {
	if opts.LeaseNamespace == "" {
		opts.LeaseNamespace = LeaseNamespace
	}
	for _, k := range kinds {
		switch err := requireCRD(mgr.GetRESTMapper(), k); {
		case errors.Is(err, ErrCRDNotInstalled) && k != medik8sKind:
			mgr.GetLogger().Info("not reconciling "+k.gvk.String()+": its CRD is not installed", "crd", k.crdName)
			continue
		case err != nil:
			return err
		}
		if err := setupKind(mgr, k, opts); err != nil {
			return err
		}
	}
	return nil
}

func setupKind(mgr ctrl.Manager, k kind, opts Options) error {
	r := &Reconciler{
		kind:      k,
		client:    mgr.GetClient(),
		apiReader: mgr.GetAPIReader(),
		leases:    leases{namespace: opts.LeaseNamespace, reader: mgr.GetAPIReader(), client: mgr.GetClient()},
		recorder:  mgr.GetEventRecorder("pitstop-" + k.controllerName),
		clock:     clock.RealClock{},
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(k.controllerName).
		For(k.newObject()).
		WithOptions(ctrlqueue.ControllerOptions(mgr.GetLogger(), 1))
	// Status changes and deletions of the pitstop NodeMaintenance wake the
	// object it was made for, which mirrors them.
	if k.namespaced {
		b = b.Watches(&pitstopv1alpha1.NodeMaintenance{}, handler.EnqueueRequestsFromMapFunc(
			func(_ context.Context, nm client.Object) []reconcile.Request {
				if key, ok := k.ownerKey(nm); ok {
					return []reconcile.Request{{NamespacedName: key}}
				}
				return nil
			}))
	} else {
		b = b.Owns(&pitstopv1alpha1.NodeMaintenance{})
	}
	return b.Complete(r)
}

// requireCRD asks the API server, through the manager's RESTMapper, whether
// it serves k.
func requireCRD(mapper meta.RESTMapper, k kind) error {
	_, err := mapper.RESTMapping(k.gvk.GroupKind(), k.gvk.Version)
	switch {
	case meta.IsNoMatchError(err):
		return fmt.Errorf("%w: the API server does not serve %s; install the CRD %s first (the chart does, or kubectl apply -f config/crd/medik8s/): %w", ErrCRDNotInstalled, k.gvk, k.crdName, err)
	case err != nil:
		return fmt.Errorf("looking up %s (CRD %s): %w", k.gvk, k.crdName, err)
	}
	return nil
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
