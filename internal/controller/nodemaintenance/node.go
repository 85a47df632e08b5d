package nodemaintenance

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/budget"
	"github.com/pitstop-dev/pitstop/internal/drain"
	"github.com/pitstop-dev/pitstop/internal/maintenance"
	"github.com/pitstop-dev/pitstop/internal/nodepatch"
	"github.com/pitstop-dev/pitstop/internal/nodeview"
)

// quorumRetry is how often a control-plane maintenance held back by the
// quorum rule looks again (node readiness changes also wake it; an etcd
// member's recovery is seen at the next look). A test shortens it.
var quorumRetry = 30 * time.Second

// turnRetry is how soon a control-plane cordon that waits for another
// manager's turn looks again: a turn lasts well under a second.
const turnRetry = time.Second

// medik8sDrainTaint is the taint the medik8s Node Maintenance Operator puts
// on the nodes it maintains. A node that carries it was cordoned by that
// maintenance, which pitstop takes over when a cluster switches
// (--medik8s-compat): the cordon is the maintenance's, not someone else's.
const medik8sDrainTaint = "medik8s.io/drain"

// pitstopTaints are the taints a maintained node carries.
// The drain plan leaves on the node the pods that tolerate them all.
var pitstopTaints = drain.CordonTaints

// reconcileCordon makes the node unschedulable and taints it, remembering
// whether someone else had cordoned it first. A control-plane node is only
// cordoned when enough other control-plane nodes stay Ready for quorum.
func (r *Reconciler) reconcileCordon(ctx context.Context, s *snapshot) (time.Duration, bool, error) {
	node := s.node
	var before bool
	cordon := cordonFor(s.nm, s.others, &before)
	want := cordon(node)
	if equality.Semantic.DeepEqual(node, want) {
		s.nm.Status.CordonedBefore = &before
		setCondition(s.nm, pitstopv1alpha1.ConditionCordoned, true, pitstopv1alpha1.ReasonCordoned, fmt.Sprintf("node %s is unschedulable and tainted %s", node.Name, pitstopv1alpha1.TaintDrain))
		return 0, false, nil
	}
	if maintenance.IsControlPlane(node) {
		r.controlPlane.Lock()
		defer r.controlPlane.Unlock()
		holder, err := r.takeControlPlaneTurn(ctx, node.Name, s.now)
		if err != nil || holder != node.Name {
			if holder != "" {
				setCondition(s.nm, pitstopv1alpha1.ConditionCordoned, false, pitstopv1alpha1.ReasonQuorumProtected,
					fmt.Sprintf("waiting while control-plane node %s is checked and cordoned: one control-plane node at a time", holder))
			}
			return turnRetry, true, err
		}
		defer r.giveBackControlPlaneTurn(ctx, node.Name)
		if why, err := r.quorumCheck(ctx, s.nm); err != nil || why != "" {
			if why != "" {
				setCondition(s.nm, pitstopv1alpha1.ConditionCordoned, false, pitstopv1alpha1.ReasonQuorumProtected, why)
			}
			return quorumRetry, true, err
		}
	}
	want, _, err := r.patchNode(ctx, node, cordon)
	if err == nil {
		s.nm.Status.CordonedBefore = &before
	}
	if err != nil {
		s.nm.Status.LastError = fmt.Sprintf("cordoning node %s: %v", node.Name, err)
		setCondition(s.nm, pitstopv1alpha1.ConditionCordoned, false, pitstopv1alpha1.ReasonCordonFailed, s.nm.Status.LastError)
		return 0, true, fmt.Errorf("cordoning node %s: %w", node.Name, err)
	}
	s.node = want
	if !isConditionTrue(s.nm, pitstopv1alpha1.ConditionCordoned) {
		r.eventCordoned(s.nm, node)
	}
	setCondition(s.nm, pitstopv1alpha1.ConditionCordoned, true, pitstopv1alpha1.ReasonCordoned, fmt.Sprintf("node %s is unschedulable and tainted %s", node.Name, pitstopv1alpha1.TaintDrain))
	return 0, false, nil
}

// quorumCheck reads the control-plane nodes, the etcd members and the
// etcd guard from the API server, not the cache: a cordon decided on a
// stale count could take quorum down. A node counts as down when it is
// not Ready or pitstop has cordoned it; the caller holds the
// controlPlane lock, so the cordon this check allows is visible to the
// next one.
func (r *Reconciler) quorumCheck(ctx context.Context, nm *pitstopv1alpha1.NodeMaintenance) (string, error) {
	v, err := maintenance.ReadQuorum(ctx, r.apiReader, r.apiReader)
	if err != nil {
		return "", err
	}
	v.Down, v.AllowSingle = cordonedByPitstop(v.Nodes), r.opts.AllowSingleControlPlane
	return v.Violation(nm.Spec.NodeName), nil
}

// cordonedByPitstop are the nodes that carry pitstop's drain taint.
func cordonedByPitstop(nodes []corev1.Node) map[string]bool {
	down := map[string]bool{}
	for i := range nodes {
		if nodeview.HasTaint(&nodes[i], pitstopv1alpha1.TaintDrain) {
			down[nodes[i].Name] = true
		}
	}
	return down
}

