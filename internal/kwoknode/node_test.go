package kwoknode

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestNew(t *testing.T) {
	for _, tc := range []struct {
		name  string
		node  *corev1.Node
		check func(*corev1.Node) string // what is wrong, or ""
	}{
		{
			name: "is taken on by kwok under a kwok:// providerID",
			node: New("worker-000", 0, "", 110, nil),
			check: func(n *corev1.Node) string {
				if n.Annotations[Annotation] != AnnotationValue {
					return "lacks the kwok annotation"
				}
				if n.Spec.ProviderID != "kwok://worker-000" {
					return "providerID " + n.Spec.ProviderID
				}
				return ""
			},
		},
		{
			name: "has an internal IP of its own past 250 nodes",
			node: New("worker-251", 251, "", 110, nil),
			check: func(n *corev1.Node) string {
				if ip := n.Status.Addresses[0]; ip.Type != corev1.NodeInternalIP || ip.Address != "10.64.1.2" {
					return "first address " + string(ip.Type) + " " + ip.Address + ", want InternalIP 10.64.1.2"
				}
				return ""
			},
		},
		{
			name: "offers the pods asked for",
			node: New("worker-000", 0, "", 30, nil),
			check: func(n *corev1.Node) string {
				if pods := n.Status.Allocatable.Pods(); pods.Value() != 30 {
					return "allocatable pods " + pods.String()
				}
				return ""
			},
		},
		{
			name: "gets zone and region labels only with a zone",
			node: New("worker-000", 0, "zone-a", 110, nil),
			check: func(n *corev1.Node) string {
				if n.Labels[corev1.LabelTopologyZone] != "zone-a" || n.Labels[corev1.LabelTopologyRegion] != "local" {
					return "topology labels " + n.Labels[corev1.LabelTopologyZone] + "/" + n.Labels[corev1.LabelTopologyRegion]
				}
				if _, ok := New("worker-000", 0, "", 110, nil).Labels[corev1.LabelTopologyZone]; ok {
					return "a node without a zone has a zone label"
				}
				return ""
			},
		},
		{
			name: "lets the given labels win over the well-known ones",
			node: New("worker-000", 0, "", 110, map[string]string{corev1.LabelArchStable: "arm64", "team": "a"}),
			check: func(n *corev1.Node) string {
				if n.Labels[corev1.LabelArchStable] != "arm64" || n.Labels["team"] != "a" || n.Labels[corev1.LabelHostname] != "worker-000" {
					return fmt.Sprint("labels ", n.Labels)
				}
				return ""
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if problem := tc.check(tc.node); problem != "" {
				t.Error(problem)
			}
		})
	}
}
