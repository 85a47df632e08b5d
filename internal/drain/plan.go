package drain

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

// Options tune a plan, from a NodeMaintenance's spec.drain.
type Options struct {
	// DeleteUnmanaged evicts pods that no controller owns instead of
	// reporting them as blockers.
	DeleteUnmanaged bool
	// Skip selects pods to leave on the node; nil selects none.
	Skip labels.Selector
}

// SkipReason says why a pod stays on the node.
type SkipReason string

const (
	// SkipDaemonSet: a DaemonSet pod would be recreated on the same node and
	// tolerates the cordon; kubectl drain --ignore-daemonsets leaves it too.
	SkipDaemonSet SkipReason = "DaemonSet"
	// SkipMirror: a static pod's mirror; only the kubelet can remove it.
	SkipMirror SkipReason = "MirrorPod"
	// SkipSelected: the pod matches spec.drain.skipPodsSelector.
	SkipSelected SkipReason = "SkipPodsSelector"
	// SkipToleratesCordon: the pod tolerates both taints of the cordon
	// (CordonTaints) and a controller owns it. Evicted, its controller
	// would make a replacement that the scheduler may put right back on
	// the node, to be evicted again: a loop against the scheduler. Such a
	// pod stays, as a DaemonSet pod does (and as Karpenter leaves the pods
	// that tolerate its disruption taint).
	SkipToleratesCordon SkipReason = "ToleratesCordon"
)

// CordonTaints are the NoSchedule taints a cordoned node carries and a
// pod must tolerate to be scheduled onto it: the standard one a cordon
// implies (the scheduler treats spec.unschedulable as this taint) and
// pitstop's own.
var CordonTaints = []corev1.Taint{
	{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule},
	{Key: pitstopv1alpha1.TaintDrain, Effect: corev1.TaintEffectNoSchedule},
}

// BlockReason says why a pod that must leave cannot be evicted.
type BlockReason string

// BlockUnmanaged: no controller would recreate the pod after an eviction.
const BlockUnmanaged BlockReason = "UnmanagedPod"

// Skipped is a pod the drain leaves on the node.
type Skipped struct {
	Pod    *corev1.Pod
	Reason SkipReason
}

// Blocked is a pod that must leave but that the drain will not evict.
type Blocked struct {
	Pod    *corev1.Pod
	Reason BlockReason
}

// Plan is what a drain does with the pods on one node now.
type Plan struct {
	// Evict are pods to evict through the Eviction API, in order: all
	// ordinary pods first, then critical ones (system-cluster-critical and
	// system-node-critical priority), which are evicted only once no
	// ordinary pod is left, so that node-level services outlive the
	// workloads that use them.
	Evict []*corev1.Pod
	// Waiting are critical pods held back until the ordinary ones are gone.
	Waiting []*corev1.Pod
	// Delete are finished pods (Succeeded or Failed): deleted directly, as
	// no budget protects them.
	Delete []*corev1.Pod
	// Terminating are pods already being deleted: the drain waits for them.
	Terminating []*corev1.Pod
	// Blocked are pods that must leave but will not be evicted.
	Blocked []Blocked
	// Skipped are pods that stay on the node.
	Skipped []Skipped
}

// NewPlan sorts the pods bound to a node. Pods are taken in namespace/name
// order so that plans, and the status built from them, are stable.
func NewPlan(pods []corev1.Pod, opts Options) Plan {
	sorted := make([]*corev1.Pod, 0, len(pods))
	for i := range pods {
		sorted = append(sorted, &pods[i])
	}
	slices.SortFunc(sorted, func(a, b *corev1.Pod) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})

	var p Plan
	var critical []*corev1.Pod
	for _, pod := range sorted {
		switch {
		case isMirror(pod):
			p.Skipped = append(p.Skipped, Skipped{pod, SkipMirror})
		case isDaemonSetPod(pod):
			p.Skipped = append(p.Skipped, Skipped{pod, SkipDaemonSet})
		case opts.Skip != nil && opts.Skip.Matches(labels.Set(pod.Labels)):
			p.Skipped = append(p.Skipped, Skipped{pod, SkipSelected})
		case pod.DeletionTimestamp != nil:
			p.Terminating = append(p.Terminating, pod)
		case isFinished(pod):
			p.Delete = append(p.Delete, pod)
		case metav1.GetControllerOf(pod) == nil && !opts.DeleteUnmanaged:
			p.Blocked = append(p.Blocked, Blocked{pod, BlockUnmanaged})
		case metav1.GetControllerOf(pod) != nil && ToleratesCordon(pod):
			p.Skipped = append(p.Skipped, Skipped{pod, SkipToleratesCordon})
		case isCritical(pod):
			critical = append(critical, pod)
		default:
			p.Evict = append(p.Evict, pod)
		}
	}
	if len(p.Evict) == 0 && len(p.Terminating) == 0 && len(p.Blocked) == 0 {
		p.Evict = critical
	} else {
		p.Waiting = critical
	}
	return p
}

// Remaining is the number of pods that must still leave the node.
func (p Plan) Remaining() int {
	return len(p.Evict) + len(p.Waiting) + len(p.Delete) + len(p.Terminating) + len(p.Blocked)
}

// Done reports whether every pod that must leave has left.
func (p Plan) Done() bool { return p.Remaining() == 0 }

// Pending returns the pods that must still leave, in plan order.
func (p Plan) Pending() []*corev1.Pod {
	pending := make([]*corev1.Pod, 0, p.Remaining())
	pending = append(pending, p.Terminating...)
	pending = append(pending, p.Evict...)
	pending = append(pending, p.Waiting...)
	pending = append(pending, p.Delete...)
	for _, b := range p.Blocked {
		pending = append(pending, b.Pod)
	}
	return pending
}

// String summarises the plan for logs.
func (p Plan) String() string {
	return fmt.Sprintf("evict=%d waiting=%d delete=%d terminating=%d blocked=%d skipped=%d",
		len(p.Evict), len(p.Waiting), len(p.Delete), len(p.Terminating), len(p.Blocked), len(p.Skipped))
}

func isMirror(pod *corev1.Pod) bool {
	_, ok := pod.Annotations[corev1.MirrorPodAnnotationKey]
	return ok
}

func isDaemonSetPod(pod *corev1.Pod) bool {
	owner := metav1.GetControllerOf(pod)
	return owner != nil && owner.Kind == "DaemonSet"
}

// ToleratesCordon says whether the scheduler may put pod on a node that
// carries CordonTaints: its tolerations cover both. Tolerations the API
// server adds to every pod (not-ready and unreachable, NoExecute) do not.
func ToleratesCordon(pod *corev1.Pod) bool {
	for i := range CordonTaints {
		if !tolerates(pod.Spec.Tolerations, &CordonTaints[i]) {
			return false
		}
	}
	return true
}

func tolerates(tolerations []corev1.Toleration, taint *corev1.Taint) bool {
	for i := range tolerations {
		// Neither taint has a value, so the numeric Lt and Gt operators
		// never apply.
		if tolerations[i].ToleratesTaint(klog.Background(), taint, false) {
			return true
		}
	}
	return false
}

func isFinished(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// criticalPriority is the lowest priority of the system-cluster-critical and
// system-node-critical classes.
const criticalPriority = 2_000_000_000

func isCritical(pod *corev1.Pod) bool {
	switch pod.Spec.PriorityClassName {
	case "system-cluster-critical", "system-node-critical":
		return true
	}
	return pod.Spec.Priority != nil && *pod.Spec.Priority >= criticalPriority
}
