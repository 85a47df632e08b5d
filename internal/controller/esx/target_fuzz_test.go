package esx

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vmware/govmomi/vim25/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pitstop-dev/pitstop/internal/cloud/vsphere"
)

// FuzzVMOf picks a node's VM in a vCenter inventory as vCenter answers it
// (hosts, the VMs registered on each, their names and BIOS UUIDs, all
// random), for a node whose name and spec.providerID are random too (its
// registrant chooses them). The VM pitstop powers off or on, if any, is
// registered on the ESX host the node is labelled with, carries the node's
// name and, when the node has a vsphere:// providerID, the UUID it names;
// never a VM elsewhere in the vCenter. A refusal names the node.
//
// The inventory is read from spec, one VM a line, "host name uuid"; a
// UUID written "=N" is the N-th line's (so that equal UUIDs are found).
func FuzzVMOf(f *testing.F) {
	f.Add("node-1", "vsphere://4210aaaa", "esx-1", "esx-1 node-1 4210AAAA\nesx-2 node-1 4210bbbb")
	f.Add("node-1", "", "esx-1", "esx-1 node-1 u1\nesx-2 node-1 u2")
	f.Add("node-1", "", "esx-1", "esx-1 node-1 u1\nesx-1 node-1 u2")
	f.Add("node-1", "vsphere://u2", "esx-1", "esx-1 node-1 u1\nesx-2 node-1 u2")
	f.Add("node-1", "vsphere://u1", "esx-1", "esx-1 database u1\nesx-1 node-1 =0")
	f.Add("node-1", "vsphere://", "esx-1", "esx-1 node-1 u1")
	f.Add("node-1", "vsphere://u1/x", "esx-1", "esx-1 node-1 u1")
	f.Add("node-1", "aws:///eu-west-1a/i-1", "esx-1", "esx-1 node-1 i-1")
	f.Add("node-1", "vsphere://u1", "", "esx-1 node-1 u1\n node-1 u1")
	f.Fuzz(func(t *testing.T, name, providerID, host, spec string) {
		type entry struct {
			host string
			vm   vsphere.VM
		}
		var inventory []entry
		byHost := map[string][]vsphere.VM{}
		for i, line := range strings.Split(spec, "\n") {
			fields := strings.SplitN(line, " ", 3)
			if len(fields) != 3 || i >= 64 {
				continue
			}
			uuid := fields[2]
			var n int
			if _, err := fmt.Sscanf(uuid, "=%d", &n); err == nil && n >= 0 && n < len(inventory) {
				uuid = inventory[n].vm.UUID
			}
			m := vsphere.VM{Ref: types.ManagedObjectReference{Type: "VirtualMachine", Value: fmt.Sprintf("vm-%d", i)}, Name: fields[1], UUID: uuid}
			inventory = append(inventory, entry{host: fields[0], vm: m})
			byHost[fields[0]] = append(byHost[fields[0]], m)
		}
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{LabelHost: host}}, Spec: corev1.NodeSpec{ProviderID: providerID}}

		// As the controller asks: the VMs of the node's labelled host.
		got, err := vmOf(n, host, byHost[host])
		if err != nil {
			if got != (vsphere.VM{}) {
				t.Fatalf("a refusal (%v) with VM %+v", err, got)
			}
			if !strings.Contains(err.Error(), "node "+name) {
				t.Fatalf("the refusal does not name node %q: %v", name, err)
			}
			return
		}
		var where []string
		for _, e := range inventory {
			if e.vm.Ref == got.Ref {
				where = append(where, e.host)
			}
		}
		switch {
		case len(where) != 1 || where[0] != host:
			t.Fatalf("node %q, labelled with host %q, was given VM %+v, which is on hosts %q", name, host, got, where)
		case got.Name != name:
			t.Fatalf("node %q was given VM %+v of another name", name, got)
		case providerID != "" && !strings.EqualFold(providerIDPrefix+got.UUID, providerID):
			t.Fatalf("node %q (providerID %q) was given VM %+v of another UUID", name, providerID, got)
		}
		if providerID == "" {
			named := 0
			for _, m := range byHost[host] {
				if m.Name == name {
					named++
				}
			}
			if named != 1 {
				t.Fatalf("node %q without a providerID was given VM %+v among %d VMs of its name on its host", name, got, named)
			}
		}
	})
}
