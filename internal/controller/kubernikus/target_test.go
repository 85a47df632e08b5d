package kubernikus

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pitstop-dev/pitstop/internal/cloud/openstack"
)

func TestUntrustedNodeLinksPickNoServer(t *testing.T) {
	node := func(providerID string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "kks-small-1"}, Spec: corev1.NodeSpec{ProviderID: providerID}}
	}
	ours := &openstack.Server{ID: "abc", Name: "kks-small-1", Metadata: map[string]string{MetadataCluster: "kks"}}
	for _, tc := range []struct {
		name, providerID, cluster string
		server                    *openstack.Server
		want                      string // "" deletes; else part of the refusal
	}{
		{name: "the server the providerID names, of the node's name, is deleted", providerID: "openstack:///abc", server: ours},
		{name: "a providerID with a region reads the same server", providerID: "openstack://eu-de-1/abc", server: ours, cluster: "kks"},
		{name: "a node without providerID is refused", want: "has no spec.providerID"},
		{name: "a providerID of another cloud is refused", providerID: "aws:///eu-west-1a/i-1", want: "is not an OpenStack server"},
		{name: "a providerID without an ID is refused", providerID: "openstack:///", want: "is not an OpenStack server"},
		{name: "a server that is not there is refused", providerID: "openstack:///abc", want: "is not in Nova"},
		{name: "a server of another name is refused", providerID: "openstack:///abc", server: &openstack.Server{ID: "abc", Name: "database-1"}, want: `is named "database-1", not like the node`},
		{name: "a server of another Kubernikus cluster is refused", providerID: "openstack:///abc", cluster: "other", server: ours, want: "is not a node of Kubernikus cluster other"},
		{name: "a server without Kubernikus metadata is refused when the cluster is named", providerID: "openstack:///abc", cluster: "kks", server: &openstack.Server{ID: "abc", Name: "kks-small-1"}, want: `kubernikus:kluster=""`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := node(tc.providerID)
			id, _, err := serverID(n)
			got := ""
			if err != nil {
				got = err.Error()
			} else {
				got = refusal(n, id, tc.server, tc.cluster)
			}
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("refusal %q, want %q", got, tc.want)
			}
		})
	}
}
