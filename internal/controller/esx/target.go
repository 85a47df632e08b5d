package esx

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/pitstop-dev/pitstop/internal/cloud/vsphere"
)

// providerIDPrefix starts a vSphere node's spec.providerID, as the vSphere
// cloud provider writes it: vsphere://<the VM's BIOS UUID>.
const providerIDPrefix = "vsphere://"

// vmOf finds the node's VM among the VMs registered on host, the ESX host
// the node is labelled with: by the UUID its spec.providerID holds, else
// by the node's name. A node's name is chosen by whoever registers it, so
// a name alone is looked for only on the node's own host, never across the
// vCenter; and where the providerID names a VM, its name must be the
// node's too. Any disagreement is an error that names the link.
func vmOf(n *corev1.Node, host string, vms []vsphere.VM) (vsphere.VM, error) {
	pid := n.Spec.ProviderID
	if pid == "" {
		var named []vsphere.VM
		for _, m := range vms {
			if m.Name == n.Name {
				named = append(named, m)
			}
		}
		switch len(named) {
		case 0:
			return vsphere.VM{}, fmt.Errorf("no VM named %s on ESX host %s (label %s of node %s)", n.Name, host, LabelHost, n.Name)
		case 1:
			return named[0], nil
		}
		return vsphere.VM{}, fmt.Errorf("%d VMs are named %s on ESX host %s: pitstop will not guess which one is node %s's", len(named), n.Name, host, n.Name)
	}
	uuid, ok := strings.CutPrefix(pid, providerIDPrefix)
	if !ok || uuid == "" || strings.Contains(uuid, "/") {
		return vsphere.VM{}, fmt.Errorf("node %s: spec.providerID %q is not a vSphere VM (%s<uuid>)", n.Name, pid, providerIDPrefix)
	}
	for _, m := range vms {
		if !strings.EqualFold(m.UUID, uuid) {
			continue
		}
		if m.Name != n.Name {
			return vsphere.VM{}, fmt.Errorf("VM %s on ESX host %s, which spec.providerID of node %s names, is named %q, not like the node", uuid, host, n.Name, m.Name)
		}
		return m, nil
	}
	return vsphere.VM{}, fmt.Errorf("no VM with UUID %s (spec.providerID of node %s) on ESX host %s (label %s)", uuid, n.Name, host, LabelHost)
}