// medik8sTaints are added for a maintenance made for a medik8s
// NodeMaintenance: the taint that operator puts on the nodes it
// maintains, which the other medik8s components and workloads read.
var medik8sTaints = []corev1.Taint{{Key: medik8sDrainTaint, Effect: corev1.TaintEffectNoSchedule}}

// cordonedBefore says whether nm's node was cordoned by someone else
// before pitstop cordoned it. It is decided once, when nm first cordons the
// node, and kept in nm's status: the node's annotation
// AnnotationCordonedBefore is a copy for people and tools, which anyone
// who may patch the node (its own kubelet too) can change, so the restore
// goes by the status. A node pitstop has cordoned already (its drain taint
// is on it) keeps the record of the NodeMaintenance that cordoned it
// first; without one (a reconcile cut off between the cordon and its
// status write) the annotation is taken, and anything but "false" keeps
// the cordon.
func cordonedBefore(nm *pitstopv1alpha1.NodeMaintenance, node *corev1.Node, others []pitstopv1alpha1.NodeMaintenance) bool {
	if v := nm.Status.CordonedBefore; v != nil {
		return *v
	}
	if nodeview.HasTaint(node, pitstopv1alpha1.TaintDrain) {
		for i := range others {
			if v := others[i].Status.CordonedBefore; v != nil && others[i].DeletionTimestamp.IsZero() {
				return *v
			}
		}
		if v, ok := node.Annotations[pitstopv1alpha1.AnnotationCordonedBefore]; ok {
			return v != "false"
		}
	}
	return node.Spec.Unschedulable && !nodeview.HasTaint(node, medik8sDrainTaint)
}

// cordonFor is cordoned for nm: with medik8s' taint as well when nm was
// made for a medik8s NodeMaintenance (of either API). It decides the record
// of the cordon from the node it is given (the API server's copy, when the
// one read was stale) and leaves it in before.
func cordonFor(nm *pitstopv1alpha1.NodeMaintenance, others []pitstopv1alpha1.NodeMaintenance, before *bool) func(*corev1.Node) *corev1.Node {
	medik8s := nm.Labels[pitstopv1alpha1.LabelSource] == pitstopv1alpha1.SourceMedik8s || nm.Labels[pitstopv1alpha1.LabelSource] == pitstopv1alpha1.SourceKubevirt
	return func(node *corev1.Node) *corev1.Node {
		*before = cordonedBefore(nm, node, others)
		want := cordoned(node, *before)
		if !medik8s {
			return want
		}
		for _, t := range medik8sTaints {
			if !nodeview.HasTaint(want, t.Key) {
				want.Spec.Taints = append(want.Spec.Taints, t)
			}
		}
		return want
	}
}

// cordoned returns the node as maintenance wants it: unschedulable, with
// pitstop's taints, marked as down on purpose, and with the record of
// whether it was cordoned before pitstop came (before, as cordonedBefore
// decided it; a record someone changed on the node is written back).
func cordoned(node *corev1.Node, before bool) *corev1.Node {
	want := node.DeepCopy()
	if want.Annotations == nil {
		want.Annotations = map[string]string{}
	}
	want.Annotations[pitstopv1alpha1.AnnotationCordonedBefore] = strconv.FormatBool(before)
	if want.Labels == nil {
		want.Labels = map[string]string{}
	}
	want.Labels[pitstopv1alpha1.LabelExcludeFromRemediation] = "true"
	want.Spec.Unschedulable = true
	for _, t := range pitstopTaints {
		if !nodeview.HasTaint(want, t.Key) {
			want.Spec.Taints = append(want.Spec.Taints, t)
		}
	}
	return want
}

// restoreNode undoes what cordoned did. A node that was cordoned before
// pitstop came stays cordoned (and keeps the standard unschedulable taint,
// which belongs to the cordon); an Event says why.
func (r *Reconciler) restoreNode(ctx context.Context, nm *pitstopv1alpha1.NodeMaintenance, node *corev1.Node) error {
	_, wrote, err := r.patchNode(ctx, node, func(node *corev1.Node) *corev1.Node { return restored(nm, node) })
	if err != nil {
		return fmt.Errorf("restoring node %s: %w", node.Name, err)
	}
	if wrote {
		r.eventRestored(nm, node, !liftsCordon(nm, node))
	}
	return nil
}

// restored returns nm's node as it was before maintenance.
func restored(nm *pitstopv1alpha1.NodeMaintenance, node *corev1.Node) *corev1.Node {
	want := node.DeepCopy()
	lift := liftsCordon(nm, node)
	delete(want.Annotations, pitstopv1alpha1.AnnotationCordonedBefore)
	delete(want.Labels, pitstopv1alpha1.LabelExcludeFromRemediation)
	want.Spec.Taints = withoutTaint(want.Spec.Taints, pitstopv1alpha1.TaintDrain)
	want.Spec.Taints = withoutTaint(want.Spec.Taints, medik8sDrainTaint)
	if lift {
		want.Spec.Unschedulable = false
		want.Spec.Taints = withoutTaint(want.Spec.Taints, corev1.TaintNodeUnschedulable)
	}
	return want
}

