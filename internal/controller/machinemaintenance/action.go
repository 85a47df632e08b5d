package machinemaintenance

import (
	"context"
	"fmt"
	"sort"
	"strconv"
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
	"github.com/pitstop-dev/pitstop/internal/machineapi"
	"github.com/pitstop-dev/pitstop/internal/machineapi/provider/aws"
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
		// same links: the action fails, saying which disagree.
		step(a, pitstopv1alpha1.StepFailed, "refused to %s: %v", strings.ToLower(string(a.Type)), err)
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
			if a.Step == pitstopv1alpha1.StepFailed {
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
	if left := settleLeft(a, now); left > 0 {
		return min(left, actionPoll), nil
	}
	return actionPoll, nil
}

// replace runs a Machine's replacement: with surge, the MachineSet grows
// by one, the new Machine runs and its Node is Ready, then the old
// Machine is marked for deletion and the set shrinks back; without surge,
// the Machine is deleted (its node drained as for any deletion).
func (r *Reconciler) replace(ctx context.Context, mm *pitstopv1alpha1.MachineMaintenance, all []pitstopv1alpha1.MachineMaintenance, now time.Time) error {
	a := mm.Status.Action
	m := &machinev1beta1.Machine{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: mm.Namespace, Name: mm.Spec.MachineName}, m); err != nil {
		if !apierrors.IsNotFound(err) {
			return err
		}
		m = nil
	}
	if m == nil {
		if a.Step == pitstopv1alpha1.StepDeletingMachine {
			// The set may still hold the surge's replica: it is taken off
			// before the action is done, or it would be left there.
			if err := r.scaleBack(ctx, mm); err != nil {
				return err
			}
			step(a, pitstopv1alpha1.StepDone, "machine %s is gone", mm.Spec.MachineName)
			return nil
		}
		step(a, pitstopv1alpha1.StepFailed, "machine %s is gone before pitstop replaced it", mm.Spec.MachineName)
		return nil
	}
	switch a.Step {
	case pitstopv1alpha1.StepRequested:
		// Before anything moves: the Machine must be the node's by its
		// own status.nodeRef, read from the API server.
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
		// The set's machines before the surge are recorded before it
		// grows: none of them can pass for the new one, even after a
		// restart between the growth and the next step.
		existing, err := r.setMachines(ctx, mm.Namespace, set)
		if err != nil {
			return err
		}
		a.MachineSet, a.Existing = set, existing
		step(a, pitstopv1alpha1.StepScalingUp, "adding a machine to MachineSet %s", set)
		return nil
	case pitstopv1alpha1.StepScalingUp:
		if err := r.scaleUp(ctx, mm); err != nil {
			return err
		}
		step(a, pitstopv1alpha1.StepWaitingForReplacement, "waiting for a new machine of MachineSet %s to run with its node Ready", a.MachineSet)
		return nil
	case pitstopv1alpha1.StepWaitingForReplacement:
		ready, err := r.replacement(ctx, mm, m, all)
		if err != nil || !ready {
			return err
		}
		// The record must outlive the old Machine, which goes next.
		if err := r.disown(ctx, mm); err != nil {
			return err
		}
		step(a, pitstopv1alpha1.StepDeletingMachine, "machine %s is Running and its node Ready; removing machine %s", a.Replacement, m.Name)
		return nil
	case pitstopv1alpha1.StepDeletingMachine:
		if err := r.disown(ctx, mm); err != nil {
			return err
		}
		if m.DeletionTimestamp.IsZero() {
			// Checked again before the Machine is deleted or marked, as
			// the API server has it now.
			fresh, err := r.verifiedMachine(ctx, mm)
			if isRefusal(err) && a.Surge {
				return refuse(fmt.Errorf("%w; MachineSet %s keeps the surge's replica until it is scaled back by hand", err, a.MachineSet))
			}
			if err != nil {
				return err
			}
			m = fresh
		}
		if !a.Surge {
			if m.DeletionTimestamp.IsZero() {
				if err := r.client.Delete(ctx, m); err != nil && !apierrors.IsNotFound(err) {
					return fmt.Errorf("deleting machine %s: %w", m.Name, err)
				}
			}
			a.Message = waitingGone(m)
			return nil
		}
		return r.removeSurged(ctx, mm, m, now)
	}
	return nil
}

// How the surge's old Machine is removed: marked for deletion, then the
// set shrunk by the surge's replica once the mark has reached the
// MachineSet controller.
const (
	// markSettle is how long the mark, already seen by pitstop's own
	// cache, is left to reach a MachineSet controller in another process
	// before the set shrinks. The two writes reach it through different
	// watches: a new size seen before the mark removes a Machine nobody
	// chose.
	markSettle = 5 * time.Second
	// removalGrace is how long after the set shrank the old Machine may
	// still not be on its way out before pitstop deletes it itself: the
	// set's controller ignored the mark, or removed another Machine
	// instead (the set then replaces that one).
	removalGrace = 2 * time.Minute
)

