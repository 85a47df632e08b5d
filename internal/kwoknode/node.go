package kwoknode

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// Annotation marks the nodes kwok plays the kubelet for: kwok runs with
	// --manage-nodes-with-annotation-selector=Annotation=AnnotationValue,
	// so a node without it gets no heartbeat.
	Annotation = "kwok.x-k8s.io/node"
	// AnnotationValue is the value of Annotation on the nodes kwok runs.
	AnnotationValue = "fake"
)

// New returns a Node that kwok will run: name, labels, zone, capacity for
// podsPerNode pods, an InternalIP unique to index i and a kwok://
// providerID. labels are added to the well-known ones and win over them.
func New(name string, i int, zone string, podsPerNode int, labels map[string]string) *corev1.Node {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				corev1.LabelHostname:   name,
				corev1.LabelOSStable:   "linux",
				corev1.LabelArchStable: "amd64",
				"type":                 "kwok",
			},
			Annotations: map[string]string{
				Annotation: AnnotationValue,
				// Lets kubelets' clients skip the ConfigMap/Secret cache TTL; kwok
				// sets it on the nodes it creates itself too.
				"node.alpha.kubernetes.io/ttl": "0",
			},
		},
		Spec: corev1.NodeSpec{ProviderID: "kwok://" + name},
		Status: corev1.NodeStatus{
			Capacity:    resources(podsPerNode),
			Allocatable: resources(podsPerNode),
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.64.%d.%d", i/250, i%250+1)},
				{Type: corev1.NodeHostName, Address: name},
			},
		},
	}
	if zone != "" {
		node.Labels[corev1.LabelTopologyZone] = zone
		node.Labels[corev1.LabelTopologyRegion] = "local"
	}
	for k, v := range labels {
		node.Labels[k] = v
	}
	return node
}

// resources is the capacity, and the allocatable, of a simulated node:
// only its pod count varies.
func resources(pods int) corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("128Gi"),
		corev1.ResourcePods:   *resource.NewQuantity(int64(pods), resource.DecimalSI),
	}
}
