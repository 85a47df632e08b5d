package nodemaintenance

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/drain"
)

const (
	// statusListLimit bounds pendingPods and blockers in status.
	statusListLimit = 20
	// messageListLimit bounds the pods named in a condition message.
	messageListLimit = 5
	// safetyRequeue wakes a drain that waits on pods even if a watch event
	// was missed.
	safetyRequeue = time.Minute
)

// reconcileDrain empties the node: deletes finished pods, evicts the rest in
// parallel through the Eviction API, and reports what is left and why. It
// never waits: pods leaving and budgets changing wake it through watches;
// refusals are retried after spec.drain.podEvictionRetryInterval.
func (r *Reconciler) reconcileDrain(ctx context.Context, s *snapshot) (time.Duration, bool, error) {
	nm := s.nm
	if excludesDraining(nm, s.node) {
		setCondition(nm, pitstopv1alpha1.ConditionDrained, true, pitstopv1alpha1.ReasonDrainSkipped,
			fmt.Sprintf("cordon only: %s is set", pitstopv1alpha1.AnnotationExcludeNodeDraining))
		return 0, false, nil
	}
	if isConditionReason(nm, pitstopv1alpha1.ConditionDrained, pitstopv1alpha1.ReasonDrainTimedOut) {
		return 0, true, nil // failed for good; delete and recreate to try again
	}
	opts, err := planOptions(nm)
	if err != nil {
		// An update of the spec wakes the reconcile again.
		setCondition(nm, pitstopv1alpha1.ConditionDrained, false, pitstopv1alpha1.ReasonInvalidSpec, err.Error())
		return 0, true, nil
	}
	plan := drain.NewPlan(s.pods, opts)
	if nm.Status.StartTime == nil {
		nm.Status.StartTime = &metav1.Time{Time: s.now}
		nm.Status.TotalPods = int32(len(s.pods))
		nm.Status.EvictionPods = int32(plan.Remaining())
		r.gate.startedDrain(nm.UID)
	}
	nm.Status.LeftPods = leftPods(plan.Skipped)
	if plan.Done() {
		r.drainClock.forget(nm.UID)
		r.markDrained(nm, plan, s.now)
		return 0, false, nil
	}
	waited := r.drainClock.waited(nm, s.now)
	nm.Status.DrainWaited = &metav1.Duration{Duration: waited.Truncate(time.Second)}
	if timedOut(nm, waited) {
		r.drainClock.forget(nm.UID)
		return r.onTimeout(ctx, s, plan)
	}

	// The answers to what earlier reconciles handed the eviction queue.
	answers, _ := r.queue.Take(nm.Name)
	if len(answers.Pods) > 0 {
		r.eventPods(nm, answers)
		r.gate.noticeUnreachable(answers)
		recordResults(answers)
		pdbs, err := r.refusingPDBs(ctx, answers)
		if err != nil {
			return 0, true, err
		}
		// Back off only while nothing moves: answers with an eviction
		// made progress, and the next refusal is retried after the plain
		// interval.
		stuck := answers.Count(drain.Refused) > 0 && answers.Count(drain.Evicted) == 0
		backoff := r.evicted.backoff(nm.Name, stuck, retryInterval(nm))
		r.evicted.answered(nm.Name, answers, pdbs, s.now, max(backoff, retryInterval(nm)), retryInterval(nm))
	}

	grace := nm.Spec.Drain.GracePeriodSeconds
	toEvict, held, err := r.holdStale(ctx, nm, r.evicted.filter(nm.Name, plan.Evict, s.now), s.now)
	if err != nil {
		return 0, true, err
	}
	// Handed over and not waited for: the answers come back through Take,
	// their drain woken by the queue; pods leaving wake it through watches.
	r.queue.Delete(nm.Name, plan.Delete, grace)
	r.queue.Evict(nm.Name, toEvict, grace)

	stuckAfter := r.forceDeleteStuck(ctx, nm, plan.Terminating, s.now)
	if nm.Spec.Drain.ForceDeleteTerminating {
		// The pods evicted or deleted are stuck, if they are, once their
		// grace period has passed: look then (a pod that only starts
		// terminating wakes no drain).
		for _, res := range append(answers.With(drain.Evicted), answers.With(drain.Deleted)...) {
			until := time.Duration(graceOf(res.Pod, nm.Spec.Drain.GracePeriodSeconds))*time.Second + time.Second
			if stuckAfter == 0 || until < stuckAfter {
				stuckAfter = until
			}
		}
	}

	setbacks, retryAt := r.evicted.standing(nm.Name, plan.Pending())
	pdbs, err := r.refusingPDBs(ctx, setbacks)
	if err != nil {
		return 0, true, err
	}
	r.setDrainStatus(nm, plan, setbacks, pdbs, held)
	after := requeueFor(nm, retryAt, s.now, waited)
	if stuckAfter > 0 {
		after = min(after, stuckAfter)
	}
	for _, h := range held {
		// A budget that changes wakes the drain through its watch; the
		// end of a settle period does not.
		if !h.until.IsZero() {
			after = min(after, max(h.until.Sub(s.now), time.Second))
		}
	}
	return after, true, nil
}