// removeSurged removes the old Machine of a surge: it marks the Machine,
// waits until its own cache shows the mark and markSettle has passed,
// shrinks the set, and waits for the Machine to go; a Machine still not
// going removalGrace later is deleted.
func (r *Reconciler) removeSurged(ctx context.Context, mm *pitstopv1alpha1.MachineMaintenance, m *machinev1beta1.Machine, now time.Time) error {
	a := mm.Status.Action
	if !m.DeletionTimestamp.IsZero() {
		a.Message = waitingGone(m)
		return r.scaleBack(ctx, mm)
	}
	if _, marked := m.Annotations[machineapi.AnnotationDeleteMachine]; !marked {
		patch := client.MergeFrom(m.DeepCopy())
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[machineapi.AnnotationDeleteMachine] = "pitstop: " + mm.Spec.Code
		if err := r.client.Patch(ctx, m, patch); err != nil {
			return fmt.Errorf("marking machine %s for deletion: %w", m.Name, err)
		}
		a.MarkedTime = &metav1.Time{Time: now}
		a.Message = waitingMark(m, a)
		return nil
	}
	if a.MarkedTime == nil {
		// Marked before a restart lost the record of it: the settle
		// starts now.
		a.MarkedTime = &metav1.Time{Time: now}
	}
	if now.Before(a.MarkedTime.Add(markSettle)) {
		a.Message = waitingMark(m, a)
		return nil
	}
	if err := r.scaleBack(ctx, mm); err != nil {
		return err
	}
	a.Message = waitingGone(m)
	if now.Before(a.MarkedTime.Add(markSettle + removalGrace)) {
		return nil
	}
	if err := r.client.Delete(ctx, m, client.Preconditions{UID: &m.UID}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting machine %s, which MachineSet %s did not remove: %w", m.Name, a.MachineSet, err)
	}
	r.recorder.Eventf(mm, nil, corev1.EventTypeWarning, eventMachineNotRemoved, string(a.Type),
		"MachineSet %s shrank but did not remove machine %s, marked for deletion %s ago; pitstop deleted it (if the set removed another machine instead, it replaces that one)",
		a.MachineSet, m.Name, now.Sub(a.MarkedTime.Time).Round(time.Second))
	return nil
}

// waitingGone says the action waits for the old Machine to go.
func waitingGone(m *machinev1beta1.Machine) string {
	return "waiting for machine " + m.Name + " to be drained and gone"
}

// waitingMark says the action waits for the mark to settle.
func waitingMark(m *machinev1beta1.Machine, a *pitstopv1alpha1.MachineAction) string {
	return fmt.Sprintf("marked machine %s for deletion; MachineSet %s shrinks once its controller has seen the mark", m.Name, a.MachineSet)
}

// settleLeft is how soon a surge whose old Machine was just marked can
// shrink its set, if that is sooner than the usual look again.
func settleLeft(a *pitstopv1alpha1.MachineAction, now time.Time) time.Duration {
	if a.Type != pitstopv1alpha1.ActionReplace || a.Step != pitstopv1alpha1.StepDeletingMachine || a.MarkedTime == nil {
		return 0
	}
	if left := a.MarkedTime.Add(markSettle).Sub(now); left > 0 {
		return left + 100*time.Millisecond
	}
	return 0
}

// scaleUp adds one replica to the MachineSet and records the surge on it
// in the same update, so that neither a restart nor a second surge at
// the same time adds it twice.
func (r *Reconciler) scaleUp(ctx context.Context, mm *pitstopv1alpha1.MachineMaintenance) error {
	// Read from the API server: an update from a stale copy would only
	// lose the race and come back.
	ms := &machinev1beta1.MachineSet{}
	if err := r.reader.Get(ctx, client.ObjectKey{Namespace: mm.Namespace, Name: mm.Status.Action.MachineSet}, ms); err != nil {
		return fmt.Errorf("reading MachineSet %s: %w", mm.Status.Action.MachineSet, err)
	}
	key := pitstopv1alpha1.AnnotationSurgePrefix + mm.Name
	if _, done := ms.Annotations[key]; done {
		return nil
	}
	replicas := int32(1)
	if ms.Spec.Replicas != nil {
		replicas = *ms.Spec.Replicas
	}
	if ms.Annotations == nil {
		ms.Annotations = map[string]string{}
	}
	ms.Annotations[key] = strconv.Itoa(int(replicas))
	ms.Spec.Replicas = new(replicas + 1)
	// Update, not patch: the resourceVersion makes two surges at once
	// each add their own replica.
	if err := r.client.Update(ctx, ms); err != nil {
		return fmt.Errorf("scaling MachineSet %s up: %w", ms.Name, err)
	}
	return nil
}

