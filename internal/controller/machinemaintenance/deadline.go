package machinemaintenance

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/notify"
)

// plan writes the phase, the latest safe start, the plan and
// DeadlineAtRisk; it returns when to look again (the warning or the
// latest safe start coming).
func (r *Reconciler) plan(ctx context.Context, mm *pitstopv1alpha1.MachineMaintenance, all []pitstopv1alpha1.MachineMaintenance, now time.Time) (time.Time, error) {
	before := mm.DeepCopy()
	node := &corev1.Node{}
	if mm.Spec.NodeName != "" {
		if err := r.client.Get(ctx, client.ObjectKey{Name: mm.Spec.NodeName}, node); err != nil {
			if !apierrors.IsNotFound(err) {
				return time.Time{}, err
			}
			node = nil
		}
	} else {
		node = nil
	}
	var next time.Time
	if mm.Spec.NotBefore != nil {
		latest := mm.Spec.NotBefore.Add(-r.expected(all, expectedAction(mm)) - r.opts.Margin)
		mm.Status.LatestSafeStart = &metav1.Time{Time: latest.Truncate(time.Second)}
	}
	state := ""
	if node != nil {
		state = node.Labels[pitstopv1alpha1.LabelState]
	}
	a := mm.Status.Action
	switch {
	case a != nil && a.Step == pitstopv1alpha1.StepDone:
		finish(mm, pitstopv1alpha1.EventCompleted, now)
		mm.Status.Plan = fmt.Sprintf("%s done", strings.ToLower(string(a.Type)))
	case a != nil && a.Step == pitstopv1alpha1.StepFailed:
		finish(mm, pitstopv1alpha1.EventFailed, now)
		mm.Status.Plan = fmt.Sprintf("%s failed: %s", strings.ToLower(string(a.Type)), a.Message)
	case a != nil:
		mm.Status.Phase = pitstopv1alpha1.EventInProgress
		mm.Status.Plan = fmt.Sprintf("%s asked by profile %s: %s", strings.ToLower(string(a.Type)), a.Profile, a.Message)
	case state == string(pitstopv1alpha1.StateMaintenanceRequired) || state == string(pitstopv1alpha1.StateInMaintenance):
		mm.Status.Phase = pitstopv1alpha1.EventPlanned
		mm.Status.Plan = fmt.Sprintf("node %s is %s: its profile acts when its checks pass (a window, or the deadline check at %s); `pitstop explain node %s` says what it waits for",
			node.Name, state, timeOr(mm.Status.LatestSafeStart, "no deadline"), node.Name)
	default:
		mm.Status.Phase = pitstopv1alpha1.EventScheduled
		if node == nil {
			mm.Status.Plan = "the instance backs no Node: no profile can act on it"
		} else {
			mm.Status.Plan = fmt.Sprintf("no profile has taken up the event: node %s carries %s=%s for a profile to select", node.Name, pitstopv1alpha1.LabelScheduledEvent, mm.Spec.Code)
		}
	}
	raised := false
	if !mm.Status.Phase.Finished() && mm.Status.LatestSafeStart != nil {
		next, raised = r.atRisk(mm, now)
	}
	if !equality.Semantic.DeepEqual(before.Status, mm.Status) {
		// With the resourceVersion read: a reconcile of a stale copy
		// must not raise the same Event and notification again.
		if err := r.client.Status().Patch(ctx, mm, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return time.Time{}, client.IgnoreNotFound(err)
		}
		if mm.Status.Phase != before.Status.Phase {
			r.recorder.Eventf(mm, nil, corev1.EventTypeNormal, string(mm.Status.Phase), "Plan", "%s", mm.Status.Plan)
		}
	}
	// Told once the condition is written, so that a retried reconcile
	// does not tell it twice.
	if raised {
		c := meta.FindStatusCondition(mm.Status.Conditions, ConditionDeadlineAtRisk)
		r.recorder.Eventf(mm, nil, corev1.EventTypeWarning, eventDeadlineAtRisk, "Plan", "%s", c.Message)
	}
	if raised && node != nil && r.opts.Notify != nil {
		if err := r.opts.Notify(ctx, node, atRiskEvent(mm)); err != nil {
			log.FromContext(ctx).Error(err, "sending the deadlineAtRisk notifications", "node", node.Name)
		}
	}
	return next, nil
}

// atRiskEvent is what a deadlineAtRisk notification says of mm.
func atRiskEvent(mm *pitstopv1alpha1.MachineMaintenance) notify.Event {
	e := notify.Event{Object: mm.Namespace + "/" + mm.Name, Code: mm.Spec.Code, Instance: mm.Spec.InstanceID, Machine: mm.Spec.MachineName}
	if mm.Spec.NotBefore != nil {
		e.NotBefore = mm.Spec.NotBefore.Time
	}
	if mm.Status.LatestSafeStart != nil {
		e.LatestSafeStart = mm.Status.LatestSafeStart.Time
	}
	if c := meta.FindStatusCondition(mm.Status.Conditions, ConditionDeadlineAtRisk); c != nil {
		e.Reason, e.Message = c.Reason, c.Message
	}
	return e
}

