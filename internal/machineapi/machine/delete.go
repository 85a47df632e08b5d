package machine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/budget"
	"github.com/pitstop-dev/pitstop/internal/drain"
	"github.com/pitstop-dev/pitstop/internal/machineapi"
	"github.com/pitstop-dev/pitstop/internal/machineapi/provider"
	"github.com/pitstop-dev/pitstop/internal/maintenance"
	"github.com/pitstop-dev/pitstop/internal/nodeview"
)

// controlPlaneDrain is the budget of one that control-plane machines'
// drains share: two control-plane nodes draining at once can deadlock on
// the PodDisruptionBudgets guarding the control plane, or lose quorum. It
// is a source's budget: the profiles' sweep, which knows nothing of a
// Machine's drain, leaves its slot to the Machine controller.
var controlPlaneDrain = budget.SourceKey("machine-control-plane-drain")

// reconcileDelete runs a deleted Machine's sequence, one step per
// reconcile until each is done: drain (after the preDrain hooks), the
// preTerminate hooks, the instance, the Node, the finalizer.
func (r *Reconciler) reconcileDelete(ctx context.Context, m *machinev1beta1.Machine, now metav1.Time) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(m, Finalizer) {
		return ctrl.Result{}, nil
	}
	setPhase(m, machinev1beta1.PhaseDeleting, now)
	node, err := r.nodeOf(ctx, m)
	if err != nil {
		return ctrl.Result{}, err
	}
	if node != nil {
		if result, done, err := r.reconcileDrain(ctx, m, node, now); !done {
			return result, err
		}
	}
	if hooks := m.Spec.LifecycleHooks.PreTerminate; len(hooks) > 0 {
		if setHookCondition(m, machinev1beta1.MachineTerminable, "Instance termination", hooks, now) {
			r.eventTerminationBlocked(m, hooks)
		}
		return ctrl.Result{}, nil // removing a hook is a change of the Machine, which wakes it
	}
	setHookCondition(m, machinev1beta1.MachineTerminable, "Instance termination", nil, now)
	if result, gone, err := r.reconcileInstanceGone(ctx, m, now); !gone {
		return result, err
	}
	if node != nil {
		if err := r.client.Delete(ctx, node); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("deleting node %s of machine %s/%s: %w", node.Name, m.Namespace, m.Name, err)
		}
	}
	if err := r.finishDrain(ctx, m); err != nil {
		return ctrl.Result{}, err
	}
	controllerutil.RemoveFinalizer(m, Finalizer)
	r.eventDeleted(m)
	return ctrl.Result{}, nil
}

// nodeOf returns the Machine's Node, or nil when it has none (never
// linked, or gone).
func (r *Reconciler) nodeOf(ctx context.Context, m *machinev1beta1.Machine) (*corev1.Node, error) {
	if m.Status.NodeRef == nil || m.Status.NodeRef.Name == "" {
		return nil, nil
	}
	node := &corev1.Node{}
	if err := r.client.Get(ctx, client.ObjectKey{Name: m.Status.NodeRef.Name}, node); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading node %s of machine %s/%s: %w", m.Status.NodeRef.Name, m.Namespace, m.Name, err)
	}
	return node, nil
}

