package podcache

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Pod is a pod as the cache keeps it: its metadata and the few fields of
// its spec and status pitstop reads.
//
// DeepCopyObject returns the pod expanded into a *corev1.Pod, not a Pod:
// the controller-runtime cache hands out deep copies of what it stores
// (cache_reader.go in controller-runtime copies each object it returns and
// assigns the copy to the caller's object), so a Get or List of pods
// through the cache yields corev1.Pods. Event handlers and index functions,
// which see the stored object itself, read it through NodeName and Phase.
// A read of pods with client.UnsafeDisableDeepCopy would get the stored
// Pod itself, which the cache refuses to hand out as a corev1.Pod: pods
// are never read that way. client-go's cache mutation detector (KUBE_CACHE_MUTATION_DETECTOR, a
// debugging aid off by default) compares a stored object with its deep
// copy, so it would report every cached pod as changed: leave it off.
type Pod struct {
	metav1.ObjectMeta

	NodeName          string
	Phase             corev1.PodPhase
	Priority          *int32
	PriorityClassName string
	// PreferredAffinity is the pod's preferred node affinity, the only
	// part of its affinity the checks read.
	PreferredAffinity []corev1.PreferredSchedulingTerm
	// Tolerations are the pod's tolerations that can tolerate a NoSchedule
	// taint (effect NoSchedule or any): the drain leaves a pod that
	// tolerates the cordon's taints on its node. The NoExecute ones the
	// API server adds to every pod are not kept (KeepToleration).
	Tolerations []corev1.Toleration
}

// KeepToleration says whether the cache keeps a toleration: one that can
// match a NoSchedule taint.
func KeepToleration(t *corev1.Toleration) bool {
	return t.Effect == "" || t.Effect == corev1.TaintEffectNoSchedule
}

var _ metav1.Object = &Pod{}

// GetObjectKind reports no kind: like any typed object in an informer's
// store, a cached pod carries none.
func (p *Pod) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject expands the pod into a new *corev1.Pod that shares
// nothing with it.
func (p *Pod) DeepCopyObject() runtime.Object { return p.Expand() }

// Expand returns the pod as a *corev1.Pod that shares nothing with p.
func (p *Pod) Expand() *corev1.Pod {
	out := &corev1.Pod{
		Spec: corev1.PodSpec{
			NodeName:          p.NodeName,
			PriorityClassName: p.PriorityClassName,
		},
		Status: corev1.PodStatus{Phase: p.Phase},
	}
	p.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if p.Priority != nil {
		priority := *p.Priority
		out.Spec.Priority = &priority
	}
	if p.PreferredAffinity != nil {
		out.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: make([]corev1.PreferredSchedulingTerm, len(p.PreferredAffinity)),
		}}
		for i := range p.PreferredAffinity {
			p.PreferredAffinity[i].DeepCopyInto(&out.Spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution[i])
		}
	}
	for i := range p.Tolerations {
		out.Spec.Tolerations = append(out.Spec.Tolerations, *p.Tolerations[i].DeepCopy())
	}
	return out
}

// NodeName returns the node a pod is bound to, for a *corev1.Pod or a
// cached *Pod; "" for anything else.
func NodeName(obj any) string {
	switch p := obj.(type) {
	case *Pod:
		return p.NodeName
	case *corev1.Pod:
		return p.Spec.NodeName
	}
	return ""
}

// Phase returns a pod's phase, for a *corev1.Pod or a cached *Pod; "" for
// anything else.
func Phase(obj any) corev1.PodPhase {
	switch p := obj.(type) {
	case *Pod:
		return p.Phase
	case *corev1.Pod:
		return p.Status.Phase
	}
	return ""
}
