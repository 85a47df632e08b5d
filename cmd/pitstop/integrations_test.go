package main

import (
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/simulator"

	"github.com/pitstop-dev/pitstop/internal/controller/esx"
	"github.com/pitstop-dev/pitstop/internal/controller/kubernikus"
	"github.com/pitstop-dev/pitstop/internal/sim/openstacksim"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// TestRunWithESXFollowsTheVCenter runs `pitstop run --esx` as docs/esx.md
// says, against a vCenter simulator: the node is labelled with its host's
// version and maintenance state, and the password is in no log line.
func TestRunWithESXFollowsTheVCenter(t *testing.T) {
	model := simulator.VPX()
	if err := model.Create(); err != nil {
		t.Fatal(err)
	}
	model.Service.Listen = &url.URL{User: url.UserPassword("pitstop", "vc-Secret-1")}
	srv := model.Service.NewServer()
	t.Cleanup(func() { srv.Close(); model.Remove() })
	vc, err := govmomi.NewClient(t.Context(), srv.URL, true)
	if err != nil {
		t.Fatal(err)
	}
	finder := find.NewFinder(vc.Client, false)
	dc, err := finder.DefaultDatacenter(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	finder.SetDatacenter(dc)
	host, err := finder.HostSystem(t.Context(), "DC0_H0")
	if err != nil {
		t.Fatal(err)
	}
	u := *srv.URL
	u.User, u.RawQuery = nil, "az=$AZ"
	cfg := testutil.WriteFile(t, "esx.yaml", fmt.Sprintf("intervals:\n  check:\n    period: 1s\nvCenters:\n  templateUrl: %s\n  insecure: true\n  credentials:\n    a: {username: pitstop, password: vc-Secret-1}\n",
		strings.Replace(u.String(), "%24AZ", "$AZ", 1)))
	testutil.CreateNode(t, env.Client, testutil.Node("run-esx-a", testutil.WithLabels(map[string]string{esx.LabelHost: "DC0_H0", esx.LabelZoneBeta: "eu-de-1a"})))

	args, _, _ := runArgs(t, "pitstop-esx")
	p := startPitstop(t, append(args, "--esx", "--esx-config="+cfg)...)
	testutil.AwaitNodeLabel(t, env.Client, "run-esx-a", esx.LabelInMaintenance, "false")
	testutil.AwaitNodeLabel(t, env.Client, "run-esx-a", esx.LabelVersion, "8.0.2")
	task, err := host.EnterMaintenanceMode(t.Context(), 0, false, nil)
	if err == nil {
		err = task.Wait(t.Context())
	}
	if err != nil {
		t.Fatal(err)
	}
	testutil.AwaitNodeLabel(t, env.Client, "run-esx-a", esx.LabelInMaintenance, "true")
	if code := p.signal(syscall.SIGTERM, 15*time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	if strings.Contains(p.stderr.String(), "vc-Secret-1") {
		t.Fatal("the vCenter password is in the logs")
	}
}

// TestRunWithKubernikusReplacesANode runs `pitstop run --kubernikus` as
// docs/kubernikus.md says (no kubernikus.yaml: the defaults), against
// local Keystone and Nova endpoints: an outdated kubelet is labelled, and
// a node labelled cloud.sap/delete-node=true is drained and its server
// deleted.
func TestRunWithKubernikusReplacesANode(t *testing.T) {
	account := openstacksim.Account{User: "pitstop", Password: "os-Secret-1", Domain: "kubernikus", Project: "p-1", Region: "eu-de-1"}
	cloud := openstacksim.New(t, account)
	id := cloud.AddServer("run-kn-a")
	ids := map[string]string{"run-kn-a": id, "run-kn-b": cloud.AddServer("run-kn-b")}
	conf := testutil.WriteFile(t, "cloudprovider.conf", fmt.Sprintf("[Global]\nauth-url=%q\ndomain-name=%q\ntenant-id=%q\nusername=%q\npassword=%q\nregion=%q\n",
		cloud.AuthURL(), account.Domain, account.Project, account.User, account.Password, account.Region))
	for _, name := range []string{"run-kn-a", "run-kn-b"} {
		n := testutil.Node(name)
		n.Spec.ProviderID = "openstack:///" + ids[name]
		n.Status.NodeInfo.KubeletVersion = "v1.20.0"
		if name == "run-kn-a" {
			n.Labels[kubernikus.LabelDeleteNode] = "true"
		}
		testutil.CreateNode(t, env.Client, n)
	}

	args, _, _ := runArgs(t, "pitstop-kubernikus")
	p := startPitstop(t, append(args, "--kubernikus", "--kubernikus-config="+filepath.Join(t.TempDir(), "kubernikus.yaml"), "--openstack-cloud-config="+conf)...)
	testutil.AwaitNodeLabel(t, env.Client, "run-kn-b", kubernikus.LabelKubeletNeedsUpdate, "true")
	testutil.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		if d := cloud.Deleted(); !slices.Equal(d, []string{id}) {
			return fmt.Errorf("deleted servers %v, want [%s]", d, id)
		}
		return nil
	})
	if code := p.signal(syscall.SIGTERM, 15*time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	if strings.Contains(p.stderr.String(), "os-Secret-1") {
		t.Fatal("the OpenStack password is in the logs")
	}
}
