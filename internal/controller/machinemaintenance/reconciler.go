package machinemaintenance

import (
	"context"
	"fmt"
	"github.com/pitstop-dev/pitstop/internal/cloud"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/nodeview"
	"github.com/pitstop-dev/pitstop/internal/notify"
)

// Defaults of the Reconciler's options.
const (
	DefaultRetention  = 7 * 24 * time.Hour
	DefaultMargin     = time.Hour
	DefaultWarnBefore = 24 * time.Hour
	// DefaultReplaceTime and DefaultRebootTime are what a replacement and
	// a reboot are expected to take until this cluster has done some.
	DefaultReplaceTime = 30 * time.Minute
	DefaultRebootTime  = 15 * time.Minute
	// DefaultReplacementTimeout is how long a surge waits for its new
	// Machine to run with its node Ready when the trigger sets no
	// timeout.
	DefaultReplacementTimeout = 20 * time.Minute
	// actionPoll is how often a running action looks again when no watch
	// wakes it.
	actionPoll = 10 * time.Second
	// outlookEvery is how often a planned event's outlook is looked at
	// again: the engine's decisions change without waking this controller.
	outlookEvery = 5 * time.Minute
)

// Reasons of the DeadlineAtRisk condition and Events.
const (
	ReasonNoProfile          = "NoProfile"
	ReasonNoTurnInTime       = "NoTurnInTime"
	ReasonPastLatestStart    = "PastLatestSafeStart"
	ReasonOnTrack            = "OnTrack"
	ReasonNoScheduledEvent   = "NoScheduledEvent"
	eventActionStep          = "ActionStep"
	eventMachineNotRemoved   = "MachineNotRemoved"
	eventDeadlineAtRisk      = "DeadlineAtRisk"
	eventRemovedAfterRetaine = "Removed"
)

// Reconciler keeps each MachineMaintenance's plan, its node's signal and
// its action going.
type Reconciler struct {
	client   client.Client
	reader   client.Reader
	cloud    cloud.Events
	recorder events.EventRecorder
	clock    clock.PassiveClock
	opts     Options
}

// Reconcile brings one MachineMaintenance and its node up to date.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	mm := &pitstopv1alpha1.MachineMaintenance{}
	getErr := r.client.Get(ctx, req.NamespacedName, mm)
	if getErr != nil && !apierrors.IsNotFound(getErr) {
		return ctrl.Result{}, getErr
	}
	now := r.clock.Now()
	var all pitstopv1alpha1.MachineMaintenanceList
	if err := r.client.List(ctx, &all); err != nil {
		return ctrl.Result{}, err
	}
	if getErr != nil {
		return ctrl.Result{}, r.deleted(ctx, req.Namespace+"/"+req.Name, all.Items)
	}
	if !mm.DeletionTimestamp.IsZero() {
		return r.release(ctx, mm, all.Items, now)
	}
	if mm.Status.Phase.Finished() && !underWay(mm) {
		return r.finished(ctx, mm, all.Items, now)
	}
	var after time.Duration
	if busy(mm) {
		// An action's steps act on the cluster: they are taken from the
		// object as the API server has it, never from a cache that has
		// not caught up with the last step (that would take it again:
		// a second surge, a set shrunk twice).
		fresh := &pitstopv1alpha1.MachineMaintenance{}
		if err := r.reader.Get(ctx, req.NamespacedName, fresh); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		mm = fresh
	}
	if busy(mm) {
		wait, err := r.act(ctx, mm, all.Items, now)
		if apierrors.IsConflict(err) {
			return ctrl.Result{RequeueAfter: time.Second}, nil
		}
		if err != nil {
			return ctrl.Result{}, err
		}
		after = wait
	}
	if mm.Status.Phase.Finished() {
		// The event ended (the instance went, say) while the action was
		// under way: the action runs to its end, so that a surge leaves
		// its set at its size; the object is finished after that.
		if after <= 0 {
			after = time.Second // over: finished next
		}
		return ctrl.Result{RequeueAfter: after}, nil
	}
	next, err := r.plan(ctx, mm, all.Items, now)
	if apierrors.IsConflict(err) {
		// Planned from a stale read: the write that made it stale
		// brings the object back.
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.signal(ctx, mm.Spec.NodeName, all.Items, mm); err != nil {
		return ctrl.Result{}, err
	}
	r.observe(all.Items, now)
	return ctrl.Result{RequeueAfter: shortest(after, until(next, now))}, nil
}

