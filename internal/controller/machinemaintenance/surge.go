package machinemaintenance

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/machineapi"
	"github.com/pitstop-dev/pitstop/internal/nodeview"
)

// A surge ends one of three ways, each with its MachineSet back at its
// size and at most one Machine removed for it:
//   - completed: the new Machine runs with its node Ready, the old one is
//     marked and the set shrinks, removing the marked one;
//   - outlived: the old Machine is removed by someone else (a health
//     check, the cloud, a user); the set replaces it, so the surge's
//     replica is taken back and the new Machine stays in its place;
//   - undone (StepUndoingSurge): the new Machine is not Ready in time, the
//     old one's links disagree at the last step, or the object is deleted;
//     the new Machine is marked and the set shrinks, removing it, and the
//     old one stays.
//
// FinalizerSurge holds the object from before the set grows until the
// action is over, so that a delete runs the undo first; the object is no
// longer owned by the old Machine from then on, so that the Machine's
// deletion does not take the record along.

// How a Machine is removed through its MachineSet: marked for deletion,
// then the set shrunk once the mark has reached the MachineSet controller.
const (
	// markSettle is how long the mark, already seen by pitstop's own
	// cache, is left to reach a MachineSet controller in another process
	// before the set shrinks. The two writes reach it through different
	// watches: a new size seen before the mark removes a Machine nobody
	// chose.
	markSettle = 5 * time.Second
	// removalGrace is how long after the set shrank the old Machine may
	// still not be on its way out before pitstop looks at what the set
	// did: if it removed another Machine, that was the surge's one
	// removal; if it removed none, pitstop deletes the old one.
	removalGrace = 2 * time.Minute
	// undoing separates, in an undone surge's message, why it is undone
	// from how.
	undoing = "; undoing the surge"
)

// awaitReplacement waits for the surge's new Machine to run with its
// node Ready, then goes on to remove the old one; past the timeout it
// undoes the surge.
func (r *Reconciler) awaitReplacement(ctx context.Context, mm *pitstopv1alpha1.MachineMaintenance, m *machinev1beta1.Machine, all []pitstopv1alpha1.MachineMaintenance, now time.Time) error {
	a := mm.Status.Action
	ready, err := r.replacement(ctx, mm, m, all)
	if err != nil {
		return err
	}
	if ready {
		step(a, pitstopv1alpha1.StepDeletingMachine, "machine %s is Running and its node Ready; removing machine %s", a.Replacement, m.Name)
		return nil
	}
	if a.ScaledUpTime == nil {
		// Scaled up by a pitstop that did not record when: the wait
		// starts now.
		a.ScaledUpTime = &metav1.Time{Time: now}
	}
	limit := r.replacementTimeout(a)
	if now.Before(a.ScaledUpTime.Add(limit)) {
		return nil
	}
	why := fmt.Sprintf("MachineSet %s made no new machine within %s of the scale-up", a.MachineSet, limit)
	if a.Replacement != "" {
		why = fmt.Sprintf("new machine %s did not run with its node Ready within %s of the scale-up", a.Replacement, limit)
	}
	startUndo(a, mm, why)
	return nil
}

// replacementTimeout is how long a surge waits for its new Machine: the
// trigger's timeout, else the controller's default.
func (r *Reconciler) replacementTimeout(a *pitstopv1alpha1.MachineAction) time.Duration {
	// An invalid duration can only come from a status written by hand
	// (the profile's is validated): the default holds then.
	if a.Timeout != nil && a.Timeout.Invalid == nil && a.Timeout.Duration > 0 {
		return a.Timeout.Duration
	}
	return r.opts.ReplacementTimeout
}

// startUndo moves a surge to StepUndoingSurge, saying why.
func startUndo(a *pitstopv1alpha1.MachineAction, mm *pitstopv1alpha1.MachineMaintenance, why string) {
	a.MarkedTime = nil // the undo's own marks settle from their own time
	step(a, pitstopv1alpha1.StepUndoingSurge, "%s%s: the new machine is marked for deletion, then MachineSet %s shrinks back; machine %s stays",
		why, undoing, a.MachineSet, mm.Spec.MachineName)
}