// reconcileDrain drains the Machine's Node through a NodeMaintenance and
// reports done once it is drained, or the drain is skipped.
func (r *Reconciler) reconcileDrain(ctx context.Context, m *machinev1beta1.Machine, node *corev1.Node, now metav1.Time) (ctrl.Result, bool, error) {
	if c := machineapi.Condition(m.Status.Conditions, machinev1beta1.MachineDrained); c != nil && c.Status == corev1.ConditionTrue {
		return ctrl.Result{}, true, nil
	}
	if _, skip := m.Annotations[machineapi.AnnotationExcludeNodeDraining]; skip {
		setDrained(m, corev1.ConditionTrue, ReasonDrainSkipped, "Node drain skipped: the machine has the annotation "+machineapi.AnnotationExcludeNodeDraining, now)
		r.eventDrainSkipped(m, node)
		return ctrl.Result{}, true, nil
	}
	if hooks := m.Spec.LifecycleHooks.PreDrain; len(hooks) > 0 {
		if setHookCondition(m, machinev1beta1.MachineDrainable, "Drain operation", hooks, now) {
			r.eventDrainBlocked(m, hooks)
		}
		return ctrl.Result{}, false, nil
	}
	setHookCondition(m, machinev1beta1.MachineDrainable, "Drain operation", nil, now)
	if maintenance.IsControlPlane(node) {
		got, err := r.takeControlPlaneTurn(ctx, node, now)
		if err != nil {
			return ctrl.Result{}, false, err
		}
		if !got {
			setDrained(m, corev1.ConditionFalse, ReasonWaitingForControlPlane,
				"waiting: another control-plane machine is draining, and one drains at a time", now)
			return ctrl.Result{RequeueAfter: awaitControlPlane}, false, nil
		}
	}
	nm, err := r.maintenanceOf(ctx, m, node)
	if err != nil {
		// Refused (the control-plane quorum guard, say) or failing: the
		// condition says so, and the drain is asked for again with backoff.
		setDrained(m, corev1.ConditionFalse, machinev1beta1.MachineDrainError, err.Error(), now)
		return ctrl.Result{}, false, err
	}
	if nm == nil {
		return ctrl.Result{}, false, nil
	}
	ready := meta.FindStatusCondition(nm.Status.Conditions, pitstopv1alpha1.ConditionReady)
	if ready != nil && ready.Status == metav1.ConditionTrue {
		setDrained(m, corev1.ConditionTrue, ReasonDrained, "node "+node.Name+" drained by NodeMaintenance "+nm.Name, now)
		r.eventDrained(m, node, nm)
		return ctrl.Result{}, true, nil
	}
	if isUnreachable(node) {
		left, err := r.podsLeftToEvict(ctx, node)
		if err != nil {
			return ctrl.Result{}, false, err
		}
		if left == 0 {
			// Pods evicted from a node whose kubelet is gone never finish
			// terminating; the instance's deletion ends them.
			setDrained(m, corev1.ConditionTrue, ReasonDrained, "node "+node.Name+" is unreachable and every pod to evict is terminating (NodeMaintenance "+nm.Name+")", now)
			r.eventDrained(m, node, nm)
			return ctrl.Result{}, true, nil
		}
	}
	switch {
	case ready != nil && ready.Reason == pitstopv1alpha1.ReasonFailed:
		setDrained(m, corev1.ConditionFalse, machinev1beta1.MachineDrainError, "NodeMaintenance "+nm.Name+" failed: "+ready.Message, now)
		return ctrl.Result{RequeueAfter: retryDrain}, false, nil
	}
	msg := "draining node " + node.Name + " (NodeMaintenance " + nm.Name + ")"
	if ready != nil && ready.Message != "" {
		msg += ": " + ready.Message
	}
	setDrained(m, corev1.ConditionFalse, ReasonDraining, msg, now)
	if isUnreachable(node) {
		// Evicted pods do not change the NodeMaintenance once all are
		// terminating: look at them again.
		return ctrl.Result{RequeueAfter: awaitControlPlane}, false, nil
	}
	return ctrl.Result{}, false, nil // the NodeMaintenance's progress wakes the Machine
}

// maintenanceOf returns the NodeMaintenance draining the Machine's Node,
// creating it when there is none. A NodeMaintenance someone else made for
// the node does the drain as well: a node is in one maintenance at a time.
// It returns nil (and no error) when it just created one.
func (r *Reconciler) maintenanceOf(ctx context.Context, m *machinev1beta1.Machine, node *corev1.Node) (*pitstopv1alpha1.NodeMaintenance, error) {
	nms := &pitstopv1alpha1.NodeMaintenanceList{}
	if err := r.client.List(ctx, nms); err != nil {
		return nil, fmt.Errorf("listing NodeMaintenances: %w", err)
	}
	for i := range nms.Items {
		if nms.Items[i].Spec.NodeName == node.Name && nms.Items[i].DeletionTimestamp.IsZero() {
			return &nms.Items[i], nil
		}
	}
	nm := &pitstopv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{
			Name:        maintenance.ForMachine(node.Name),
			Labels:      map[string]string{pitstopv1alpha1.LabelSource: SourceMachine},
			Annotations: map[string]string{pitstopv1alpha1.AnnotationMachine: m.Namespace + "/" + m.Name},
		},
		Spec: pitstopv1alpha1.NodeMaintenanceSpec{
			NodeName: node.Name,
			Reason:   "machine " + m.Namespace + "/" + m.Name + " is being deleted",
			// As the Machine API drains: pods without a controller go too.
			Drain: pitstopv1alpha1.DrainSpec{UnmanagedPods: pitstopv1alpha1.UnmanagedPodsDelete},
		},
	}
	if r.opts.DrainTimeout > 0 {
		nm.Spec.Drain.Timeout = &pitstopv1alpha1.Duration{Duration: r.opts.DrainTimeout}
		nm.Spec.Drain.OnTimeout = r.opts.DrainOnTimeout
	}
	if err := r.client.Create(ctx, nm); apierrors.IsAlreadyExists(err) {
		return nil, nil // the cache has not seen it yet
	} else if err != nil {
		return nil, fmt.Errorf("creating NodeMaintenance %s for machine %s/%s: %w", nm.Name, m.Namespace, m.Name, err)
	}
	r.eventDrainStarted(m, node, nm)
	return nil, nil
}