// scaleBack takes the surge's replica off the MachineSet, with its record,
// in one update; done once the record is gone.
func (r *Reconciler) scaleBack(ctx context.Context, mm *pitstopv1alpha1.MachineMaintenance) error {
	if mm.Status.Action.MachineSet == "" {
		return nil
	}
	ms := &machinev1beta1.MachineSet{}
	if err := r.reader.Get(ctx, client.ObjectKey{Namespace: mm.Namespace, Name: mm.Status.Action.MachineSet}, ms); err != nil {
		return client.IgnoreNotFound(err)
	}
	key := pitstopv1alpha1.AnnotationSurgePrefix + mm.Name
	if _, surged := ms.Annotations[key]; !surged {
		return nil
	}
	delete(ms.Annotations, key)
	if ms.Spec.Replicas != nil && *ms.Spec.Replicas > 0 {
		ms.Spec.Replicas = new(*ms.Spec.Replicas - 1)
	}
	if err := r.client.Update(ctx, ms); err != nil {
		return fmt.Errorf("scaling MachineSet %s back: %w", ms.Name, err)
	}
	return nil
}

// replacement claims the new Machine of the surge and says whether it is
// ready: the oldest Machine of the set that was not there when the surge
// began and that no other replacement has claimed, claimed (recorded in
// the action) before it runs, so that two surges at once each get one of
// the two new machines whichever runs first; ready once it is Running with
// its node Ready and taking workloads (no not-ready taint left).
func (r *Reconciler) replacement(ctx context.Context, mm *pitstopv1alpha1.MachineMaintenance, old *machinev1beta1.Machine, all []pitstopv1alpha1.MachineMaintenance) (bool, error) {
	a := mm.Status.Action
	var machines machinev1beta1.MachineList
	if err := r.client.List(ctx, &machines, client.InNamespace(mm.Namespace)); err != nil {
		return false, err
	}
	var claimed *machinev1beta1.Machine
	if a.Replacement != "" {
		for i := range machines.Items {
			if m := &machines.Items[i]; m.Name == a.Replacement && m.DeletionTimestamp.IsZero() {
				claimed = m
			}
		}
	}
	if claimed == nil {
		taken := map[string]bool{old.Name: true}
		for _, name := range a.Existing {
			taken[name] = true
		}
		for i := range all {
			if o := all[i].Status.Action; o != nil && o.Replacement != "" && !(all[i].Name == mm.Name && all[i].Namespace == mm.Namespace) {
				taken[o.Replacement] = true
			}
		}
		sort.SliceStable(machines.Items, func(i, j int) bool {
			return machines.Items[i].CreationTimestamp.Before(&machines.Items[j].CreationTimestamp)
		})
		for i := range machines.Items {
			m := &machines.Items[i]
			if !taken[m.Name] && owningSet(m) == a.MachineSet && m.DeletionTimestamp.IsZero() {
				claimed = m
				break
			}
		}
		if claimed == nil {
			a.Replacement = ""
			a.Message = "waiting for MachineSet " + a.MachineSet + " to create the new machine"
			return false, nil
		}
		a.Replacement = claimed.Name
	}
	a.Message = "waiting for machine " + claimed.Name + " to run with its node Ready"
	if claimed.Status.Phase == nil || *claimed.Status.Phase != machinev1beta1.PhaseRunning || claimed.Status.NodeRef == nil {
		return false, nil
	}
	node := &corev1.Node{}
	if err := r.client.Get(ctx, client.ObjectKey{Name: claimed.Status.NodeRef.Name}, node); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return nodeview.Serving(node), nil
}

// setMachines names the Machines of a MachineSet.
func (r *Reconciler) setMachines(ctx context.Context, namespace, set string) ([]string, error) {
	var machines machinev1beta1.MachineList
	if err := r.client.List(ctx, &machines, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	var names []string
	for i := range machines.Items {
		if owningSet(&machines.Items[i]) == set {
			names = append(names, machines.Items[i].Name)
		}
	}
	sort.Strings(names)
	return names, nil
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
func (r *Reconciler) target(ctx context.Context, mm *pitstopv1alpha1.MachineMaintenance) (aws.Target, error) {
	if mm.Spec.MachineName != "" {
		m, err := r.verifiedMachine(ctx, mm)
		if err != nil {
			return aws.Target{}, err
		}
		t, ok := r.cloud.MachineTarget(m)
		if !ok {
			return aws.Target{}, refuse(fmt.Errorf("machine %s/%s has no %s instance (status.providerStatus, spec.providerID %q)",
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
