package openstack

import (
	"strings"
	"testing"

	"github.com/pitstop-dev/pitstop/internal/sim/openstacksim"
)

var testAccount = openstacksim.Account{User: "pitstop", Password: "os-Secret-1", Domain: "kubernikus", Project: "p-123", Region: "eu-de-1"}

func cloudConfig(os *openstacksim.Server) CloudConfig {
	return CloudConfig{AuthURL: os.AuthURL(), DomainName: testAccount.Domain, TenantID: testAccount.Project, Username: testAccount.User, Password: testAccount.Password, Region: testAccount.Region}
}

// TestServersAreReadAndDeletedByID: Nova's server is read with its
// metadata, and deleted, by its ID; one gone is nil, and deleting it again
// no error.
func TestServersAreReadAndDeletedByID(t *testing.T) {
	os := openstacksim.New(t, testAccount)
	id := os.AddServer("node-1")
	os.SetMetadata(id, map[string]string{"kubernikus:kluster": "k1", "kubernikus:nodepool": "small"})
	os.AddServer("node-1") // same name, other server: untouched
	a := NewAccounts()
	s, err := a.GetServer(t.Context(), cloudConfig(os), id)
	if err != nil || s == nil || s.ID != id || s.Name != "node-1" || s.Metadata["kubernikus:kluster"] != "k1" {
		t.Fatalf("GetServer = %+v, %v", s, err)
	}
	if err := a.DeleteServer(t.Context(), cloudConfig(os), id); err != nil {
		t.Fatal(err)
	}
	if s := os.Servers(); strings.Join(s, ",") != "node-1" || len(os.Deleted()) != 1 || os.Deleted()[0] != id {
		t.Fatalf("servers left %v, deleted %v", s, os.Deleted())
	}
	if s, err := a.GetServer(t.Context(), cloudConfig(os), id); err != nil || s != nil {
		t.Fatalf("GetServer of a deleted server = %+v, %v", s, err)
	}
	if err := a.DeleteServer(t.Context(), cloudConfig(os), id); err != nil {
		t.Fatalf("deleting a server gone already: %v", err)
	}
}

// TestNodePoolsReadsTheClusterAndLogsInAgainOnExpiry: one token serves the
// calls until it expires; then the client logs in again by itself.
func TestNodePoolsReadsTheClusterAndLogsInAgainOnExpiry(t *testing.T) {
	os := openstacksim.New(t, testAccount)
	os.SetCluster("k1", openstacksim.NodePool{Name: "a", Size: 2}, openstacksim.NodePool{Name: "b", Size: 3})
	a := NewAccounts()
	for range 3 {
		pools, err := a.NodePools(t.Context(), cloudConfig(os), "k1")
		if err != nil || len(pools) != 2 || pools[0].Size+pools[1].Size != 5 {
			t.Fatalf("NodePools = %+v, %v", pools, err)
		}
	}
	if n := os.Logins(); n != 1 {
		t.Fatalf("%d logins for three calls, want 1", n)
	}
	os.ExpireTokens()
	if _, err := a.NodePools(t.Context(), cloudConfig(os), "k1"); err != nil {
		t.Fatal(err)
	}
	if n := os.Logins(); n != 2 {
		t.Fatalf("%d logins after the token expired, want 2", n)
	}
	if _, err := a.NodePools(t.Context(), cloudConfig(os), "k2"); err == nil || !strings.Contains(err.Error(), "k2") {
		t.Fatalf("an unknown cluster: %v", err)
	}
}

func TestAWrongPasswordIsAnErrorWithoutIt(t *testing.T) {
	os := openstacksim.New(t, testAccount)
	cfg := cloudConfig(os)
	cfg.Password = "n0t-the-Passw0rd"
	_, err := NewAccounts().NodePools(t.Context(), cfg, "k1")
	if err == nil || strings.Contains(err.Error(), cfg.Password) || !strings.Contains(err.Error(), "logging in to OpenStack") {
		t.Fatalf("error %v", err)
	}
}

func TestCloudConfigReadsTheGlobalSection(t *testing.T) {
	c, err := ParseCloudConfig([]byte(`# kube-system/cloud-config
[Global]
auth-url="https://identity.example.com/v3"
domain-name="kubernikus"
tenant-id="p-123"
username = 'u'
password="p=w"
region="eu-de-1"

[LoadBalancer]
lb-version=v2
`))
	if err != nil {
		t.Fatal(err)
	}
	want := CloudConfig{AuthURL: "https://identity.example.com/v3", DomainName: "kubernikus", TenantID: "p-123", Username: "u", Password: "p=w", Region: "eu-de-1"}
	if c != want {
		t.Fatalf("read %+v", c)
	}
	if _, err := ParseCloudConfig([]byte("[Global]\nauth-url=x\nbroken line\n")); err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Fatalf("a broken line: %v", err)
	}
	if _, err := ParseCloudConfig([]byte("[Global]\nauth-url=x\n")); err == nil || !strings.Contains(err.Error(), "[Global] password: required") {
		t.Fatalf("missing keys: %v", err)
	}
}
