package machinemaintenance

import (
	"context"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"

	"github.com/pitstop-dev/pitstop/internal/machineapi/provider/aws"
)

// Cloud is a provider of scheduled events: which instance backs a Machine
// or a Node, the instances' events, and a reboot.
type Cloud interface {
	// Name is the provider's name in MachineMaintenance spec.provider.
	Name() string
	// MachineTarget and NodeTarget name the instance behind a Machine or
	// a Node; false when it has none of this provider's.
	MachineTarget(m *machinev1beta1.Machine) (aws.Target, bool)
	NodeTarget(node *corev1.Node) (aws.Target, bool)
	// NodeNames reads the provider's own record of each target's instance:
	// the name its Node registers under ("" when the provider knows none).
	// A node's spec.providerID is the kubelet's word; this is the
	// provider's, and a node is taken to run on an instance without a
	// Machine only when the two agree. Targets whose record could not be
	// read are in the second map.
	NodeNames(ctx context.Context, targets []aws.Target) (map[string]string, map[string]error)
	// Poll reads the scheduled events of the targets.
	Poll(ctx context.Context, targets []aws.Target) aws.PollResult
	// Reboot reboots a target's instance.
	Reboot(ctx context.Context, t aws.Target) error
}

// AWS is the Cloud of EC2, through the aws Machine provider's credentials,
// region and endpoint options.
type AWS struct{ Provider *aws.Provider }

// Name implements Cloud.
func (AWS) Name() string { return "aws" }

// MachineTarget implements Cloud.
func (AWS) MachineTarget(m *machinev1beta1.Machine) (aws.Target, bool) { return aws.MachineTarget(m) }

// NodeTarget implements Cloud.
func (AWS) NodeTarget(node *corev1.Node) (aws.Target, bool) {
	return aws.NodeTarget(node.Spec.ProviderID)
}

// NodeNames implements Cloud: EC2's private DNS name of each instance.
func (c AWS) NodeNames(ctx context.Context, targets []aws.Target) (map[string]string, map[string]error) {
	return c.Provider.PrivateDNSNames(ctx, targets)
}

// Poll implements Cloud.
func (c AWS) Poll(ctx context.Context, targets []aws.Target) aws.PollResult {
	return c.Provider.ScheduledEventsOf(ctx, targets)
}

// Reboot implements Cloud.
func (c AWS) Reboot(ctx context.Context, t aws.Target) error {
	return c.Provider.RebootInstance(ctx, t)
}
