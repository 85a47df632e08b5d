package trigger

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/machineapi"
	"github.com/pitstop-dev/pitstop/internal/maintenance"
)

// roleLabel is the Machine API's role label on Machines.
const roleLabel = "machine.openshift.io/cluster-api-machine-role"

// replaceMachineTrigger asks for the node's Machine to be replaced, on the
// node's MachineMaintenance (the cloud event's, else one of its own), and
// is done once the replacement is: the MachineMaintenance controller does
// the work and keeps its step, so a restart resumes it.
type replaceMachineTrigger struct {
	spec pitstopv1alpha1.ReplaceMachineTrigger
}

// WaitsOn implements Watched: the action's step.
func (replaceMachineTrigger) WaitsOn() string { return WaitsOnMachineMaintenance }

func (t replaceMachineTrigger) Run(ctx context.Context, c Context) (bool, string, error) {
	if mm, err := actionOf(ctx, c, pitstopv1alpha1.ActionReplace); err != nil || mm != nil {
		if err != nil {
			return false, "", err
		}
		return progress(mm)
	}
	m, err := machineOf(ctx, c, c.Node)
	if err != nil {
		return false, "", err
	}
	if !m.DeletionTimestamp.IsZero() {
		// Its node goes with it. A replacement asked now would grow the
		// set, and shrinking it back would take another machine.
		return false, fmt.Sprintf("machine %s/%s is being deleted: no replacement is asked for it", m.Namespace, m.Name), nil
	}
	controlPlane := maintenance.IsControlPlane(c.Node) || m.Labels[roleLabel] == "master" || m.Labels[roleLabel] == "control-plane"
	if controlPlane && t.spec.ControlPlane == pitstopv1alpha1.ControlPlaneAlertOnly {
		return false, fmt.Sprintf("machine %s/%s runs the control plane and the profile only alerts for it (controlPlane: AlertOnly): replace it by hand", m.Namespace, m.Name), nil
	}
	surge := hasSet(m)
	if t.spec.Surge != nil {
		surge = *t.spec.Surge
	}
	action := pitstopv1alpha1.MachineAction{Type: pitstopv1alpha1.ActionReplace, Surge: surge, ControlPlane: controlPlane, Timeout: t.spec.Timeout}
	mm, err := request(ctx, c, m.Namespace, m, "replace", action)
	if err != nil {
		return false, "", err
	}
	return false, fmt.Sprintf("replacement of machine %s asked (MachineMaintenance %s/%s)", m.Name, mm.Namespace, mm.Name), nil
}

// rebootInstanceTrigger drains the node (the profile's NodeMaintenance),
// asks for its instance to be rebooted, waits until the node is back and
// restores it.
type rebootInstanceTrigger struct {
	spec pitstopv1alpha1.RebootInstanceTrigger
}

// WaitsOn implements Watched: the action's step.
func (rebootInstanceTrigger) WaitsOn() string { return WaitsOnMachineMaintenance }

func (t rebootInstanceTrigger) Run(ctx context.Context, c Context) (bool, string, error) {
	mm, err := actionOf(ctx, c, pitstopv1alpha1.ActionReboot)
	if err != nil {
		return false, "", err
	}
	if mm != nil {
		if done, status, err := progress(mm); !done || err != nil {
			return done, status, err
		}
		return restoreTrigger{}.Run(ctx, c)
	}
	if done, status, err := (drainTrigger{spec: pitstopv1alpha1.DrainTrigger{Drain: t.spec.Drain}}).Run(ctx, c); !done || err != nil {
		return done, status, err
	}
	namespace := c.Namespace
	m, err := machineOf(ctx, c, c.Node)
	if err == nil {
		namespace = m.Namespace
	} else if !errors.Is(err, machineapi.ErrNoMachine) {
		return false, "", err
	}
	action := pitstopv1alpha1.MachineAction{Type: pitstopv1alpha1.ActionReboot, BootID: c.Node.Status.NodeInfo.BootID, Timeout: t.spec.Timeout}
	mm, err = request(ctx, c, namespace, m, "reboot", action)
	if err != nil {
		return false, "", err
	}
	return false, fmt.Sprintf("reboot of node %s asked (MachineMaintenance %s/%s)", c.Node.Name, mm.Namespace, mm.Name), nil
}

// actionOf returns the node's MachineMaintenance holding an action of
// type t asked for since the node entered its state: this maintenance's,
// not an earlier one's.
func actionOf(ctx context.Context, c Context, t pitstopv1alpha1.MachineActionType) (*pitstopv1alpha1.MachineMaintenance, error) {
	list, err := eventsOf(ctx, c)
	if err != nil {
		return nil, err
	}
	for i := range list {
		a := list[i].Status.Action
		if a != nil && a.Type == t && (a.StartTime == nil || !a.StartTime.Time.Before(c.Since.Truncate(time.Second))) {
			return &list[i], nil
		}
	}
	return nil, nil //nolint:nilnil // none asked yet
}

// eventsOf lists the node's MachineMaintenances, earliest event first.
func eventsOf(ctx context.Context, c Context) ([]pitstopv1alpha1.MachineMaintenance, error) {
	var list pitstopv1alpha1.MachineMaintenanceList
	if err := c.Client.List(ctx, &list, client.MatchingLabels{pitstopv1alpha1.LabelMachineMaintenanceNode: c.Node.Name}); err != nil {
		return nil, fmt.Errorf("listing the MachineMaintenances of node %s: %w", c.Node.Name, err)
	}
	items := list.Items
	sort.SliceStable(items, func(i, j int) bool {
		return items[i].Spec.StartsBefore(&items[j].Spec)
	})
	return items, nil
}

