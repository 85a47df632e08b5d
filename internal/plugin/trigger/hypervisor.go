package trigger

import (
	"context"
	"fmt"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/plugin/hypervisor"
)

// +kubebuilder:rbac:groups=kvm.cloud.sap,resources=hypervisors,verbs=patch

// alterHypervisor sets spec fields of the node's Hypervisor with one merge
// patch: the Hypervisor operator's other writers' fields are left alone,
// and the API server checks the values against the Hypervisor's schema.
type alterHypervisor struct {
	fields map[string]any
}

func newAlterHypervisor(cfg *pitstopv1alpha1.AlterHypervisorTrigger) (Trigger, error) {
	f, err := hypervisor.Parse("alterHypervisor.spec", "spec", cfg.Spec, hypervisor.SpecFields)
	if err != nil {
		return nil, err
	}
	return alterHypervisor{fields: f}, nil
}

// Run implements Trigger.
func (a alterHypervisor) Run(ctx context.Context, c Context) (bool, string, error) {
	if err := hypervisor.Patch(ctx, c.Client, c.Node.Name, a.fields); err != nil {
		return false, "", err
	}
	return true, fmt.Sprintf("Hypervisor %s altered", c.Node.Name), nil
}