// graceOf is the grace period a deletion of pod gets: the drain's
// override, else the pod's own, else the API server's default.
func graceOf(pod *corev1.Pod, override *int64) int64 {
	switch {
	case override != nil:
		return *override
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		return *pod.Spec.TerminationGracePeriodSeconds
	}
	return corev1.DefaultTerminationGracePeriodSeconds
}

// forceDeleteStuck deletes without grace the terminating pods whose
// deletion grace period has passed, when spec.drain.forceDeleteTerminating
// says so, and returns when the next terminating pod's does (0: none).
func (r *Reconciler) forceDeleteStuck(ctx context.Context, nm *pitstopv1alpha1.NodeMaintenance, terminating []*corev1.Pod, now time.Time) time.Duration {
	if !nm.Spec.Drain.ForceDeleteTerminating {
		return 0
	}
	var stuck []*corev1.Pod
	var next time.Duration
	for _, p := range terminating {
		if p.DeletionTimestamp == nil {
			continue
		}
		// Deletion timestamps are whole seconds, rounded down: a second
		// more is sure to be past the grace period.
		if until := p.DeletionTimestamp.Add(time.Second).Sub(now); until > 0 {
			if next == 0 || until < next {
				next = until
			}
			continue
		}
		stuck = append(stuck, p)
	}
	if len(stuck) == 0 {
		return next
	}
	deleted := r.executor.Delete(ctx, stuck, ptr.To[int64](0))
	recordResults(deleted)
	if gone := deleted.With(drain.Deleted); len(gone) > 0 {
		pods := make([]*corev1.Pod, len(gone))
		for i, res := range gone {
			pods[i] = res.Pod
		}
		r.recorder.Eventf(nm, nil, corev1.EventTypeWarning, pitstopv1alpha1.EventForceDeleted, "Delete",
			"spec.drain.forceDeleteTerminating: deleted without grace %d pods still terminating past their grace period (their kubelet is not finishing them): %s", len(pods), podList(pods, messageListLimit))
	}
	if err := deleted.FirstError(); err != nil {
		nm.Status.LastError = err.Error()
		return retryInterval(nm)
	}
	return next
}

// planOptions turns spec.drain into plan options.
func planOptions(nm *pitstopv1alpha1.NodeMaintenance) (drain.Options, error) {
	opts := drain.Options{DeleteUnmanaged: nm.Spec.Drain.UnmanagedPods == pitstopv1alpha1.UnmanagedPodsDelete}
	if sel := nm.Spec.Drain.SkipPodsSelector; sel != nil {
		selector, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			return opts, fmt.Errorf("spec.drain.skipPodsSelector: %w", err)
		}
		if !selector.Empty() {
			opts.Skip = selector
		} else {
			opts.Skip = labels.Nothing()
		}
	}
	return opts, nil
}