// isUnreachable says whether the node's kubelet stopped reporting: its
// Ready condition is Unknown.
func isUnreachable(node *corev1.Node) bool {
	c := nodeview.Condition(node, corev1.NodeReady)
	return c != nil && c.Status == corev1.ConditionUnknown
}

// podsLeftToEvict counts the pods on the node that the drain still has to
// evict or delete, leaving out those already terminating and those a
// drain leaves (DaemonSet and mirror pods).
func (r *Reconciler) podsLeftToEvict(ctx context.Context, node *corev1.Node) (int, error) {
	pods := &corev1.PodList{}
	if err := r.client.List(ctx, pods, client.MatchingFields{maintenance.IndexPodNode: node.Name}); err != nil {
		return 0, fmt.Errorf("listing the pods of node %s: %w", node.Name, err)
	}
	plan := drain.NewPlan(pods.Items, drain.Options{DeleteUnmanaged: true})
	return len(plan.Evict) + len(plan.Waiting) + len(plan.Delete) + len(plan.Blocked), nil
}

// takeControlPlaneTurn takes the one control-plane drain slot for node, or
// reports that another control-plane node holds it. The slot is a Lease
// taken with optimistic concurrency, so two Machines deleted at once, on
// two replicas even, never both drain. A holder's turn ends once its node
// is gone and its drain's NodeMaintenance is being removed (or is gone, or
// its Machine is): the node is deleted a moment before the
// NodeMaintenance, and the next drain must not start in between.
func (r *Reconciler) takeControlPlaneTurn(ctx context.Context, node *corev1.Node, now metav1.Time) (bool, error) {
	stale := func(holder string, _ *coordinationv1.Lease) bool {
		if err := r.reader.Get(ctx, client.ObjectKey{Name: holder}, &corev1.Node{}); !apierrors.IsNotFound(err) {
			return false
		}
		nm := &pitstopv1alpha1.NodeMaintenance{}
		err := r.reader.Get(ctx, client.ObjectKey{Name: maintenance.ForMachine(holder)}, nm)
		switch {
		case apierrors.IsNotFound(err):
			return true
		case err != nil:
			return false
		case !nm.DeletionTimestamp.IsZero():
			return true
		}
		m, ok := machineOf(nm)
		if !ok {
			return true // not a Machine's drain
		}
		err = r.reader.Get(ctx, m, &machinev1beta1.Machine{})
		return apierrors.IsNotFound(err)
	}
	_, got, err := r.slots.Acquire(ctx, controlPlaneDrain, 1, node.Name, now.Time, stale)
	if err != nil {
		return false, fmt.Errorf("taking the control-plane drain turn for node %s: %w", node.Name, err)
	}
	return got, nil
}

// finishDrain removes the Machine's drain once its instance is gone: the
// NodeMaintenance it created and its control-plane drain turn.
func (r *Reconciler) finishDrain(ctx context.Context, m *machinev1beta1.Machine) error {
	if m.Status.NodeRef == nil {
		return nil
	}
	node := m.Status.NodeRef.Name
	nm := &pitstopv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: maintenance.ForMachine(node)}}
	if err := r.client.Get(ctx, client.ObjectKeyFromObject(nm), nm); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("reading NodeMaintenance %s: %w", nm.Name, err)
	} else if err == nil && nm.Annotations[pitstopv1alpha1.AnnotationMachine] == m.Namespace+"/"+m.Name {
		if err := r.client.Delete(ctx, nm); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting NodeMaintenance %s: %w", nm.Name, err)
		}
	}
	if err := r.slots.Release(ctx, controlPlaneDrain, node); err != nil {
		return fmt.Errorf("giving back the control-plane drain turn of node %s: %w", node, err)
	}
	return nil
}

