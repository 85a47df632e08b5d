package manager

import (
	"sort"
	"strings"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/podcache"
)

// cacheOptions keeps the informer cache small on large fleets. Every pod of
// the cluster is cached (the drains find a node's pods through it), so a
// pod keeps only what pitstop reads, in a compact form (package podcache);
// nodes lose their image lists and volume bookkeeping. Writes to pods and
// nodes are patches computed against the cached object, so the fields left
// out are never written back. Of the Leases, only the budget slots in
// pitstop's namespace are cached (not the nodes' heartbeats).
func cacheOptions(namespace string) cache.Options {
	slots, _ := labels.NewRequirement(pitstopv1alpha1.LabelBudget, selection.Exists, nil)
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:  {Transform: newPodSlimmer().slim},
			&corev1.Node{}: {Transform: slimNode},
			&coordinationv1.Lease{}: {
				Namespaces: map[string]cache.Config{namespace: {}},
				Label:      labels.NewSelector().Add(*slots),
			},
		},
	}
}

// podSlimmer keeps what the drain plan, its blocker reports and the checks
// read of a pod: identity, labels (PDB and skip selectors), owners
// (DaemonSet and unmanaged pods), the mirror-pod annotation, deletion,
// node, priority, preferred node affinity, phase and the tolerations of
// NoSchedule taints (a pod that tolerates the cordon stays on the node).
// It keeps them in a podcache.Pod, a quarter of the size of a corev1.Pod
// with the same fields set; reads through the cache expand it back.
//
// Pods of one ReplicaSet, DaemonSet or Job carry equal labels and owner
// references; the cache keeps one copy of each for all of them (on a
// fleet of 30,000 such pods, about a fifth of the cache). The copies are
// shared, so nothing may change a cached pod in place; readers of the
// cache get deep copies.
type podSlimmer struct {
	mu     sync.Mutex
	labels map[string]map[string]string
	owners map[string][]metav1.OwnerReference
}

// internLimit bounds the shared copies kept for new pods. Past it they are
// forgotten (pods that have them keep them) and sharing starts again: pods
// with labels of their own, such as a StatefulSet's, cannot grow it
// without bound.
const internLimit = 10000

func newPodSlimmer() *podSlimmer {
	return &podSlimmer{labels: map[string]map[string]string{}, owners: map[string][]metav1.OwnerReference{}}
}

func (s *podSlimmer) slim(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	slim := &podcache.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:                       pod.Name,
			Namespace:                  pod.Namespace,
			UID:                        pod.UID,
			ResourceVersion:            pod.ResourceVersion,
			CreationTimestamp:          pod.CreationTimestamp,
			DeletionTimestamp:          pod.DeletionTimestamp,
			DeletionGracePeriodSeconds: pod.DeletionGracePeriodSeconds,
		},
		NodeName:          pod.Spec.NodeName,
		Phase:             pod.Status.Phase,
		Priority:          pod.Spec.Priority,
		PriorityClassName: pod.Spec.PriorityClassName,
	}
	slim.Labels, slim.OwnerReferences = s.shared(pod.Labels, pod.OwnerReferences)
	if v, ok := pod.Annotations[corev1.MirrorPodAnnotationKey]; ok {
		slim.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: v}
	}
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && len(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0 {
		slim.PreferredAffinity = a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution
	}
	for i := range pod.Spec.Tolerations {
		if podcache.KeepToleration(&pod.Spec.Tolerations[i]) {
			slim.Tolerations = append(slim.Tolerations, pod.Spec.Tolerations[i])
		}
	}
	return slim, nil
}

// shared returns the kept copies equal to labels and owners, keeping these
// if there are none yet.
func (s *podSlimmer) shared(labels map[string]string, owners []metav1.OwnerReference) (map[string]string, []metav1.OwnerReference) {
	var labelKey, ownerKey strings.Builder
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		labelKey.WriteString(k)
		labelKey.WriteByte(0)
		labelKey.WriteString(labels[k])
		labelKey.WriteByte(0)
	}
	for _, o := range owners {
		for _, f := range []string{o.APIVersion, o.Kind, o.Name, string(o.UID), boolKey(o.Controller), boolKey(o.BlockOwnerDeletion)} {
			ownerKey.WriteString(f)
			ownerKey.WriteByte(0)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.labels) >= internLimit || len(s.owners) >= internLimit {
		clear(s.labels)
		clear(s.owners)
	}
	if labels != nil {
		if kept, found := s.labels[labelKey.String()]; found {
			labels = kept
		} else {
			s.labels[labelKey.String()] = labels
		}
	}
	if owners != nil {
		if kept, found := s.owners[ownerKey.String()]; found {
			owners = kept
		} else {
			s.owners[ownerKey.String()] = owners
		}
	}
	return labels, owners
}

func boolKey(b *bool) string {
	switch {
	case b == nil:
		return "-"
	case *b:
		return "t"
	}
	return "f"
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
