package aws

import (
	"context"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"

	"github.com/pitstop-dev/pitstop/internal/cloud"
)

// Events is EC2 as a cloud.Events, through the Provider's credentials,
// region and endpoint options.
type Events struct{ Provider *Provider }

var _ cloud.Events = Events{}

// Name implements cloud.Events.
func (Events) Name() string { return "aws" }

// MachineTarget implements cloud.Events.
func (Events) MachineTarget(m *machinev1beta1.Machine) (cloud.Target, bool) { return MachineTarget(m) }

// NodeTarget implements cloud.Events.
func (Events) NodeTarget(node *corev1.Node) (cloud.Target, bool) {
	return NodeTarget(node.Spec.ProviderID)
}

// NodeNames implements cloud.Events: EC2's private DNS name of each
// instance.
func (e Events) NodeNames(ctx context.Context, targets []cloud.Target) (map[string]string, map[string]error) {
	return e.Provider.PrivateDNSNames(ctx, targets)
}

// Poll implements cloud.Events.
func (e Events) Poll(ctx context.Context, targets []cloud.Target) cloud.PollResult {
	return e.Provider.ScheduledEventsOf(ctx, targets)
}

// Reboot implements cloud.Events.
func (e Events) Reboot(ctx context.Context, t cloud.Target) error {
	return e.Provider.RebootInstance(ctx, t)
}