func excludesDraining(nm *pitstopv1alpha1.NodeMaintenance, node *corev1.Node) bool {
	_, onNM := nm.Annotations[pitstopv1alpha1.AnnotationExcludeNodeDraining]
	_, onNode := node.Annotations[pitstopv1alpha1.AnnotationExcludeNodeDraining]
	return onNM || onNode
}

// timedOut says the drain, having waited so long, has used up
// spec.drain.timeout; never without a timeout.
func timedOut(nm *pitstopv1alpha1.NodeMaintenance, waited time.Duration) bool {
	t := nm.Spec.Drain.Timeout
	return t != nil && waited >= t.Duration
}

// recordedWait is how long the drain had waited as its status last said.
func recordedWait(nm *pitstopv1alpha1.NodeMaintenance) time.Duration {
	if nm.Status.DrainWaited == nil {
		return 0
	}
	return nm.Status.DrainWaited.Duration
}

// drainClock counts how long each drain has waited, on this process's
// monotonic clock, from what its status said when this process first ran
// it: a manager that takes over a drain goes on from the recorded wait,
// so neither the time no manager ran it nor a difference between the
// managers' clocks counts against its timeout.
type drainClock struct {
	mu    sync.Mutex
	first map[types.UID]drainStart
}

type drainStart struct {
	at       time.Time // on this process's clock, with its monotonic reading
	recorded time.Duration
}

func newDrainClock() *drainClock { return &drainClock{first: map[types.UID]drainStart{}} }

// waited is how long nm's drain has waited at now.
func (c *drainClock) waited(nm *pitstopv1alpha1.NodeMaintenance, now time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	start, ok := c.first[nm.UID]
	if !ok {
		start = drainStart{at: now, recorded: recordedWait(nm)}
		c.first[nm.UID] = start
	}
	return max(start.recorded+max(now.Sub(start.at), 0), recordedWait(nm))
}

// forget drops a drain that is over.
func (c *drainClock) forget(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.first, uid)
}

// markDrained records the end of the drain, once. Drained says the same
// every time: every pod on the node has left but those the plan leaves
// (status.leftPods), whatever came and went before.
func (r *Reconciler) markDrained(nm *pitstopv1alpha1.NodeMaintenance, plan drain.Plan, now time.Time) {
	reason, msg := pitstopv1alpha1.ReasonDrained, fmt.Sprintf("every pod that had to leave node %s has left", nm.Spec.NodeName)
	if n := len(plan.Skipped); n > 0 {
		msg += fmt.Sprintf("; %d stay (status.leftPods): %s", n, skipCounts(plan.Skipped))
	}
	if nm.Status.ForceDeletedPods > 0 {
		reason = pitstopv1alpha1.ReasonDrainedByForce
		msg = fmt.Sprintf("node %s is empty; %d pods were force-deleted past their PodDisruptionBudgets after spec.drain.timeout", nm.Spec.NodeName, nm.Status.ForceDeletedPods)
	}
	if !isConditionTrue(nm, pitstopv1alpha1.ConditionDrained) {
		took := now.Sub(nm.Status.StartTime.Time)
		drainDuration.WithLabelValues(reason).Observe(took.Seconds())
		r.eventDrained(nm, took)
	}
	nm.Status.DrainProgress = 100
	nm.Status.PendingPods = nil
	nm.Status.Blockers = nil
	nm.Status.LastError = ""
	setCondition(nm, pitstopv1alpha1.ConditionDrained, true, reason, msg)
}

