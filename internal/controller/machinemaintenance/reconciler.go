package machinemaintenance

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/cloud"
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
