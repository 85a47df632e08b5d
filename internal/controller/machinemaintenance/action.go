package machinemaintenance

import (
	"context"
	"fmt"
	"strings"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/cloud"
	"github.com/pitstop-dev/pitstop/internal/nodeview"
)

// providerPitstop is spec.provider of an object a profile's trigger made
// for a replacement or reboot without a cloud event.
const providerPitstop = "pitstop"

// actionOver says whether an action has reached its end.
func actionOver(a *pitstopv1alpha1.MachineAction) bool {
	return a.Step == pitstopv1alpha1.StepDone || a.Step == pitstopv1alpha1.StepFailed
}

// act takes the object's action one step further and records the step
// before it acts on it, so that a restart resumes where it stopped. It
// returns when to look again.
func (r *Reconciler) act(ctx context.Context, mm *pitstopv1alpha1.MachineMaintenance, all []pitstopv1alpha1.MachineMaintenance, now time.Time) (time.Duration, error) {
	before := mm.DeepCopy()
	var err error
	switch mm.Status.Action.Type {
	case pitstopv1alpha1.ActionReplace:
		err = r.replace(ctx, mm, all, now)
	case pitstopv1alpha1.ActionReboot:
		err = r.reboot(ctx, mm, now)
	}
	a := mm.Status.Action
	refused := isRefusal(err)
	if refused {
		// Nothing was deleted or rebooted, and asking again finds the
		// same links: the action fails, saying which disagree (once its
		// surge, if any, is undone).
		if a.Step != pitstopv1alpha1.StepUndoingSurge {
			step(a, pitstopv1alpha1.StepFailed, "refused to %s: %v", strings.ToLower(string(a.Type)), err)
		}
		err = nil
	}
	if actionOver(a) && a.CompletionTime == nil {
		a.CompletionTime = &metav1.Time{Time: now}
	}
	if !equality.Semantic.DeepEqual(before.Status, mm.Status) {
		// With the resourceVersion read: a step recorded from a copy
		// that another write has since changed would take the action
		// back.
		if perr := r.client.Status().Patch(ctx, mm, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); perr != nil {
			return 0, client.IgnoreNotFound(perr)
		}
		switch {
		case refused:
			r.recorder.Eventf(mm, nil, corev1.EventTypeWarning, eventTargetRefused, string(a.Type), "%s", a.Message)
		case a.Step != before.Status.Action.Step:
			kind := corev1.EventTypeNormal
			if a.Step == pitstopv1alpha1.StepFailed || a.Step == pitstopv1alpha1.StepUndoingSurge {
				kind = corev1.EventTypeWarning
			}
			r.recorder.Eventf(mm, nil, kind, eventActionStep, string(a.Type), "%s: %s", a.Step, a.Message)
		}
	}
	if err != nil {
		return 0, err
	}
	if actionOver(a) {
		return 0, nil
	}
	if left := r.wakeLeft(a, now); left > 0 {
		return min(left, actionPoll), nil
	}
	return actionPoll, nil
}