// refusedAtLastStep handles the old Machine's links disagreeing just
// before it would be marked or deleted: pitstop touches it no further.
// While the set still holds the surge's replica, the surge is undone (the
// new Machine, which pitstop knows as the set's own, is the one
// removed); once the set has shrunk, the set removes at most the Machine
// marked while the links still agreed, and pitstop deletes nothing.
func (r *Reconciler) refusedAtLastStep(ctx context.Context, mm *pitstopv1alpha1.MachineMaintenance, refusal error) error {
	a := mm.Status.Action
	recorded, err := r.surgeRecorded(ctx, mm)
	if err != nil {
		return err
	}
	if !recorded {
		return refuse(fmt.Errorf("%w; MachineSet %s had already shrunk back to its size, so it removes at most machine %s, marked before the links disagreed: pitstop deletes nothing",
			refusal, a.MachineSet, mm.Spec.MachineName))
	}
	startUndo(a, mm, "refused to replace: "+refusal.Error())
	return refusal // act raises TargetRefused and keeps the step
}

// undoSurge takes the surge's replica back so that the Machine the set
// removes is the new one: the old Machine's mark (if pitstop put one) is
// taken off, the new Machine is marked, and once both have had time to
// reach the set's controller the set shrinks. The action then fails,
// saying why the surge was undone.
func (r *Reconciler) undoSurge(ctx context.Context, mm *pitstopv1alpha1.MachineMaintenance, old *machinev1beta1.Machine, all []pitstopv1alpha1.MachineMaintenance, now time.Time) error {
	a := mm.Status.Action
	recorded, err := r.surgeRecorded(ctx, mm)
	if err != nil {
		return err
	}
	why, _, _ := strings.Cut(a.Message, undoing)
	if !recorded {
		step(a, pitstopv1alpha1.StepFailed, "%s; MachineSet %s holds no replica of the surge (never added, or already taken back): nothing to undo", why, a.MachineSet)
		return nil
	}
	if isOurMark(mm, old) {
		if err := r.setMark(ctx, mm, old, false); err != nil {
			return err
		}
		a.MarkedTime = &metav1.Time{Time: now}
		return nil
	}
	added, err := r.newMachine(ctx, mm, old, all)
	if err != nil {
		return err
	}
	if added != nil && added.DeletionTimestamp.IsZero() {
		if _, marked := added.Annotations[machineapi.AnnotationDeleteMachine]; !marked {
			if err := r.setMark(ctx, mm, added, true); err != nil {
				return err
			}
			a.Replacement, a.MarkedTime = added.Name, &metav1.Time{Time: now}
			return nil
		}
	}
	if a.MarkedTime != nil && now.Before(a.MarkedTime.Add(markSettle)) {
		return nil
	}
	if err := r.scaleBack(ctx, mm); err != nil {
		return err
	}
	removes := "no new machine was made"
	if added != nil {
		removes = "it removes new machine " + added.Name + ", marked for deletion"
	}
	step(a, pitstopv1alpha1.StepFailed, "%s; surge undone: MachineSet %s is back at its size (%s) and machine %s stays",
		why, a.MachineSet, removes, mm.Spec.MachineName)
	return nil
}

// oldMachineGone ends a surge whose old Machine is gone or going. Past
// the scale-up and before pitstop marked it, someone else removed it (a
// health check, the cloud, a user): the set replaces it, so the surge's
// replica is taken back and the new Machine, if any, stays in its place;
// nothing more is removed.
func (r *Reconciler) oldMachineGone(ctx context.Context, mm *pitstopv1alpha1.MachineMaintenance, m *machinev1beta1.Machine) error {
	a := mm.Status.Action
	if err := r.scaleBack(ctx, mm); err != nil {
		return err
	}
	if a.Step == pitstopv1alpha1.StepDeletingMachine {
		if m != nil {
			a.Message = waitingGone(m)
			return nil
		}
		step(a, pitstopv1alpha1.StepDone, "machine %s is gone", mm.Spec.MachineName)
		return nil
	}
	stays := ""
	if a.Replacement != "" {
		// Marked while the surge was being undone: it stands in for the
		// old one now.
		added := &machinev1beta1.Machine{}
		err := r.client.Get(ctx, client.ObjectKey{Namespace: mm.Namespace, Name: a.Replacement}, added)
		if client.IgnoreNotFound(err) != nil {
			return err
		}
		if err == nil && isOurMark(mm, added) {
			if err := r.setMark(ctx, mm, added, false); err != nil {
				return err
			}
		}
		stays = "; new machine " + a.Replacement + " stays in its place"
	}
	if a.Step == pitstopv1alpha1.StepUndoingSurge {
		why, _, _ := strings.Cut(a.Message, undoing)
		step(a, pitstopv1alpha1.StepFailed, "%s; then machine %s was removed by someone else: MachineSet %s is back at its size%s",
			why, mm.Spec.MachineName, a.MachineSet, stays)
		return nil
	}
	step(a, pitstopv1alpha1.StepDone, "machine %s was removed by someone else during the surge: MachineSet %s is back at its size%s",
		mm.Spec.MachineName, a.MachineSet, stays)
	return nil
}

