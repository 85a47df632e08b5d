package check

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/cloud/openstack"
	"github.com/pitstop-dev/pitstop/internal/sim/openstacksim"
)

var osAccount = openstacksim.Account{User: "pitstop", Password: "os-Secret-1", Domain: "kubernikus", Project: "p-123", Region: "eu-de-1"}

func cloudConf(s *openstacksim.Server) string {
	return fmt.Sprintf("[Global]\nauth-url=%q\ndomain-name=%q\ntenant-id=%q\nusername=%q\npassword=%q\nregion=%q\n",
		s.AuthURL(), osAccount.Domain, osAccount.Project, osAccount.User, osAccount.Password, osAccount.Region)
}

// TestKubernikusCountComparesTheNodesWithTheNodePools reads the node
// pools from the Kubernikus API (a local endpoint speaking its wire
// format, reached through Keystone's catalog) with the manager's account
// or a Secret's, once for a fleet evaluated at once.
func TestKubernikusCountComparesTheNodesWithTheNodePools(t *testing.T) {
	api := openstacksim.New(t, osAccount)
	api.SetCluster("k1", openstacksim.NodePool{Name: "small", Size: 2}, openstacksim.NodePool{Name: "large", Size: 1})
	file := filepath.Join(t.TempDir(), "cloudprovider.conf")
	if err := os.WriteFile(file, []byte(cloudConf(api)), 0o600); err != nil {
		t.Fatal(err)
	}
	deps := Deps{Kubernikus: openstack.Pools{Accounts: openstack.NewAccounts(), CloudConfigPath: file}}
	inst := pitstopv1alpha1.CheckInstance{KubernikusCount: &pitstopv1alpha1.KubernikusCountCheck{Cluster: "k1"}}
	c, err := New(inst, deps)
	if err != nil {
		t.Fatal(err)
	}
	three, two := cluster(node("n1"), node("n2"), node("n3")), cluster(node("n1"), node("n2"))
	r, err := c.Evaluate(t.Context(), Context{Node: three.nodeOf("n1"), Cluster: three, Now: noon})
	if err != nil || !r.Passed || r.Reason != "3 nodes, Kubernikus cluster k1 should have 3 (large: 1, small: 2)" {
		t.Fatalf("three nodes: %+v, %v", r, err)
	}
	r, err = c.Evaluate(t.Context(), Context{Node: two.nodeOf("n1"), Cluster: two, Now: noon.Add(time.Second)})
	if err != nil || r.Passed || !r.NextChange.Equal(noon.Add(time.Second+kubernikusRecheck)) {
		t.Fatalf("two nodes: %+v, %v", r, err)
	}
	// The profile's spec.recheck, when set, instead of the check's own.
	r, err = c.Evaluate(t.Context(), Context{Node: two.nodeOf("n1"), Cluster: two, Now: noon.Add(time.Second), Recheck: 10 * time.Second})
	if err != nil || r.Passed || !r.NextChange.Equal(noon.Add(11*time.Second)) {
		t.Fatalf("two nodes, recheck 10s: %+v, %v", r, err)
	}
	if api.Logins() != 1 {
		t.Fatalf("%d logins", api.Logins())
	}

	// An account from an opted-in Secret; a wrong one is an error without
	// its password.
	bad := strings.Replace(cloudConf(api), osAccount.Password, "n0t-the-Passw0rd", 1)
	deps.Secrets = secretsOf(secret("os-good", true, map[string]string{"conf": cloudConf(api)}), secret("os-bad", true, map[string]string{"conf": bad}), secret("os-hidden", false, map[string]string{"conf": cloudConf(api)}))
	deps.Namespace = pitstopNamespace
	for name, want := range map[string]string{"os-good": "", "os-bad": "logging in to OpenStack", "os-hidden": "os-hidden"} {
		inst := pitstopv1alpha1.CheckInstance{KubernikusCount: &pitstopv1alpha1.KubernikusCountCheck{Cluster: "k1", CloudProviderSecret: &pitstopv1alpha1.SecretKeyRef{Name: name, Key: "conf"}}}
		c, err := New(inst, deps)
		if err != nil {
			t.Fatal(err)
		}
		r, err := c.Evaluate(t.Context(), Context{Node: three.nodeOf("n1"), Cluster: three, Now: noon})
		switch {
		case want == "" && (err != nil || !r.Passed):
			t.Errorf("%s: %+v, %v", name, r, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "n0t-the-Passw0rd")):
			t.Errorf("%s: error %v, want one naming %q", name, err, want)
		}
	}

	// Where the Kubernikus API is not reached (pitstop explain), it says so.
	c, err = New(inst, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Evaluate(t.Context(), Context{Node: three.nodeOf("n1"), Cluster: three, Now: noon}); err == nil || !strings.Contains(err.Error(), "only pitstop's manager reads the Kubernikus API") {
		t.Fatalf("without the API: %v", err)
	}
}