// replace runs a Machine's replacement: with surge, the MachineSet grows
// by one, the new Machine runs and its Node is Ready, then the old
// Machine is marked for deletion and the set shrinks back; without surge,
// the Machine is deleted (its node drained as for any deletion). Every
// surge ends with the set at its size, completed or undone (surge.go).
func (r *Reconciler) replace(ctx context.Context, mm *pitstopv1alpha1.MachineMaintenance, all []pitstopv1alpha1.MachineMaintenance, now time.Time) error {
	a := mm.Status.Action
	m := &machinev1beta1.Machine{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: mm.Namespace, Name: mm.Spec.MachineName}, m); err != nil {
		if !apierrors.IsNotFound(err) {
			return err
		}
		m = nil
	}
	if !mm.DeletionTimestamp.IsZero() {
		// Only a surge holds the object (FinalizerSurge): its replica
		// goes back before the object does.
		switch {
		case a.Step == pitstopv1alpha1.StepRequested:
			step(a, pitstopv1alpha1.StepFailed, "MachineMaintenance %s/%s was deleted before the replacement started", mm.Namespace, mm.Name)
			return nil
		case a.Surge && a.Step != pitstopv1alpha1.StepUndoingSurge:
			startUndo(a, mm, fmt.Sprintf("MachineMaintenance %s/%s was deleted mid-surge", mm.Namespace, mm.Name))
			return nil
		}
	}
	if a.Surge && a.Step != pitstopv1alpha1.StepRequested && mm.DeletionTimestamp.IsZero() {
		// A surge started by an earlier pitstop may not be held yet.
		if err := r.holdForSurge(ctx, mm); err != nil {
			return err
		}
	}
	if a.Surge && a.Step != pitstopv1alpha1.StepRequested && (m == nil || !m.DeletionTimestamp.IsZero()) {
		return r.oldMachineGone(ctx, mm, m)
	}
	if m == nil {
		if a.Step == pitstopv1alpha1.StepDeletingMachine {
			step(a, pitstopv1alpha1.StepDone, "machine %s is gone", mm.Spec.MachineName)
			return nil
		}
		step(a, pitstopv1alpha1.StepFailed, "machine %s is gone before pitstop replaced it", mm.Spec.MachineName)
		return nil
	}
	switch a.Step {
	case pitstopv1alpha1.StepRequested:
		return r.startReplace(ctx, mm, m, all)
	case pitstopv1alpha1.StepScalingUp:
		if err := r.scaleUp(ctx, mm); err != nil {
			return err
		}
		a.ScaledUpTime = &metav1.Time{Time: now}
		step(a, pitstopv1alpha1.StepWaitingForReplacement, "waiting for a new machine of MachineSet %s to run with its node Ready", a.MachineSet)
		return nil
	case pitstopv1alpha1.StepWaitingForReplacement:
		return r.awaitReplacement(ctx, mm, m, all, now)
	case pitstopv1alpha1.StepDeletingMachine:
		if err := r.disown(ctx, mm); err != nil {
			return err
		}
		if !m.DeletionTimestamp.IsZero() {
			a.Message = waitingGone(m)
			return nil
		}
		// Checked again before the Machine is deleted or marked, as the
		// API server has it now.
		fresh, err := r.verifiedMachine(ctx, mm)
		if isRefusal(err) {
			// The cache may lag behind the Machine's removal (the set
			// removing the marked Machine, or a delete already sent):
			// that is the step done, not links that disagree.
			if going, gone, rerr := r.machineLeaving(ctx, mm); rerr != nil {
				return rerr
			} else if gone {
				step(a, pitstopv1alpha1.StepDone, "machine %s is gone", mm.Spec.MachineName)
				return nil
			} else if going {
				a.Message = waitingGone(m)
				return nil
			}
		}
		if isRefusal(err) && a.Surge {
			return r.refusedAtLastStep(ctx, mm, err)
		}
		if err != nil {
			return err
		}
		if a.Surge {
			return r.removeSurged(ctx, mm, fresh, all, now)
		}
		if err := r.client.Delete(ctx, fresh); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting machine %s: %w", fresh.Name, err)
		}
		a.Message = waitingGone(fresh)
		return nil
	case pitstopv1alpha1.StepUndoingSurge:
		return r.undoSurge(ctx, mm, m, all, now)
	}
	return nil
}

// startReplace checks the Machine and, for a surge, records its set and
// the set's machines before it grows. From then on the object is no
// longer the Machine's (the record must outlive it) and FinalizerSurge
// holds it until the set is back at its size.
func (r *Reconciler) startReplace(ctx context.Context, mm *pitstopv1alpha1.MachineMaintenance, m *machinev1beta1.Machine, all []pitstopv1alpha1.MachineMaintenance) error {
	a := mm.Status.Action
	// Before anything moves: the Machine must be the node's by its own
	// status.nodeRef, read from the API server.
	if _, err := r.verifiedMachine(ctx, mm); err != nil {
		return err
	}
	if a.ControlPlane {
		if !a.Surge {
			a.Message = "a control-plane machine is only replaced with surge, and " + m.Name + " belongs to no MachineSet: replace it by hand"
			return nil
		}
		if other := busyControlPlane(all, mm); other != "" {
			a.Message = "waiting for the replacement of control-plane machine " + other + ": one at a time"
			return nil
		}
	}
	if !a.Surge {
		step(a, pitstopv1alpha1.StepDeletingMachine, "deleting machine %s (no surge)", m.Name)
		return r.disown(ctx, mm)
	}
	set := owningSet(m)
	if set == "" {
		step(a, pitstopv1alpha1.StepFailed, "surge asked for, but machine %s belongs to no MachineSet", m.Name)
		return nil
	}
	// The set's machines before the surge are recorded before it grows:
	// none of them can pass for the new one, even after a restart
	// between the growth and the next step.
	existing, err := r.setMachines(ctx, mm.Namespace, set)
	if err != nil {
		return err
	}
	if err := r.holdForSurge(ctx, mm); err != nil {
		return err
	}
	a.MachineSet, a.Existing = set, existing
	step(a, pitstopv1alpha1.StepScalingUp, "adding a machine to MachineSet %s", set)
	return nil
}

// busyControlPlane names another control-plane machine being replaced.
func busyControlPlane(all []pitstopv1alpha1.MachineMaintenance, mm *pitstopv1alpha1.MachineMaintenance) string {
	for i := range all {
		o := &all[i]
		a := o.Status.Action
		if o.Name == mm.Name && o.Namespace == mm.Namespace || a == nil || !a.ControlPlane || a.Type != pitstopv1alpha1.ActionReplace {
			continue
		}
		if a.Step != pitstopv1alpha1.StepRequested && !actionOver(a) {
			return o.Spec.MachineName
		}
	}
	return ""
}