// reconcileInstanceGone deletes the Machine's instance and reports gone
// once its provider no longer finds it.
func (r *Reconciler) reconcileInstanceGone(ctx context.Context, m *machinev1beta1.Machine, now metav1.Time) (ctrl.Result, bool, error) {
	p, err := r.providers.For(m)
	if errors.Is(err, provider.ErrInvalidConfig) {
		// A providerSpec that names no provider never made an instance.
		return ctrl.Result{}, true, nil
	}
	if err != nil {
		// The instance may exist; only its provider can delete it.
		machineapi.SetCondition(&m.Status.Conditions, machinev1beta1.Condition{
			Type: machinev1beta1.InstanceExistsCondition, Status: corev1.ConditionUnknown, Reason: ReasonProviderNotServed,
			Severity: machinev1beta1.ConditionSeverityWarning, Message: err.Error(),
		}, now)
		return ctrl.Result{}, false, nil
	}
	inst, err := p.Describe(ctx, m)
	switch {
	case errors.Is(err, provider.ErrNotFound):
		machineapi.SetCondition(&m.Status.Conditions, machinev1beta1.Condition{
			Type: machinev1beta1.InstanceExistsCondition, Status: corev1.ConditionFalse, Reason: machinev1beta1.InstanceMissingReason,
			Message: "the instance is deleted",
		}, now)
		return ctrl.Result{}, true, nil
	case errors.Is(err, provider.ErrInvalidConfig):
		return ctrl.Result{}, true, nil
	case err != nil:
		return ctrl.Result{}, false, fmt.Errorf("describing the instance of machine %s/%s: %w", m.Namespace, m.Name, err)
	}
	if err := p.Delete(ctx, m); err != nil {
		r.eventDeleteFailed(m, err)
		return ctrl.Result{}, false, fmt.Errorf("deleting the instance of machine %s/%s: %w", m.Namespace, m.Name, err)
	}
	if inst.State != "" {
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[machineapi.AnnotationInstanceState] = inst.State
	}
	after := inst.PollAfter
	if after <= 0 {
		after = pollDeleting
	}
	return ctrl.Result{RequeueAfter: min(after, pollInstance)}, false, nil
}

// setDrained sets the Drained condition.
func setDrained(m *machinev1beta1.Machine, status corev1.ConditionStatus, reason, msg string, now metav1.Time) {
	severity := machinev1beta1.ConditionSeverityNone
	if status != corev1.ConditionTrue {
		severity = machinev1beta1.ConditionSeverityInfo
	}
	machineapi.SetCondition(&m.Status.Conditions, machinev1beta1.Condition{
		Type: machinev1beta1.MachineDrained, Status: status, Reason: reason, Message: msg, Severity: severity,
	}, now)
}

// setHookCondition sets Drainable or Terminable: false while lifecycle
// hooks hold the step, naming them; true once none does. It reports
// whether the condition changed.
func setHookCondition(m *machinev1beta1.Machine, t machinev1beta1.ConditionType, step string, hooks []machinev1beta1.LifecycleHook, now metav1.Time) bool {
	if len(hooks) == 0 {
		return machineapi.SetCondition(&m.Status.Conditions, machinev1beta1.Condition{Type: t, Status: corev1.ConditionTrue, Reason: ReasonNoHooks}, now)
	}
	names := make([]string, len(hooks))
	for i, h := range hooks {
		names[i] = h.Name + " (" + h.Owner + ")"
	}
	return machineapi.SetCondition(&m.Status.Conditions, machinev1beta1.Condition{
		Type: t, Status: corev1.ConditionFalse, Reason: machinev1beta1.MachineHookPresent, Severity: machinev1beta1.ConditionSeverityWarning,
		Message: step + " currently blocked by: " + strings.Join(names, ", "),
	}, now)
}