// deleted takes a deleted object's event off the nodes that carry it,
// putting on their next event if they have one.
func (r *Reconciler) deleted(ctx context.Context, object string, all []pitstopv1alpha1.MachineMaintenance) error {
	var nodes corev1.NodeList
	if err := r.client.List(ctx, &nodes); err != nil {
		return err
	}
	for i := range nodes.Items {
		if nodes.Items[i].Annotations[pitstopv1alpha1.AnnotationScheduledEventObject] == object {
			if err := r.signal(ctx, nodes.Items[i].Name, all, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// finished removes a finished object once its retention has passed, and
// frees its node of its signal.
func (r *Reconciler) finished(ctx context.Context, mm *pitstopv1alpha1.MachineMaintenance, all []pitstopv1alpha1.MachineMaintenance, now time.Time) (ctrl.Result, error) {
	if err := r.signal(ctx, mm.Spec.NodeName, all, mm); err != nil {
		return ctrl.Result{}, err
	}
	// The record outlives its Machine for the retention period; its
	// action is over, and with it any surge.
	if err := r.disown(ctx, mm); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.letGo(ctx, mm); err != nil {
		return ctrl.Result{}, err
	}
	r.observe(all, now)
	done := now
	if mm.Status.CompletionTime != nil {
		done = mm.Status.CompletionTime.Time
	}
	expires := done.Add(r.opts.Retention)
	if now.Before(expires) {
		return ctrl.Result{RequeueAfter: expires.Sub(now)}, nil
	}
	if err := r.client.Delete(ctx, mm); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
}

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

// signal puts the earliest open event of a node on it: the label, the
// annotations the deadline check reads, and the ScheduledEvent condition;
// without one, it takes them off. changed is the object just written,
// newer than its copy in all.
func (r *Reconciler) signal(ctx context.Context, nodeName string, all []pitstopv1alpha1.MachineMaintenance, changed *pitstopv1alpha1.MachineMaintenance) error {
	if nodeName == "" {
		return nil
	}
	node := &corev1.Node{}
	if err := r.client.Get(ctx, client.ObjectKey{Name: nodeName}, node); err != nil {
		return client.IgnoreNotFound(err)
	}
	var open []*pitstopv1alpha1.MachineMaintenance
	for i := range all {
		mm := &all[i]
		if changed != nil && mm.Namespace == changed.Namespace && mm.Name == changed.Name {
			mm = changed
		}
		if mm.Spec.NodeName == nodeName && !mm.Status.Phase.Finished() && mm.DeletionTimestamp.IsZero() && mm.Spec.Provider != providerPitstop {
			open = append(open, mm)
		}
	}
	sort.SliceStable(open, func(i, j int) bool { return open[i].Spec.StartsBefore(&open[j].Spec) })
	before := node.DeepCopy()
	cond := corev1.NodeCondition{Type: pitstopv1alpha1.ConditionScheduledEvent, Status: corev1.ConditionFalse, Reason: ReasonNoScheduledEvent,
		Message: "no scheduled cloud event"}
	if len(open) == 0 {
		delete(node.Labels, pitstopv1alpha1.LabelScheduledEvent)
		for _, k := range []string{pitstopv1alpha1.AnnotationScheduledEventNotBefore, pitstopv1alpha1.AnnotationScheduledEventStartBy, pitstopv1alpha1.AnnotationScheduledEventObject} {
			delete(node.Annotations, k)
		}
	} else {
		e := open[0]
		if node.Labels == nil {
			node.Labels = map[string]string{}
		}
		if node.Annotations == nil {
			node.Annotations = map[string]string{}
		}
		node.Labels[pitstopv1alpha1.LabelScheduledEvent] = e.Spec.Code
		setOrDelete(node.Annotations, pitstopv1alpha1.AnnotationScheduledEventNotBefore, rfc3339(e.Spec.NotBefore))
		setOrDelete(node.Annotations, pitstopv1alpha1.AnnotationScheduledEventStartBy, rfc3339(e.Status.LatestSafeStart))
		node.Annotations[pitstopv1alpha1.AnnotationScheduledEventObject] = e.Namespace + "/" + e.Name
		cond = corev1.NodeCondition{Type: pitstopv1alpha1.ConditionScheduledEvent, Status: corev1.ConditionTrue, Reason: camel(e.Spec.Code),
			Message: fmt.Sprintf("%s at %s (start by %s), MachineMaintenance %s/%s", e.Spec.Code, timeOr(e.Spec.NotBefore, "an unknown time"),
				timeOr(e.Status.LatestSafeStart, "-"), e.Namespace, e.Name)}
		if len(open) > 1 {
			cond.Message += fmt.Sprintf("; %d more events", len(open)-1)
		}
	}
	if !maps.Equal(before.Labels, node.Labels) || !maps.Equal(before.Annotations, node.Annotations) {
		if err := r.client.Patch(ctx, node, client.MergeFrom(before)); err != nil {
			return client.IgnoreNotFound(err)
		}
	}
	old := nodeview.Condition(before, pitstopv1alpha1.ConditionScheduledEvent)
	if old == nil && cond.Status == corev1.ConditionFalse {
		return nil // never had one: nothing to say
	}
	if old != nil && old.Status == cond.Status && old.Reason == cond.Reason && old.Message == cond.Message {
		return nil
	}
	now := metav1.NewTime(r.clock.Now())
	cond.LastHeartbeatTime, cond.LastTransitionTime = now, now
	if old != nil && old.Status == cond.Status {
		cond.LastTransitionTime = old.LastTransitionTime
	}
	statusBefore := node.DeepCopy()
	setNodeCondition(node, cond)
	if err := r.client.Status().Patch(ctx, node, client.StrategicMergeFrom(statusBefore)); err != nil {
		return client.IgnoreNotFound(err)
	}
	return nil
}

// observe sets the gauges from every object.
func (r *Reconciler) observe(all []pitstopv1alpha1.MachineMaintenance, now time.Time) {
	scheduledEvents.Reset()
	var nearest *time.Time
	risk := 0
	for i := range all {
		mm := &all[i]
		phase := mm.Status.Phase
		if phase == "" {
			phase = pitstopv1alpha1.EventScheduled
		}
		scheduledEvents.WithLabelValues(mm.Spec.Code, string(phase)).Inc()
		if phase.Finished() || mm.Status.LatestSafeStart == nil {
			continue
		}
		if t := mm.Status.LatestSafeStart.Time; nearest == nil || t.Before(*nearest) {
			nearest = &t
		}
		if c := meta.FindStatusCondition(mm.Status.Conditions, ConditionDeadlineAtRisk); c != nil && c.Status == metav1.ConditionTrue {
			risk++
		}
	}
	deadlinesAtRisk.Set(float64(risk))
	if nearest != nil {
		secondsToDeadline.Set(nearest.Sub(now).Seconds())
	} else {
		secondsToDeadline.Set(0)
	}
}

func setNodeCondition(node *corev1.Node, c corev1.NodeCondition) {
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == c.Type {
			node.Status.Conditions[i] = c
			return
		}
	}
	node.Status.Conditions = append(node.Status.Conditions, c)
}

// camel turns an event code into a condition reason: instance-retirement
// → InstanceRetirement.
func camel(code string) string {
	var b strings.Builder
	for _, part := range strings.Split(code, "-") {
		if part != "" {
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	return b.String()
}

func rfc3339(t *metav1.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func timeOr(t *metav1.Time, or string) string {
	if t == nil {
		return or
	}
	return instantOf(t.Time)
}

func instantOf(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func setOrDelete(m map[string]string, k, v string) {
	if v == "" {
		delete(m, k)
		return
	}
	m[k] = v
}

func until(t, now time.Time) time.Duration {
	if t.IsZero() {
		return 0
	}
	if d := t.Sub(now); d > 0 {
		return d + time.Second
	}
	return time.Second
}

// shortest is the shortest positive duration (0: none).
func shortest(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	}
	return min(a, b)
}
