package manager

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pitstop-dev/pitstop/internal/budget"
)

// cacheOptions keeps the informer cache small on large fleets. Every pod of
// the cluster is cached (the drains find a node's pods through it), so a
// pod keeps only what pitstop reads; nodes lose their image lists and
// volume bookkeeping. Writes to pods and nodes are patches computed against
// the cached object, so the fields left out are never written back. Of the
// Leases, only the budget slots in pitstop's namespace are cached (not the
// nodes' heartbeats).
func cacheOptions(namespace string) cache.Options {
	slots, _ := labels.NewRequirement(budget.LabelBudget, selection.Exists, nil)
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:  {Transform: slimPod},
			&corev1.Node{}: {Transform: slimNode},
			&coordinationv1.Lease{}: {
				Namespaces: map[string]cache.Config{namespace: {}},
				Label:      labels.NewSelector().Add(*slots),
			},
		},
	}
}

// slimPod keeps what the drain plan, its blocker reports and the checks
// read: identity, labels (PDB and skip selectors), owners (DaemonSet and
// unmanaged pods), the mirror-pod annotation, deletion, node, priority,
// preferred node affinity and phase.
func slimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	slim := &corev1.Pod{
		TypeMeta: pod.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:                       pod.Name,
			Namespace:                  pod.Namespace,
			UID:                        pod.UID,
			ResourceVersion:            pod.ResourceVersion,
			CreationTimestamp:          pod.CreationTimestamp,
			DeletionTimestamp:          pod.DeletionTimestamp,
			DeletionGracePeriodSeconds: pod.DeletionGracePeriodSeconds,
			Labels:                     pod.Labels,
			OwnerReferences:            pod.OwnerReferences,
		},
		Spec: corev1.PodSpec{
			NodeName:          pod.Spec.NodeName,
			Priority:          pod.Spec.Priority,
			PriorityClassName: pod.Spec.PriorityClassName,
		},
		Status: corev1.PodStatus{Phase: pod.Status.Phase},
	}
	if v, ok := pod.Annotations[corev1.MirrorPodAnnotationKey]; ok {
		slim.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: v}
	}
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && len(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0 {
		slim.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
		}}
	}
	return slim, nil
}

// slimNode drops a node's managed fields, image list and volume
// bookkeeping: large on real nodes, never read by pitstop.
func slimNode(obj any) (any, error) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	node.ManagedFields = nil
	node.Status.Images = nil
	node.Status.VolumesInUse = nil
	node.Status.VolumesAttached = nil
	return node, nil
}
