package testutil

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// NodeOption changes a Node built by Node.
type NodeOption func(*corev1.Node)

// Node returns a schedulable, Ready node with room for 110 pods.
func Node(name string, opts ...NodeOption) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110")},
			Allocatable: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	for _, o := range opts {
		o(n)
	}
	return n
}

// WithLabels adds labels to a node.
func WithLabels(labels map[string]string) NodeOption {
	return func(n *corev1.Node) {
		for k, v := range labels {
			n.Labels[k] = v
		}
	}
}

// ControlPlane labels a node as a control-plane node.
func ControlPlane() NodeOption {
	return WithLabels(map[string]string{"node-role.kubernetes.io/control-plane": ""})
}

// Unschedulable cordons a node.
func Unschedulable() NodeOption { return func(n *corev1.Node) { n.Spec.Unschedulable = true } }

// NotReady marks a node's Ready condition False.
func NotReady() NodeOption {
	return func(n *corev1.Node) {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}
	}
}

// PodOption changes a Pod built by Pod.
type PodOption func(*corev1.Pod)

// Pod returns a Running pod in namespace, bound to no node.
func Pod(namespace, name string, opts ...PodOption) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{}},
		Spec: corev1.PodSpec{
			Containers:                    []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}},
			TerminationGracePeriodSeconds: ptr.To[int64](30),
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

// PodNames returns the pods' names, in their order.
func PodNames(pods []*corev1.Pod) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

// OnNode binds a pod to a node.
func OnNode(node string) PodOption { return func(p *corev1.Pod) { p.Spec.NodeName = node } }

// WithPodLabels adds labels to a pod.
func WithPodLabels(labels map[string]string) PodOption {
	return func(p *corev1.Pod) {
		for k, v := range labels {
			p.Labels[k] = v
		}
	}
}

// OwnedBy sets a controller owner reference on a pod.
func OwnedBy(kind, name string) PodOption {
	return func(p *corev1.Pod) {
		apiVersion := "apps/v1"
		if kind == "Job" {
			apiVersion = "batch/v1"
		}
		p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{
			APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID("uid-" + name), Controller: ptr.To(true),
		})
	}
}

// WithPhase sets a pod's phase.
func WithPhase(phase corev1.PodPhase) PodOption {
	return func(p *corev1.Pod) { p.Status.Phase = phase }
}

// WithEmptyDir gives a pod an emptyDir volume (local storage).
func WithEmptyDir() PodOption {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
}
