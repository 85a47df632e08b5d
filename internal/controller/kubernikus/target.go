package kubernikus

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/pitstop-dev/pitstop/internal/cloud/openstack"
)

// The metadata Kubernikus sets on the servers of a cluster's node pools.
const (
	// MetadataCluster names the Kubernikus cluster whose node the server is.
	MetadataCluster = "kubernikus:kluster"
	// MetadataPool names its node pool.
	MetadataPool = "kubernikus:nodepool"
)

// providerIDPrefix starts an OpenStack node's spec.providerID, as the
// OpenStack cloud provider writes it: openstack:///<server id>, or
// openstack://<region>/<server id>.
const providerIDPrefix = "openstack://"

// serverID reads the server's ID (and the region, if named) from the
// node's spec.providerID. A node's name is chosen by whoever registers the
// node; its providerID is written by the cloud provider's node controller
// and names the server the node runs on.
func serverID(node *corev1.Node) (id, region string, err error) {
	pid := node.Spec.ProviderID
	if pid == "" {
		return "", "", fmt.Errorf("node %s has no spec.providerID: pitstop deletes only the server a node's providerID names", node.Name)
	}
	rest, ok := strings.CutPrefix(pid, providerIDPrefix)
	if !ok {
		return "", "", fmt.Errorf("node %s: spec.providerID %q is not an OpenStack server (%s/<server id>)", node.Name, pid, providerIDPrefix)
	}
	region, id, ok = strings.Cut(rest, "/")
	if !ok || id == "" || strings.Contains(id, "/") {
		return "", "", fmt.Errorf("node %s: spec.providerID %q is not an OpenStack server (%s/<server id>)", node.Name, pid, providerIDPrefix)
	}
	return id, region, nil
}

// refusal says why server s (nil: none of the providerID's ID) is not the
// node's to delete, or "" when it is: it must exist, carry the node's
// name, and, when the configuration names the Kubernikus cluster, belong
// to it. Each link comes from a different writer (the cloud provider, the
// node's registration, Kubernikus), and pitstop deletes only when all
// agree.
func refusal(node *corev1.Node, id string, s *openstack.Server, cluster string) string {
	switch {
	case s == nil:
		return fmt.Sprintf("server %s, which spec.providerID of node %s names, is not in Nova: nothing deleted", id, node.Name)
	case s.ID != id:
		// Nova answered for another server than asked (an ID with a "?"
		// or "#" asks for what precedes it): the providerID does not name
		// the server that was checked, and deleting by that ID would not
		// delete the server it names.
		return fmt.Sprintf("asked for server %s, which spec.providerID of node %s names, Nova answered with server %s: nothing deleted", id, node.Name, s.ID)
	case s.Name != node.Name:
		return fmt.Sprintf("server %s, which spec.providerID of node %s names, is named %q, not like the node: nothing deleted", id, node.Name, s.Name)
	case cluster != "" && s.Metadata[MetadataCluster] != cluster:
		return fmt.Sprintf("server %s (%s) is not a node of Kubernikus cluster %s (metadata %s=%q): nothing deleted", id, s.Name, cluster, MetadataCluster, s.Metadata[MetadataCluster])
	}
	return ""
}

// target finds the node's server through its providerID and checks it.
// A refusal is input that retrying will not fix until someone changes it;
// err is a failure to ask.
func (r *Reconciler) target(ctx context.Context, cfg *Config, cc openstack.CloudConfig, node *corev1.Node) (id, refused string, err error) {
	id, region, err := serverID(node)
	if err != nil {
		return "", err.Error(), nil
	}
	if region != "" && region != cc.Region {
		return "", fmt.Sprintf("node %s: spec.providerID %q names region %s, but the OpenStack account is of region %s", node.Name, node.Spec.ProviderID, region, cc.Region), nil
	}
	s, err := r.opts.Accounts.GetServer(ctx, cc, id)
	if err != nil {
		return "", "", err
	}
	return id, refusal(node, id, s, cfg.Cluster), nil
}