// atRisk sets DeadlineAtRisk: nothing has started and either no profile
// has taken the event up with the latest safe start less than WarnBefore
// away, or the latest safe start has passed. It returns when the answer
// changes by itself, and whether the condition was raised (turned True, or
// changed its reason).
func (r *Reconciler) atRisk(mm *pitstopv1alpha1.MachineMaintenance, now time.Time) (time.Time, bool) {
	latest := mm.Status.LatestSafeStart.Time
	warnAt := latest.Add(-r.opts.WarnBefore)
	started := mm.Status.Action != nil && mm.Status.Action.Step != pitstopv1alpha1.StepRequested
	c := metav1.Condition{Type: ConditionDeadlineAtRisk, Status: metav1.ConditionFalse, Reason: ReasonOnTrack, ObservedGeneration: mm.Generation}
	noTurn := ""
	if !started && mm.Status.Phase == pitstopv1alpha1.EventPlanned {
		noTurn = r.noTurnBefore(mm.Spec.NodeName, latest)
	}
	var next time.Time
	switch {
	case started:
		c.Message = "the action has started"
	case !now.Before(latest):
		c.Status, c.Reason = metav1.ConditionTrue, ReasonPastLatestStart
		c.Message = fmt.Sprintf("the latest safe start %s has passed and nothing has started: %s is due at %s", instantOf(latest), mm.Spec.Code, instantOf(mm.Spec.NotBefore.Time))
	case mm.Status.Phase == pitstopv1alpha1.EventScheduled && !now.Before(warnAt):
		c.Status, c.Reason = metav1.ConditionTrue, ReasonNoProfile
		c.Message = fmt.Sprintf("no profile has taken up %s and its latest safe start is %s", mm.Spec.Code, instantOf(latest))
		next = latest
	case noTurn != "":
		c.Status, c.Reason = metav1.ConditionTrue, ReasonNoTurnInTime
		c.Message = fmt.Sprintf("%s: the latest safe start is %s", noTurn, instantOf(latest))
		next = now.Add(outlookEvery)
	default:
		c.Message = "the latest safe start is " + instantOf(latest)
		next = latest
		if mm.Status.Phase == pitstopv1alpha1.EventScheduled {
			next = warnAt
		}
		if mm.Status.Phase == pitstopv1alpha1.EventPlanned && r.opts.Outlook != nil {
			next = earliest(next, now.Add(outlookEvery))
		}
	}
	old := meta.FindStatusCondition(mm.Status.Conditions, ConditionDeadlineAtRisk)
	raised := c.Status == metav1.ConditionTrue && (old == nil || old.Status != metav1.ConditionTrue || old.Reason != c.Reason)
	meta.SetStatusCondition(&mm.Status.Conditions, c)
	return next, raised
}

// noTurnBefore says why no profile will let the node go before latest,
// from the engine's last decisions: none takes a transition now, and the
// earliest time a check's answer changes by itself (a window opening) is
// after latest. "" when one may (a transition is taken, or an answer can
// change in time, or only a change in the cluster, such as a freed
// budget slot, can change it).
func (r *Reconciler) noTurnBefore(node string, latest time.Time) string {
	if r.opts.Outlook == nil || node == "" {
		return ""
	}
	decisions := r.opts.Outlook(node)
	if len(decisions) == 0 {
		return ""
	}
	var next time.Time
	for _, d := range decisions {
		if d.Take >= 0 || d.NextChange.IsZero() {
			return ""
		}
		next = earliest(next, d.NextChange)
	}
	if !next.After(latest) {
		return ""
	}
	return fmt.Sprintf("no transition of node %s's profiles passes now, and none can before %s (the next window or wait)", node, instantOf(next))
}

// earliest is the earlier of two times, a zero one left out.
func earliest(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero() || a.Before(b):
		return a
	}
	return b
}

// expected is how long an action of type t takes on this cluster: the
// median of the finished ones the cluster remembers, else the default.
func (r *Reconciler) expected(all []pitstopv1alpha1.MachineMaintenance, t pitstopv1alpha1.MachineActionType) time.Duration {
	var took []time.Duration
	for i := range all {
		a := all[i].Status.Action
		if a == nil || a.Type != t || a.Step != pitstopv1alpha1.StepDone || a.StartTime == nil || a.CompletionTime == nil {
			continue
		}
		took = append(took, a.CompletionTime.Sub(a.StartTime.Time))
	}
	if len(took) == 0 {
		if t == pitstopv1alpha1.ActionReboot {
			return r.opts.RebootTime
		}
		return r.opts.ReplaceTime
	}
	slices.Sort(took)
	return took[len(took)/2]
}

// expectedAction is the action an event is planned against: the one
// asked for, else a reboot for a reboot event, a replacement otherwise.
func expectedAction(mm *pitstopv1alpha1.MachineMaintenance) pitstopv1alpha1.MachineActionType {
	if a := mm.Status.Action; a != nil {
		return a.Type
	}
	if strings.HasSuffix(mm.Spec.Code, "-reboot") || mm.Spec.Code == "reboot" {
		return pitstopv1alpha1.ActionReboot
	}
	return pitstopv1alpha1.ActionReplace
}