// removeSurged removes the old Machine of a surge: it marks the Machine,
// waits until its own cache shows the mark and markSettle has passed,
// shrinks the set, and waits for the Machine to go. removalGrace later,
// a set that removed another Machine instead has made the surge's one
// removal: the old Machine stays, its mark is taken off, and the action
// fails; a set that removed none gets the old Machine deleted.
func (r *Reconciler) removeSurged(ctx context.Context, mm *pitstopv1alpha1.MachineMaintenance, m *machinev1beta1.Machine, all []pitstopv1alpha1.MachineMaintenance, now time.Time) error {
	a := mm.Status.Action
	if _, marked := m.Annotations[machineapi.AnnotationDeleteMachine]; !marked {
		if err := r.setMark(ctx, mm, m, true); err != nil {
			return err
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
	removed, err := r.removedInstead(ctx, mm, m, all)
	if err != nil {
		return err
	}
	if len(removed) > 0 {
		if isOurMark(mm, m) {
			if err := r.setMark(ctx, mm, m, false); err != nil {
				return err
			}
		}
		step(a, pitstopv1alpha1.StepFailed, "MachineSet %s removed machine %s instead of machine %s, which was marked for deletion: one replacement removes one machine, so %s stays, its mark taken off, and its event still applies to it",
			a.MachineSet, strings.Join(removed, ", "), m.Name, m.Name)
		r.recorder.Eventf(mm, nil, corev1.EventTypeWarning, eventMachineNotRemoved, string(a.Type), "%s", a.Message)
		return nil
	}
	if err := r.client.Delete(ctx, m, client.Preconditions{UID: &m.UID}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting machine %s, which MachineSet %s did not remove: %w", m.Name, a.MachineSet, err)
	}
	r.recorder.Eventf(mm, nil, corev1.EventTypeWarning, eventMachineNotRemoved, string(a.Type),
		"MachineSet %s shrank but removed neither machine %s, marked for deletion %s ago, nor any other: pitstop deleted it",
		a.MachineSet, m.Name, now.Sub(a.MarkedTime.Time).Round(time.Second))
	return nil
}

// removedInstead names the Machines of the surge's set, other than the
// old one, that are gone or going: the set's machines before the surge
// and the new one, less those another replacement on the set is about
// (their removal is theirs). Read from the API server.
func (r *Reconciler) removedInstead(ctx context.Context, mm *pitstopv1alpha1.MachineMaintenance, old *machinev1beta1.Machine, all []pitstopv1alpha1.MachineMaintenance) ([]string, error) {
	a := mm.Status.Action
	var list machinev1beta1.MachineList
	if err := r.reader.List(ctx, &list, client.InNamespace(mm.Namespace)); err != nil {
		return nil, fmt.Errorf("listing machines of MachineSet %s: %w", a.MachineSet, err)
	}
	live := map[string]bool{}
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp.IsZero() {
			live[list.Items[i].Name] = true
		}
	}
	others := map[string]bool{old.Name: true}
	for i := range all {
		o := &all[i]
		if oa := o.Status.Action; o.Namespace == mm.Namespace && o.Name != mm.Name && oa != nil && oa.MachineSet == a.MachineSet {
			others[o.Spec.MachineName], others[oa.Replacement] = true, true
		}
	}
	var removed []string
	for _, name := range append(slices.Clone(a.Existing), a.Replacement) {
		if name != "" && !others[name] && !live[name] && !slices.Contains(removed, name) {
			removed = append(removed, name)
		}
	}
	sort.Strings(removed)
	return removed, nil
}

// markOf is the value of the deletion mark pitstop puts on a Machine for
// mm.
func markOf(mm *pitstopv1alpha1.MachineMaintenance) string {
	return "pitstop: " + mm.Name
}

// isOurMark says whether m carries the deletion mark pitstop put on it
// for mm (or, before marks named their object, for its event's code).
func isOurMark(mm *pitstopv1alpha1.MachineMaintenance, m *machinev1beta1.Machine) bool {
	v, ok := m.Annotations[machineapi.AnnotationDeleteMachine]
	return ok && (v == markOf(mm) || v == "pitstop: "+mm.Spec.Code)
}

// setMark puts the deletion mark on m, or takes it off.
func (r *Reconciler) setMark(ctx context.Context, mm *pitstopv1alpha1.MachineMaintenance, m *machinev1beta1.Machine, on bool) error {
	patch := client.MergeFrom(m.DeepCopy())
	if on {
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[machineapi.AnnotationDeleteMachine] = markOf(mm)
	} else {
		delete(m.Annotations, machineapi.AnnotationDeleteMachine)
	}
	if err := r.client.Patch(ctx, m, patch); err != nil {
		if on {
			return fmt.Errorf("marking machine %s for deletion: %w", m.Name, err)
		}
		return client.IgnoreNotFound(fmt.Errorf("taking the deletion mark off machine %s: %w", m.Name, err))
	}
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

// wakeLeft is how soon a surge's clock runs out (a mark settled, the
// replacement's timeout), if that is sooner than the usual look again.
func (r *Reconciler) wakeLeft(a *pitstopv1alpha1.MachineAction, now time.Time) time.Duration {
	if a.Type != pitstopv1alpha1.ActionReplace {
		return 0
	}
	var at time.Time
	switch {
	case a.Step == pitstopv1alpha1.StepWaitingForReplacement && a.ScaledUpTime != nil:
		at = a.ScaledUpTime.Add(r.replacementTimeout(a))
	case (a.Step == pitstopv1alpha1.StepDeletingMachine || a.Step == pitstopv1alpha1.StepUndoingSurge) && a.MarkedTime != nil:
		at = a.MarkedTime.Add(markSettle)
	}
	if left := at.Sub(now); !at.IsZero() && left > 0 {
		return left + 100*time.Millisecond
	}
	return 0
}

// replacement claims the new Machine of the surge and says whether it is
// ready: the oldest Machine of the set that was not there when the surge
// began and that no other replacement has claimed, claimed (recorded in
// the action) before it runs, so that two surges at once each get one of
// the two new machines whichever runs first; ready once it is Running with
// its node Ready and taking workloads (no not-ready taint left).
func (r *Reconciler) replacement(ctx context.Context, mm *pitstopv1alpha1.MachineMaintenance, old *machinev1beta1.Machine, all []pitstopv1alpha1.MachineMaintenance) (bool, error) {
	a := mm.Status.Action
	claimed, err := r.newMachine(ctx, mm, old, all)
	if err != nil {
		return false, err
	}
	if claimed == nil || !claimed.DeletionTimestamp.IsZero() {
		a.Replacement = ""
		a.Message = "waiting for MachineSet " + a.MachineSet + " to create the new machine"
		return false, nil
	}
	a.Replacement = claimed.Name
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

// newMachine is the surge's new Machine: the one it claimed while it is
// there, else the oldest Machine of the set that was not there when the
// surge began and that no other replacement has claimed; nil when the set
// has made none.
func (r *Reconciler) newMachine(ctx context.Context, mm *pitstopv1alpha1.MachineMaintenance, old *machinev1beta1.Machine, all []pitstopv1alpha1.MachineMaintenance) (*machinev1beta1.Machine, error) {
	a := mm.Status.Action
	var machines machinev1beta1.MachineList
	if err := r.client.List(ctx, &machines, client.InNamespace(mm.Namespace)); err != nil {
		return nil, err
	}
	if a.Replacement != "" {
		for i := range machines.Items {
			if m := &machines.Items[i]; m.Name == a.Replacement && m.DeletionTimestamp.IsZero() {
				return m, nil
			}
		}
	}
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
			return m, nil
		}
	}
	return nil, nil //nolint:nilnil // the set has made none yet
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