// reboot reboots the instance of a drained node and waits until it is
// back: a new boot ID, Ready. The profile's trigger drained the node
// before asking, and restores it after.
func (r *Reconciler) reboot(ctx context.Context, mm *pitstopv1alpha1.MachineMaintenance, now time.Time) error {
	a := mm.Status.Action
	node := &corev1.Node{}
	if err := r.client.Get(ctx, client.ObjectKey{Name: mm.Spec.NodeName}, node); err != nil {
		if apierrors.IsNotFound(err) {
			step(a, pitstopv1alpha1.StepFailed, "node %s is gone", mm.Spec.NodeName)
			return nil
		}
		return err
	}
	switch a.Step {
	case pitstopv1alpha1.StepRequested:
		step(a, pitstopv1alpha1.StepRebooting, "rebooting instance %s", mm.Spec.InstanceID)
		return nil
	case pitstopv1alpha1.StepRebooting:
		t, err := r.target(ctx, mm)
		if err != nil {
			return err
		}
		// A restart between the call and the next step's record reboots
		// once more: harmless, where a lost reboot would leave the node
		// cordoned until the timeout.
		if err := r.cloud.Reboot(ctx, t); err != nil {
			a.Message = err.Error()
			return err
		}
		step(a, pitstopv1alpha1.StepWaitingForNode, "waiting for node %s to come back (a new boot ID, Ready)", node.Name)
		return nil
	case pitstopv1alpha1.StepWaitingForNode:
		if node.Status.NodeInfo.BootID != a.BootID && nodeview.Ready(node) {
			step(a, pitstopv1alpha1.StepDone, "node %s is back with boot ID %s", node.Name, node.Status.NodeInfo.BootID)
			return nil
		}
		if a.Timeout != nil && a.StartTime != nil && now.After(a.StartTime.Add(a.Timeout.Duration)) {
			step(a, pitstopv1alpha1.StepFailed, "node %s did not come back within %s; it stays cordoned", node.Name, a.Timeout.Duration)
		}
	}
	return nil
}

// target is the instance to reboot: the Machine's own (its
// status.providerStatus or spec.providerID) once the Machine is verified
// as the node's; for a node without a Machine, the instance its
// spec.providerID names once the provider's record agrees.
func (r *Reconciler) target(ctx context.Context, mm *pitstopv1alpha1.MachineMaintenance) (cloud.Target, error) {
	if mm.Spec.MachineName != "" {
		m, err := r.verifiedMachine(ctx, mm)
		if err != nil {
			return cloud.Target{}, err
		}
		t, ok := r.cloud.MachineTarget(m)
		if !ok {
			return cloud.Target{}, refuse(fmt.Errorf("machine %s/%s has no %s instance (status.providerStatus, spec.providerID %q)",
				m.Namespace, m.Name, r.cloud.Name(), ptr.Deref(m.Spec.ProviderID, "")))
		}
		return t, nil
	}
	return r.verifiedNodeTarget(ctx, mm.Spec.NodeName)
}

// disown drops the Machine's owner reference, so that the record outlives
// the Machine it is about.
func (r *Reconciler) disown(ctx context.Context, mm *pitstopv1alpha1.MachineMaintenance) error {
	if len(mm.OwnerReferences) == 0 {
		return nil
	}
	patch := client.MergeFrom(mm.DeepCopy())
	status := mm.Status
	mm.OwnerReferences = nil
	if err := r.client.Patch(ctx, mm, patch); err != nil {
		return client.IgnoreNotFound(err)
	}
	mm.Status = status // the patch answers with the stored status
	return nil
}

// step moves the action on and says why.
func step(a *pitstopv1alpha1.MachineAction, s pitstopv1alpha1.ActionStep, format string, args ...any) {
	a.Step = s
	a.Message = fmt.Sprintf(format, args...)
}

// owningSet names the MachineSet that controls a Machine.
func owningSet(m *machinev1beta1.Machine) string {
	if ref := metav1.GetControllerOf(m); ref != nil && ref.Kind == "MachineSet" {
		return ref.Name
	}
	return ""
}

// machineLeaving reads the action's Machine from the API server: whether
// it is being deleted, or gone.
func (r *Reconciler) machineLeaving(ctx context.Context, mm *pitstopv1alpha1.MachineMaintenance) (going, gone bool, err error) {
	m := &machinev1beta1.Machine{}
	if err := r.reader.Get(ctx, client.ObjectKey{Namespace: mm.Namespace, Name: mm.Spec.MachineName}, m); err != nil {
		if apierrors.IsNotFound(err) {
			return false, true, nil
		}
		return false, false, fmt.Errorf("reading machine %s: %w", mm.Spec.MachineName, err)
	}
	return !m.DeletionTimestamp.IsZero(), false, nil
}
