package nodelink

import (
	"slices"
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func machine(name, providerID string) *machinev1beta1.Machine {
	m := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	if providerID != "" {
		m.Spec.ProviderID = ptr.To(providerID)
	}
	return m
}

func TestPick(t *testing.T) {
	a, b, c := machine("a", "p-a"), machine("b", ""), machine("c", "p-c")
	tests := []struct {
		name           string
		self           string
		sameProviderID []*machinev1beta1.Machine
		sameIP         []*machinev1beta1.Machine
		want           []string
		by             evidence
	}{
		{
			name: "finds nothing when neither index has a candidate",
			self: "p-a", by: byInternalIP,
		},
		{
			name: "takes the machine with the node's providerID",
			self: "p-a", sameProviderID: []*machinev1beta1.Machine{a},
			want: []string{"a"}, by: byProviderID,
		},
		{
			name: "prefers the providerID match to one by internal IP",
			self: "p-a", sameProviderID: []*machinev1beta1.Machine{a}, sameIP: []*machinev1beta1.Machine{b},
			want: []string{"a"}, by: byProviderID,
		},
		{
			name: "falls back to a machine sharing an internal IP",
			self: "p-a", sameIP: []*machinev1beta1.Machine{b},
			want: []string{"b"}, by: byInternalIP,
		},
		{
			name: "falls back by internal IP when the node has no providerID",
			self: "", sameIP: []*machinev1beta1.Machine{c},
			want: []string{"c"}, by: byInternalIP,
		},
		{
			name: "leaves out an IP match whose providerID names another instance",
			self: "p-a", sameIP: []*machinev1beta1.Machine{c, b},
			want: []string{"b"}, by: byInternalIP,
		},
		{
			name: "returns both machines that share the providerID",
			self: "p-a", sameProviderID: []*machinev1beta1.Machine{a, machine("a2", "p-a")},
			want: []string{"a", "a2"}, by: byProviderID,
		},
		{
			name: "returns both machines that share internal IPs",
			self: "", sameIP: []*machinev1beta1.Machine{b, c},
			want: []string{"b", "c"}, by: byInternalIP,
		},
		{
			name: "counts a machine that shares two addresses once",
			self: "", sameIP: []*machinev1beta1.Machine{b, b},
			want: []string{"b"}, by: byInternalIP,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, by := pick(tt.self, tt.sameProviderID, tt.sameIP, machineProviderID)
			var gotNames []string
			for _, m := range got {
				gotNames = append(gotNames, m.Name)
			}
			if !slices.Equal(gotNames, tt.want) || by != tt.by {
				t.Errorf("pick = %v by %s, want %v by %s", gotNames, by, tt.want, tt.by)
			}
		})
	}
}

func TestInternalIPs(t *testing.T) {
	tests := []struct {
		name  string
		addrs []corev1.NodeAddress
		want  []string
	}{
		{name: "has none without addresses"},
		{
			name: "keeps only InternalIP addresses, in order",
			addrs: []corev1.NodeAddress{
				{Type: corev1.NodeHostName, Address: "host"},
				{Type: corev1.NodeInternalIP, Address: "10.0.0.2"},
				{Type: corev1.NodeExternalIP, Address: "203.0.113.1"},
				{Type: corev1.NodeInternalIP, Address: "fd00::2"},
			},
			want: []string{"10.0.0.2", "fd00::2"},
		},
		{
			name: "lists a repeated address once and skips empty ones",
			addrs: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: "10.0.0.2"},
				{Type: corev1.NodeInternalIP, Address: ""},
				{Type: corev1.NodeInternalIP, Address: "10.0.0.2"},
			},
			want: []string{"10.0.0.2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := internalIPs(tt.addrs); !slices.Equal(got, tt.want) {
				t.Errorf("internalIPs = %v, want %v", got, tt.want)
			}
		})
	}
}
