package machinemaintenance

import (
	"context"
	"errors"
	"fmt"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/cloud"
	"github.com/pitstop-dev/pitstop/internal/machineapi"
)

// Reasons of the Events that say pitstop refused a target.
const (
	// eventTargetRefused (Warning, on a MachineMaintenance): the action
	// failed because what ties its Machine or instance to its node
	// disagrees; nothing was deleted or rebooted.
	eventTargetRefused = "TargetRefused"
	// eventUntrustedInstance (Warning, on a Node): the node's
	// spec.providerID names an instance that is not the node's by the
	// Machine's or the provider's own record; that instance's events are
	// not put on the node.
	eventUntrustedInstance = "UntrustedInstance"
)

// refusal is an action pitstop will not take: its target is not the
// node's by a link the node cannot write. The action fails with the
// message; retrying cannot fix it.
type refusal struct{ error }

// refuse wraps the disagreement an action fails on.
func refuse(err error) error { return refusal{err} }

// isRefusal says whether err is a refusal.
func isRefusal(err error) bool {
	var r refusal
	return errors.As(err, &r)
}

// allMachines lists every Machine of the cluster with r; none when the
// Machine API is not served.
func allMachines(ctx context.Context, r client.Reader, served bool) ([]machinev1beta1.Machine, error) {
	if !served {
		return nil, nil
	}
	var list machinev1beta1.MachineList
	if err := r.List(ctx, &list); err != nil {
		if meta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("listing Machines: %w", err)
	}
	return list.Items, nil
}

// verifiedMachine reads the action's Machine, its node and every Machine
// from the API server (a cache that lags must not vouch for a delete or a
// reboot) and checks that the Machine is the node's by the Machine's own
// status.nodeRef, with the node's annotation and providerID agreeing
// (machineapi.MachineOfNode). A disagreement is a refusal.
func (r *Reconciler) verifiedMachine(ctx context.Context, mm *pitstopv1alpha1.MachineMaintenance) (*machinev1beta1.Machine, error) {
	if mm.Spec.NodeName == "" {
		return nil, refuse(fmt.Errorf("MachineMaintenance %s/%s names no node (spec.nodeName) for machine %s", mm.Namespace, mm.Name, mm.Spec.MachineName))
	}
	node := &corev1.Node{}
	if err := r.reader.Get(ctx, client.ObjectKey{Name: mm.Spec.NodeName}, node); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("reading node %s: %w", mm.Spec.NodeName, err)
		}
		// A node that is gone carries nothing to check: the Machine's
		// own status.nodeRef is the link.
		node = &corev1.Node{}
		node.Name = mm.Spec.NodeName
	}
	machines, err := allMachines(ctx, r.reader, true)
	if err != nil {
		return nil, err
	}
	m, err := machineapi.MachineOfNode(node, machines)
	switch {
	case errors.Is(err, machineapi.ErrNoMachine):
		return nil, refuse(fmt.Errorf("MachineMaintenance %s/%s names machine %s for node %s, but no Machine names node %s in status.nodeRef",
			mm.Namespace, mm.Name, mm.Spec.MachineName, node.Name, node.Name))
	case err != nil:
		return nil, refuse(err)
	case m.Namespace != mm.Namespace || m.Name != mm.Spec.MachineName:
		return nil, refuse(fmt.Errorf("MachineMaintenance %s/%s names machine %s for node %s, but the machine that names the node in status.nodeRef is %s/%s",
			mm.Namespace, mm.Name, mm.Spec.MachineName, node.Name, m.Namespace, m.Name))
	}
	return m, nil
}

// verifiedNodeTarget is the instance of a node that runs on no Machine:
// the one its spec.providerID names, once the Machines (read from the API
// server) and the provider's own record agree. A Machine that names the
// node, or whose instance it is, makes it a refusal (the action is the
// Machine's to take); so does a provider record that gives the instance
// another node's name.
func (r *Reconciler) verifiedNodeTarget(ctx context.Context, name string) (cloud.Target, error) {
	node := &corev1.Node{}
	if err := r.reader.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		return cloud.Target{}, fmt.Errorf("reading node %s: %w", name, err)
	}
	machines, err := allMachines(ctx, r.reader, r.opts.Machines)
	if err != nil {
		return cloud.Target{}, err
	}
	if m, err := machineapi.MachineOfNode(node, machines); err == nil {
		return cloud.Target{}, refuse(fmt.Errorf("node %s runs on machine %s/%s (its status.nodeRef), but the action names no machine", node.Name, m.Namespace, m.Name))
	} else if !errors.Is(err, machineapi.ErrNoMachine) {
		return cloud.Target{}, refuse(err)
	}
	t, ok := r.cloud.NodeTarget(node)
	if !ok {
		return cloud.Target{}, refuse(fmt.Errorf("node %s has no %s instance (spec.providerID %q)", node.Name, r.cloud.Name(), node.Spec.ProviderID))
	}
	names, failed := r.cloud.NodeNames(ctx, []cloud.Target{t})
	if err := failed[t.InstanceID]; err != nil {
		return cloud.Target{}, err
	}
	if err := checkNodeName(node, t, names[t.InstanceID], r.cloud.Name()); err != nil {
		return cloud.Target{}, refuse(err)
	}
	return t, nil
}

// checkNodeName says whether the provider's record of a node's instance
// (the name its node registers under) is the node's name: a LinkError
// naming both when not.
func checkNodeName(node *corev1.Node, t cloud.Target, name, provider string) error {
	if name == node.Name {
		return nil
	}
	if name == "" {
		return &machineapi.LinkError{Message: fmt.Sprintf("node %s's spec.providerID %q names instance %s, which %s does not know as a node's (no private DNS name)",
			node.Name, node.Spec.ProviderID, t.InstanceID, provider)}
	}
	return &machineapi.LinkError{Message: fmt.Sprintf("node %s's spec.providerID %q names instance %s, which %s names %s (its private DNS name), not %s",
		node.Name, node.Spec.ProviderID, t.InstanceID, provider, name, node.Name)}
}