// onTimeout either fails the maintenance or force-deletes what is left, as
// spec.drain.onTimeout says.
func (r *Reconciler) onTimeout(ctx context.Context, s *snapshot, plan drain.Plan) (time.Duration, bool, error) {
	nm := s.nm
	pending := plan.Pending()
	if nm.Spec.Drain.OnTimeout != pitstopv1alpha1.DrainTimeoutForceDelete {
		msg := fmt.Sprintf("spec.drain.timeout (%s) passed with %d pods left on node %s: %s", nm.Spec.Drain.Timeout.Duration, len(pending), nm.Spec.NodeName, podList(pending, messageListLimit))
		drainDuration.WithLabelValues(pitstopv1alpha1.ReasonDrainTimedOut).Observe(s.now.Sub(nm.Status.StartTime.Time).Seconds())
		r.eventDrainFailed(nm, msg)
		nm.Status.PendingPods = podRefs(pending, statusListLimit)
		setCondition(nm, pitstopv1alpha1.ConditionDrained, false, pitstopv1alpha1.ReasonDrainTimedOut, msg)
		return 0, true, nil
	}
	// Pods already terminating are deleted again with the drain's grace
	// period: a pod stuck terminating is what a timeout is most often about.
	deleted := r.executor.Delete(ctx, r.evicted.filter(nm.Name, pending, s.now), nm.Spec.Drain.GracePeriodSeconds)
	r.evicted.record(nm.Name, deleted, s.now)
	recordResults(deleted)
	forced := newlyDeleted(deleted)
	if len(forced) > 0 {
		nm.Status.ForceDeletedPods += int32(len(forced))
		r.eventForceDeleted(nm, forced)
	}
	nm.Status.PendingPods = podRefs(pending, statusListLimit)
	setCondition(nm, pitstopv1alpha1.ConditionDrained, false, pitstopv1alpha1.ReasonForceDeleting,
		fmt.Sprintf("spec.drain.timeout (%s) passed: deleting %d pods past their PodDisruptionBudgets: %s", nm.Spec.Drain.Timeout.Duration, len(pending), podList(pending, messageListLimit)))
	if err := deleted.FirstError(); err != nil {
		nm.Status.LastError = err.Error()
	}
	return retryInterval(nm), true, nil
}

// setDrainStatus writes progress, pending pods, blockers and the Drained
// condition for a drain that is not done.
func (r *Reconciler) setDrainStatus(nm *pitstopv1alpha1.NodeMaintenance, plan drain.Plan, setbacks drain.Result, pdbs map[*corev1.Pod]*policyv1.PodDisruptionBudget, held []heldPod) {
	pending := plan.Pending()
	nm.Status.PendingPods = podRefs(pending, statusListLimit)
	if total := nm.Status.EvictionPods; total > 0 {
		left := min(int32(len(pending)), total)
		nm.Status.DrainProgress = (total - left) * 100 / total
	}

	var blockers []pitstopv1alpha1.DrainBlocker
	var unmanaged []*corev1.Pod
	for _, b := range plan.Blocked {
		unmanaged = append(unmanaged, b.Pod)
		blockers = append(blockers, pitstopv1alpha1.DrainBlocker{
			Pod:     pitstopv1alpha1.PodReference{Namespace: b.Pod.Namespace, Name: b.Pod.Name},
			Reason:  pitstopv1alpha1.ReasonBlockedByUnmanagedPods,
			Message: "no controller would recreate this pod; set spec.drain.unmanagedPods: Delete to evict it",
		})
	}
	refused := setbacks.With(drain.Refused)
	budgets := map[string]*policyv1.PodDisruptionBudget{}
	var refusedPods []*corev1.Pod
	for _, res := range refused {
		refusedPods = append(refusedPods, res.Pod)
		b := pitstopv1alpha1.DrainBlocker{
			Pod:     pitstopv1alpha1.PodReference{Namespace: res.Pod.Namespace, Name: res.Pod.Name},
			Reason:  pitstopv1alpha1.ReasonBlockedByPodDisruptionBudget,
			Message: res.Err.Error(),
		}
		if pdb := pdbs[res.Pod]; pdb != nil {
			b.PodDisruptionBudget = pdb.Namespace + "/" + pdb.Name
			b.Message = drain.PDBMessage(pdb)
			budgets[b.PodDisruptionBudget] = pdb
		}
		blockers = append(blockers, b)
	}
	blockers = append(blockers, heldBlockers(held)...)
	nm.Status.Blockers = blockers[:min(len(blockers), statusListLimit)]
	nm.Status.LastError = ""
	if err := setbacks.FirstError(); err != nil {
		nm.Status.LastError = err.Error()
	}

	switch {
	case len(unmanaged) > 0:
		setCondition(nm, pitstopv1alpha1.ConditionDrained, false, pitstopv1alpha1.ReasonBlockedByUnmanagedPods,
			fmt.Sprintf("%d pods without a controller block the drain (spec.drain.unmanagedPods is Block): %s", len(unmanaged), podList(unmanaged, messageListLimit)))
	case len(refused) > 0:
		msg := fmt.Sprintf("%d pods blocked by PodDisruptionBudgets: %s", len(refused), podList(refusedPods, messageListLimit))
		for _, pdb := range sortedPDBs(budgets) {
			msg += "; " + drain.PDBMessage(pdb)
		}
		if !isConditionReason(nm, pitstopv1alpha1.ConditionDrained, pitstopv1alpha1.ReasonBlockedByPodDisruptionBudget) {
			r.eventEvictionBlocked(nm, msg)
		}
		setCondition(nm, pitstopv1alpha1.ConditionDrained, false, pitstopv1alpha1.ReasonBlockedByPodDisruptionBudget, msg)
	case len(held) > 0:
		msg := heldMessage(held)
		if !isConditionReason(nm, pitstopv1alpha1.ConditionDrained, pitstopv1alpha1.ReasonWaitingForPodDisruptionBudgetStatus) {
			r.eventEvictionHeld(nm, msg)
		}
		setCondition(nm, pitstopv1alpha1.ConditionDrained, false, pitstopv1alpha1.ReasonWaitingForPodDisruptionBudgetStatus, msg)
	case nm.Status.LastError != "":
		setCondition(nm, pitstopv1alpha1.ConditionDrained, false, pitstopv1alpha1.ReasonEvictionFailed, nm.Status.LastError)
	default:
		setCondition(nm, pitstopv1alpha1.ConditionDrained, false, pitstopv1alpha1.ReasonDraining,
			fmt.Sprintf("%d of %d pods still to leave node %s: %s", len(pending), nm.Status.EvictionPods, nm.Spec.NodeName, podList(pending, messageListLimit)))
	}
}

