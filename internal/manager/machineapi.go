package manager

import (
	"fmt"
	"slices"
	"strings"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/cloud/aws"
	"github.com/pitstop-dev/pitstop/internal/machineapi/healthcheck"
	"github.com/pitstop-dev/pitstop/internal/machineapi/machine"
	"github.com/pitstop-dev/pitstop/internal/machineapi/machineset"
	"github.com/pitstop-dev/pitstop/internal/machineapi/nodelink"
	"github.com/pitstop-dev/pitstop/internal/machineapi/provider"
	"github.com/pitstop-dev/pitstop/internal/machineapi/provider/kwok"
)

// machineProviders are the providers --machine-providers may name.
var machineProviders = []string{"aws", "kwok"}

func validateMachineProviders(names []string) error {
	for _, name := range names {
		if !slices.Contains(machineProviders, name) {
			return &FlagError{"machine-providers", strings.Join(names, ","), fmt.Sprintf("unknown provider %q; known: %s", name, strings.Join(machineProviders, ", "))}
		}
	}
	return nil
}

// setupMachineAPI registers the Machine API controllers, once the API
// server is known to serve their CRDs.
func setupMachineAPI(mgr ctrl.Manager, opts Options) error {
	for _, kind := range []string{"Machine", "MachineSet", "MachineHealthCheck"} {
		gvk := machinev1beta1.GroupVersion.WithKind(kind)
		if _, err := mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			if meta.IsNoMatchError(err) {
				return fmt.Errorf("the API server does not serve %s; install the Machine API CRDs first (kubectl apply -k config/crd/machineapi): %w", gvk, err)
			}
			return fmt.Errorf("looking up %s: %w", gvk, err)
		}
	}
	registry := provider.Registry{}
	for _, name := range opts.MachineProviders {
		switch name {
		case "kwok":
			p := &kwok.Provider{Client: mgr.GetClient(), Clock: clock.RealClock{}}
			registry[p.Kind()] = p
		case "aws":
			p, err := aws.New(aws.Options{Region: opts.AWSRegion, Endpoint: opts.AWSEndpoint, Secrets: mgr.GetAPIReader()})
			if err != nil {
				return fmt.Errorf("the aws provider: %w", err)
			}
			registry[p.Kind()] = p
		}
	}
	if err := machine.Setup(mgr, machine.Options{
		Providers: registry, LeaseNamespace: opts.LeaderElectionNamespace,
		MaxConcurrentReconciles: opts.NodeMaintenance.MaxConcurrentReconciles,
		DrainTimeout:            opts.MachineDrainTimeout,
		DrainOnTimeout:          pitstopv1alpha1.DrainTimeoutPolicy(opts.MachineDrainOnTimeout),
	}); err != nil {
		return fmt.Errorf("the Machine controller: %w", err)
	}
	if err := machineset.Setup(mgr, machineset.Options{}); err != nil {
		return fmt.Errorf("the MachineSet controller: %w", err)
	}
	if err := nodelink.Setup(mgr); err != nil {
		return fmt.Errorf("the nodelink controller: %w", err)
	}
	if err := healthcheck.Setup(mgr, healthcheck.Options{}); err != nil {
		return fmt.Errorf("the MachineHealthCheck controller: %w", err)
	}
	return nil
}
