package kubernikus

import (
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pitstop-dev/pitstop/internal/cloud/openstack"
	"github.com/pitstop-dev/pitstop/internal/sim/openstacksim"
)

// FuzzTarget finds the Nova server Kubernikus's delete-node deletes, as
// Nova answers it (the OpenStack simulator holding three servers whose
// names and Kubernikus metadata are random), for a node whose name and
// spec.providerID are random (its registrant and the cloud provider write
// them; "{N}" in the providerID stands for the N-th server's ID, which
// Nova chooses). Either pitstop refuses, naming the node, or the server
// it would delete is the one the providerID names, in the account's
// region, carrying the node's name and, when the configuration names the

var testAccount = openstacksim.Account{User: "pitstop", Password: "os-Secret-1", Domain: "kubernikus", Project: "p-123", Region: "eu-de-1"}

func cloudConfig(os *openstacksim.Server) openstack.CloudConfig {
	return openstack.CloudConfig{AuthURL: os.AuthURL(), DomainName: testAccount.Domain, TenantID: testAccount.Project, Username: testAccount.User, Password: testAccount.Password, Region: testAccount.Region}
}

// Kubernikus cluster, that cluster's metadata: every link agrees.
func FuzzTarget(f *testing.F) {
	os := openstacksim.New(f, testAccount)
	r := &Reconciler{opts: Options{Accounts: openstack.NewAccounts()}}
	cc := cloudConfig(os)
	f.Add("kks-small-1", "openstack:///{0}", "", "kks-small-1", "kks", "database-1", "kks", "kks-small-1", "other")
	f.Add("kks-small-1", "openstack://eu-de-1/{0}", "kks", "kks-small-1", "kks", "database-1", "kks", "kks-small-1", "other")
	f.Add("kks-small-1", "openstack://us-east-1/{0}", "", "kks-small-1", "kks", "", "", "", "")
	f.Add("kks-small-1", "openstack:///{1}", "kks", "kks-small-1", "kks", "database-1", "kks", "kks-small-1", "other")
	f.Add("kks-small-1", "openstack:///{2}", "kks", "kks-small-1", "kks", "database-1", "kks", "kks-small-1", "other")
	f.Add("kks-small-1", "openstack:///{2}?", "", "kks-small-1", "kks", "database-1", "kks", "kks-small-1", "other")
	f.Add("kks-small-1", "openstack:///not-there", "", "kks-small-1", "kks", "", "", "", "")
	f.Add("kks-small-1", "", "", "kks-small-1", "kks", "", "", "", "")
	f.Add("kks-small-1", "openstack:///", "", "kks-small-1", "kks", "", "", "", "")
	f.Add("kks-small-1", "aws:///eu-west-1a/{0}", "", "kks-small-1", "kks", "", "", "", "")
	f.Fuzz(func(t *testing.T, name, providerID, cluster, name0, cluster0, name1, cluster1, name2, cluster2 string) {
		if len(providerID) > 512 || strings.ContainsAny(providerID, "\x00\r\n") {
			return // not a providerID the API server keeps
		}
		type server struct{ name, cluster string }
		servers := map[string]server{}
		var ids []string
		for _, s := range []server{{name0, cluster0}, {name1, cluster1}, {name2, cluster2}} {
			id := os.AddServer(s.name)
			os.SetMetadata(id, map[string]string{MetadataCluster: s.cluster, MetadataPool: "small"})
			servers[id] = s
			ids = append(ids, id)
		}
		for i, id := range ids {
			providerID = strings.ReplaceAll(providerID, "{"+strconv.Itoa(i)+"}", id)
		}
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: providerID}}

		id, refused, err := r.target(t.Context(), &Config{Cluster: cluster}, cc, node)
		if err != nil {
			// Asking failed: nothing is deleted either, and the error
			// says which server.
			if !strings.Contains(err.Error(), "server") {
				t.Fatalf("a failure to ask does not name the server: %v", err)
			}
			return
		}
		if refused != "" {
			if !strings.Contains(refused, "node "+name) && !strings.Contains(refused, "server ") {
				t.Fatalf("the refusal names neither node %q nor a server: %s", name, refused)
			}
			return
		}
		s, ok := servers[id]
		switch {
		case !ok:
			t.Fatalf("node %q (providerID %q) would have server %q deleted, which is none of Nova's servers %q", name, providerID, id, ids)
		case providerID != providerIDPrefix+"/"+id && providerID != providerIDPrefix+cc.Region+"/"+id:
			t.Fatalf("node %q would have server %s deleted, which its providerID %q does not name", name, id, providerID)
		case s.name != name:
			t.Fatalf("node %q would have server %s, named %q, deleted", name, id, s.name)
		case cluster != "" && s.cluster != cluster:
			t.Fatalf("node %q would have server %s of Kubernikus cluster %q deleted, configured for %q", name, id, s.cluster, cluster)
		}
	})
}

// TestUntrustedProviderIDAsksNovaForAnotherServer: FuzzTarget found that a
// providerID whose server ID ends in "?" or "#" (a node's registrant can
// write one) has Nova answer for the server before it, and pitstop checked
// that server's name while it would delete by the ID as written. The
// server Nova answers with must be the one asked for.
func TestUntrustedProviderIDAsksNovaForAnotherServer(t *testing.T) {
	os := openstacksim.New(t, testAccount)
	id := os.AddServer("kks-small-1")
	os.SetMetadata(id, map[string]string{MetadataCluster: "kks"})
	r := &Reconciler{opts: Options{Accounts: openstack.NewAccounts()}}
	for _, pid := range []string{"openstack:///" + id + "?", "openstack:///" + id + "?x=1", "openstack:///" + id + "#"} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "kks-small-1"}, Spec: corev1.NodeSpec{ProviderID: pid}}
		got, refused, err := r.target(t.Context(), &Config{Cluster: "kks"}, cloudConfig(os), node)
		if err != nil || !strings.Contains(refused, "Nova answered with server "+id) {
			t.Errorf("providerID %q: server %q, refusal %q, error %v; want a refusal naming server %s", pid, got, refused, err, id)
		}
	}
}