// requeueFor says when to look again: when the first refused or failed
// pod is due to be asked again (retryAt, zero if none), at the timeout if
// one is set, and otherwise only as a safety net (the eviction queue's
// answers, pods leaving, and budgets allowing more disruptions, wake the
// reconcile).
func requeueFor(nm *pitstopv1alpha1.NodeMaintenance, retryAt, now time.Time, waited time.Duration) time.Duration {
	after := safetyRequeue
	if !retryAt.IsZero() {
		after = min(after, max(retryAt.Sub(now), minRequeue))
	}
	if t := nm.Spec.Drain.Timeout; t != nil {
		if until := t.Duration - waited; until > 0 {
			after = min(after, until)
		}
	}
	return after
}

// minRequeue is the least wait before a retry that is already due.
const minRequeue = 10 * time.Millisecond

func retryInterval(nm *pitstopv1alpha1.NodeMaintenance) time.Duration {
	if d := nm.Spec.Drain.PodEvictionRetryInterval; d != nil && d.Duration > 0 {
		return d.Duration
	}
	return 5 * time.Second
}

// newlyDeleted are the pods this round deleted that were not terminating
// already: the ones whose budget the force-delete bypassed.
func newlyDeleted(r drain.Result) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range r.With(drain.Deleted) {
		if p.Pod.DeletionTimestamp == nil {
			out = append(out, p.Pod)
		}
	}
	return out
}

// reconcileSpec stops at a spec that cannot be read as written: a duration
// that does not parse, stored before the CRD's validation refused it. The
// node is left alone; an update of the spec wakes the reconcile again.
func reconcileSpec(_ context.Context, s *snapshot) (time.Duration, bool, error) {
	errs := s.nm.Spec.Drain.DurationErrors(field.NewPath("spec", "drain"))
	if len(errs) == 0 {
		return 0, false, nil
	}
	setCondition(s.nm, pitstopv1alpha1.ConditionDrained, false, pitstopv1alpha1.ReasonInvalidSpec, errs.ToAggregate().Error())
	return 0, true, nil
}