// progress reads an action's step: done, failed, or what it waits for.
func progress(mm *pitstopv1alpha1.MachineMaintenance) (bool, string, error) {
	a := mm.Status.Action
	switch a.Step {
	case pitstopv1alpha1.StepDone:
		return true, "", nil
	case pitstopv1alpha1.StepFailed:
		return false, "", fmt.Errorf("MachineMaintenance %s/%s: %s failed: %s", mm.Namespace, mm.Name, strings.ToLower(string(a.Type)), a.Message)
	}
	status := fmt.Sprintf("%s %s (MachineMaintenance %s/%s)", strings.ToLower(string(a.Type)), a.Step, mm.Namespace, mm.Name)
	if a.Message != "" {
		status += ": " + a.Message
	}
	return false, status, nil
}

// request records the action on the node's earliest open event without
// one, or, when it has none, on a MachineMaintenance of its own (provider
// pitstop, code replace or reboot). The write carries the object's
// resourceVersion, so a stale read cannot ask twice.
func request(ctx context.Context, c Context, namespace string, m *machinev1beta1.Machine, code string, action pitstopv1alpha1.MachineAction) (*pitstopv1alpha1.MachineMaintenance, error) {
	action.Profile = c.Profile
	action.Step = pitstopv1alpha1.StepRequested
	action.StartTime = &metav1.Time{Time: c.Now}
	list, err := eventsOf(ctx, c)
	if err != nil {
		return nil, err
	}
	var mm *pitstopv1alpha1.MachineMaintenance
	for i := range list {
		// A reboot answers reboot events only; a replacement answers any.
		fits := action.Type == pitstopv1alpha1.ActionReplace || strings.HasSuffix(list[i].Spec.Code, "-reboot") || list[i].Spec.Code == code
		if fits && !list[i].Status.Phase.Finished() && list[i].Status.Action == nil && list[i].DeletionTimestamp.IsZero() {
			mm = &list[i]
			break
		}
	}
	if mm == nil {
		mm, err = create(ctx, c, namespace, m, code)
		if err != nil || mm == nil {
			return mm, err
		}
	}
	before := mm.DeepCopy()
	mm.Status.Action = &action
	if err := c.Client.Status().Patch(ctx, mm, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return nil, fmt.Errorf("asking for the %s on MachineMaintenance %s/%s: %w", code, mm.Namespace, mm.Name, err)
	}
	return mm, nil
}

// create makes the MachineMaintenance of an action a profile asked for
// without a cloud event: beside the Machine and owned by it, else in
// pitstop's namespace.
func create(ctx context.Context, c Context, namespace string, m *machinev1beta1.Machine, code string) (*pitstopv1alpha1.MachineMaintenance, error) {
	name := c.Node.Name + "-" + code
	if boot := c.Node.Status.NodeInfo.BootID; code == "reboot" && boot != "" {
		name += "-" + strings.ToLower(boot[:min(8, len(boot))])
	}
	mm := &pitstopv1alpha1.MachineMaintenance{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace, Name: maintenance.Name("", name),
			Labels: map[string]string{pitstopv1alpha1.LabelMachineMaintenanceNode: c.Node.Name},
		},
		Spec: pitstopv1alpha1.MachineMaintenanceSpec{
			Provider: "pitstop", InstanceID: instanceOf(c.Node, m), Code: code, NodeName: c.Node.Name,
			Description: "asked by maintenance profile " + c.Profile,
		},
	}
	if m != nil {
		mm.Spec.MachineName = m.Name
		if err := controllerutil.SetOwnerReference(m, mm, c.Client.Scheme()); err != nil {
			return nil, err
		}
	}
	if err := c.Client.Create(ctx, mm); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// Made by an earlier run the cache does not show yet: ask on
			// it at the next run.
			return nil, fmt.Errorf("MachineMaintenance %s/%s exists but is not read yet; asking again", namespace, mm.Name)
		}
		return nil, fmt.Errorf("creating MachineMaintenance %s/%s: %w", namespace, mm.Name, err)
	}
	return mm, nil
}

// machineOf reads the node's Machine from the API server: the Machine
// whose own status.nodeRef names the node, with the node's
// machine.openshift.io/machine annotation and spec.providerID agreeing
// (machineapi.MachineOfNode). Both of those are the node's to write, so
// they only confirm the link; when they contradict it the answer is a
// machineapi.LinkError, which the trigger fails on. A node no Machine
// names and that points at none gets machineapi.ErrNoMachine.
func machineOf(ctx context.Context, c Context, node *corev1.Node) (*machinev1beta1.Machine, error) {
	r := c.Reader
	if r == nil {
		r = c.Client
	}
	var list machinev1beta1.MachineList
	if err := r.List(ctx, &list); err != nil && !meta.IsNoMatchError(err) {
		return nil, fmt.Errorf("listing Machines for node %s: %w", node.Name, err)
	}
	m, err := machineapi.MachineOfNode(node, list.Items)
	if machineapi.IsLinkError(err) {
		return nil, fmt.Errorf("refusing to act on node %s: %w", node.Name, err)
	}
	return m, err
}

func hasSet(m *machinev1beta1.Machine) bool {
	ref := metav1.GetControllerOf(m)
	return ref != nil && ref.Kind == "MachineSet"
}

// instanceOf is the instance an action is about, in its provider's
// words: the Machine's own (the last part of its spec.providerID), else
// the one the node's spec.providerID names (checked against the
// provider's record before any reboot), else the node's name.
func instanceOf(node *corev1.Node, m *machinev1beta1.Machine) string {
	if m != nil {
		if id := machineapi.InstanceOfProviderID(ptr.Deref(m.Spec.ProviderID, "")); id != "" {
			return id
		}
	}
	if id := machineapi.InstanceOfProviderID(node.Spec.ProviderID); id != "" {
		return id
	}
	return node.Name
}