// liftsCordon says whether restoring nm's node lifts its cordon: only when
// the cordon is pitstop's, by nm's record of the first cordon (the node's
// annotation only for a NodeMaintenance that has none, written before the
// record was kept there), and while pitstop's marks (the annotation or its
// drain taint) are still on the node. Without them the node was restored
// already (a reconcile that restored it and then lost a conflict on the
// finalizer), or pitstop never cordoned it: either way the cordon is not
// pitstop's to lift.
func liftsCordon(nm *pitstopv1alpha1.NodeMaintenance, node *corev1.Node) bool {
	note, noted := node.Annotations[pitstopv1alpha1.AnnotationCordonedBefore]
	if v := nm.Status.CordonedBefore; v != nil {
		return !*v && (noted || nodeview.HasTaint(node, pitstopv1alpha1.TaintDrain))
	}
	return noted && note == "false"
}

// nodeLock is what cordoned and restored read beyond what they change:
// whether pitstop recorded the node as cordoned before, whether it is
// unschedulable, and its taints. A write is locked on these and on what it
// changes, not on the whole node, so that the profile engine's record or
// another controller's label written in between does not make it fail.
var nodeLock = nodepatch.Lock{
	Annotations:   []string{pitstopv1alpha1.AnnotationCordonedBefore},
	Unschedulable: true,
	Taints:        true,
}

// patchNode writes change(node), if it changes anything, locked on
// nodeLock. When a locked field of the node read from the cache was behind
// the API server, it applies change to the API server's copy and writes
// that, rather than waiting for a requeue; a second stale write is a
// conflict. It returns the node as it now is, and whether it wrote it.
func (r *Reconciler) patchNode(ctx context.Context, node *corev1.Node, change func(*corev1.Node) *corev1.Node) (*corev1.Node, bool, error) {
	want := change(node)
	if equality.Semantic.DeepEqual(node, want) {
		return node, false, nil
	}
	err := nodepatch.Write(ctx, r.client, r.apiReader, node, want, nodeLock)
	if !errors.Is(err, nodepatch.ErrStale) {
		return want, err == nil, err
	}
	live := nodepatch.LiveNode(err)
	if live == nil {
		live = &corev1.Node{}
		if err := r.apiReader.Get(ctx, client.ObjectKeyFromObject(node), live); err != nil {
			return nil, false, err
		}
	}
	want = change(live)
	if equality.Semantic.DeepEqual(live, want) {
		return live, false, nil
	}
	err = nodepatch.Write(ctx, r.client, r.apiReader, live, want, nodeLock)
	if errors.Is(err, nodepatch.ErrStale) {
		err = apierrors.NewConflict(corev1.Resource("nodes"), node.Name, err)
	}
	return want, err == nil, err
}

func withoutTaint(taints []corev1.Taint, key string) []corev1.Taint {
	out := taints[:0:0]
	for _, t := range taints {
		if t.Key != key {
			out = append(out, t)
		}
	}
	return out
}

// controlPlaneTurn is the budget of one through which every manager of the
// cluster, replicas and leader-election splits included, takes its turn to
// check quorum and cordon a control-plane node: a check and a cordon in two
// processes at once could each find quorum kept and together break it.
var controlPlaneTurn = budget.Key{Name: "control-plane-cordon"}

// turnLifetime is how long a turn may be held: a check and a cordon take
// well under a second, so a turn older than this belongs to a manager that
// stopped in between.
const turnLifetime = 30 * time.Second

// takeControlPlaneTurn takes the turn for node and returns node, or returns
// the node that holds it.
func (r *Reconciler) takeControlPlaneTurn(ctx context.Context, node string, now time.Time) (string, error) {
	stale := func(_ string, lease *coordinationv1.Lease) bool {
		t := lease.Spec.AcquireTime
		if lease.Spec.RenewTime != nil {
			t = lease.Spec.RenewTime
		}
		return t == nil || now.Sub(t.Time) > turnLifetime
	}
	_, got, err := r.turns.Acquire(ctx, controlPlaneTurn, 1, node, now, stale)
	if err != nil {
		return "", fmt.Errorf("taking the control-plane cordon turn for node %s: %w", node, err)
	}
	if got {
		return node, nil
	}
	holders, err := r.turns.Holders(ctx, controlPlaneTurn)
	if err != nil || len(holders) == 0 {
		return "", err
	}
	return holders[0], nil
}

// giveBackControlPlaneTurn ends node's turn, once its cordon is written (or
// refused), so that the next check sees it.
func (r *Reconciler) giveBackControlPlaneTurn(ctx context.Context, node string) {
	if err := r.turns.Release(ctx, controlPlaneTurn, node); err != nil {
		logf.FromContext(ctx).Error(err, "Giving back the control-plane cordon turn failed; it expires", "node", node, "after", turnLifetime)
	}
}
