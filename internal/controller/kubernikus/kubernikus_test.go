package kubernikus_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/yaml"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/cloud/openstack"
	"github.com/pitstop-dev/pitstop/internal/controller/kubernikus"
	"github.com/pitstop-dev/pitstop/internal/controller/nodemaintenance"
	"github.com/pitstop-dev/pitstop/internal/controller/profile"
	"github.com/pitstop-dev/pitstop/internal/plugin/check"
	"github.com/pitstop-dev/pitstop/internal/sim/openstacksim"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// env is a real API server and etcd; OpenStack (Keystone, Nova,
// Kubernikus) is the local endpoint that speaks their wire format.
var env *testutil.Env

func TestMain(m *testing.M) { testutil.Main(m, &env) }

var account = openstacksim.Account{User: "pitstop", Password: "os-Secret-1", Domain: "kubernikus", Project: "p-123", Region: "eu-de-1"}

func eventually(t *testing.T, check func() error) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, 50*time.Millisecond, check)
}

func cloudConf(os *openstacksim.Server) string {
	return fmt.Sprintf("[Global]\nauth-url=%q\ndomain-name=%q\ntenant-id=%q\nusername=%q\npassword=%q\nregion=%q\n",
		os.AuthURL(), account.Domain, account.Project, account.User, account.Password, account.Region)
}

func start(t *testing.T, opts kubernikus.Options) {
	t.Helper()
	if opts.Accounts == nil {
		opts.Accounts = openstack.NewAccounts()
	}
	if opts.LeaseNamespace == "" {
		opts.LeaseNamespace = leaseNamespace(t)
	}
	// Each test runs its own manager: the controller's name repeats.
	opts2 := ctrl.Options{Controller: config.Controller{SkipNameValidation: ptr.To(true)}}
	testutil.StartControllers(t, env.Config, opts2, func(mgr ctrl.Manager) error {
		nmOpts := nodemaintenance.DefaultOptions()
		nmOpts.LeaseNamespace = opts.LeaseNamespace
		if err := nodemaintenance.Setup(t.Context(), mgr, nmOpts); err != nil {
			return err
		}
		_, err := kubernikus.Setup(mgr, opts)
		return err
	})
}

// leaseNamespace creates a namespace, named after the test, for the
// budget's slot Leases.
func leaseNamespace(t *testing.T) string {
	t.Helper()
	name := strings.Map(func(r rune) rune {
		if ('a' <= r && r <= 'z') || ('0' <= r && r <= '9') {
			return r
		}
		return '-'
	}, strings.ToLower(t.Name()))
	return testutil.Namespace(t, env.Client, "kn-"+name[:min(len(name), 50)])
}

// node creates a node whose kubelet is of version v, on the server with
// ID id (spec.providerID; none when id is "").
func node(t *testing.T, name, v, id string, labels map[string]string, opts ...testutil.NodeOption) {
	t.Helper()
	n := testutil.Node(name, append([]testutil.NodeOption{testutil.WithLabels(labels)}, opts...)...)
	n.Status.NodeInfo.KubeletVersion = v
	if id != "" {
		n.Spec.ProviderID = "openstack:///" + id
	}
	testutil.CreateNode(t, env.Client, n)
	if got := testutil.GetNode(t, env.Client, name).Status.NodeInfo.KubeletVersion; got != v {
		t.Fatalf("node %s has kubelet version %q, want %q", name, got, v)
	}
}

func serverVersion(t *testing.T) string {
	t.Helper()
	info, err := env.Clientset.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	return info.GitVersion
}

func setLabel(t *testing.T, name, key string, value *string) {
	t.Helper()
	testutil.SetNodeLabel(t, env.Client, name, key, value)
}

func wantLabel(t *testing.T, name, key, value string) {
	t.Helper()
	testutil.AwaitNodeLabel(t, env.Client, name, key, value)
}

func reasons(t *testing.T, name string) []string {
	t.Helper()
	return testutil.NodeEventReasons(t, env.Client, name, "Kubernikus")
}

// TestKubeletVersionsAreComparedWithTheAPIServers: another version, older
// or newer, is true; the same version (build metadata aside) is false; a
// version that does not parse leaves the node unlabelled.
func TestKubeletVersionsAreComparedWithTheAPIServers(t *testing.T) {
	fake := openstacksim.New(t, account)
	same := serverVersion(t)
	node(t, "kn-older", "v1.20.0", "", nil)
	node(t, "kn-newer", "v9.0.0", "", nil)
	node(t, "kn-same", same, "", nil)
	node(t, "kn-build", strings.SplitN(same, "+", 2)[0]+"+pitstop.1", "", nil)
	node(t, "kn-odd", "fake", "", nil)
	start(t, kubernikus.Options{ConfigPath: testutil.WriteFile(t, "kubernikus.yaml", "intervals:\n  requeue: 1s\n"), CloudConfigPath: testutil.WriteFile(t, "cloudprovider.conf", cloudConf(fake))})
	wantLabel(t, "kn-older", kubernikus.LabelKubeletNeedsUpdate, "true")
	wantLabel(t, "kn-newer", kubernikus.LabelKubeletNeedsUpdate, "true")
	wantLabel(t, "kn-same", kubernikus.LabelKubeletNeedsUpdate, "false")
	wantLabel(t, "kn-build", kubernikus.LabelKubeletNeedsUpdate, "false")
	if _, ok := testutil.GetNode(t, env.Client, "kn-odd").Labels[kubernikus.LabelKubeletNeedsUpdate]; ok {
		t.Fatal("a kubelet version that does not parse was labelled")
	}
	if fake.Logins() != 0 {
		t.Fatal("labelling logged in to OpenStack")
	}
}

// TestDeleteNodeDrainsThenDeletesTheServer: cloud.sap/delete-node=true
// drains the node through a NodeMaintenance and only then deletes its
// server (exactly that one) in Nova; the node gone, its NodeMaintenance
// goes too. Taken off before the server is deleted (a PodDisruptionBudget
// holds the drain), the label gives the node back.
func TestDeleteNodeDrainsThenDeletesTheServer(t *testing.T) {
	fake := openstacksim.New(t, account)
	id := fake.AddServer("kn-del")
	fake.AddServer("kn-del0")
	keep := fake.AddServer("kn-keep")
	v := serverVersion(t)
	node(t, "kn-del", v, id, nil)
	node(t, "kn-keep", v, keep, nil)
	ns := testutil.Namespace(t, env.Client, "kubernikus-delete")
	testutil.Kubelet(t, env.Clientset)
	testutil.ManagedPods(t, env.Client, ns, "kn-del", "web", 2)
	testutil.ManagedPods(t, env.Client, ns, "kn-keep", "db", 1)
	testutil.PDB(t, env.Client, ns, "db", 1, 0)
	start(t, kubernikus.Options{ConfigPath: testutil.WriteFile(t, "kubernikus.yaml", "intervals:\n  requeue: 1s\n  podEviction:\n    period: 1s\n"), CloudConfigPath: testutil.WriteFile(t, "cloudprovider.conf", cloudConf(fake))})

	yes := "true"
	setLabel(t, "kn-del", kubernikus.LabelDeleteNode, &yes)
	eventually(t, func() error {
		if d := fake.Deleted(); !slices.Equal(d, []string{id}) {
			return fmt.Errorf("deleted servers %v, want [%s]", d, id)
		}
		return nil
	})
	if left := testutil.PodsOn(t, env.Client, ns, "kn-del"); len(left) != 0 {
		t.Fatalf("the server was deleted with pods on its node: %v", left)
	}
	eventually(t, func() error {
		if got := testutil.GetNode(t, env.Client, "kn-del").Annotations[kubernikus.AnnotationServerDeleted]; got != id {
			return fmt.Errorf("annotation %s=%q", kubernikus.AnnotationServerDeleted, got)
		}
		return nil
	})
	if s := fake.Servers(); !slices.Equal(s, []string{"kn-del0", "kn-keep"}) {
		t.Fatalf("servers left %v", s)
	}
	if r := reasons(t, "kn-del"); !slices.Contains(r, "KubernikusDrain") || !slices.Contains(r, "KubernikusServerDeleted") {
		t.Fatalf("Events %v", r)
	}
	// The cloud's node controller deletes the node of a deleted server.
	if err := env.Client.Delete(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "kn-del"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() error {
		err := env.Client.Get(t.Context(), client.ObjectKey{Name: "kubernikus-kn-del"}, &pitstopv1alpha1.NodeMaintenance{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("the NodeMaintenance of a deleted node: %v", err)
		}
		return nil
	})

	// A drain a budget holds, called off.
	setLabel(t, "kn-keep", kubernikus.LabelDeleteNode, &yes)
	eventually(t, func() error {
		if n := testutil.GetNode(t, env.Client, "kn-keep"); !n.Spec.Unschedulable {
			return fmt.Errorf("node %s not cordoned", n.Name)
		}
		return nil
	})
	time.Sleep(2 * time.Second)
	if s := fake.Servers(); !slices.Contains(s, "kn-keep") {
		t.Fatal("the server was deleted while its node's drain was held")
	}
	setLabel(t, "kn-keep", kubernikus.LabelDeleteNode, nil)
	eventually(t, func() error {
		if n := testutil.GetNode(t, env.Client, "kn-keep"); n.Spec.Unschedulable {
			return fmt.Errorf("node %s still cordoned", n.Name)
		}
		return nil
	})
	if s := fake.Servers(); !slices.Contains(s, "kn-keep") {
		t.Fatal("the server of a node given back was deleted")
	}
}

// TestTheAccountCanComeFromASecret: cloudProviderSecret names the
// cluster's cloud-config Secret; no file is read.
func TestTheAccountCanComeFromASecret(t *testing.T) {
	fake := openstacksim.New(t, account)
	id := fake.AddServer("kn-secret")
	node(t, "kn-secret", serverVersion(t), id, map[string]string{kubernikus.LabelDeleteNode: "true"})
	ns := testutil.Namespace(t, env.Client, "kubernikus-secret")
	testutil.Create(t, env.Client, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cloud-config"},
		Data:       map[string][]byte{openstack.KeyCloudConfig: []byte(cloudConf(fake))},
	})
	cfg := fmt.Sprintf("intervals:\n  requeue: 1s\ncloudProviderSecret:\n  name: cloud-config\n  namespace: %s\n", ns)
	start(t, kubernikus.Options{ConfigPath: testutil.WriteFile(t, "kubernikus.yaml", cfg), CloudConfigPath: filepath.Join(t.TempDir(), "missing.conf")})
	eventually(t, func() error {
		if d := fake.Deleted(); !slices.Equal(d, []string{id}) {
			return fmt.Errorf("deleted servers %v", d)
		}
		return nil
	})
}

// TestTheSampleProfileReplacesOutdatedNodesOneAtATime runs
// config/samples/kubernikus.yaml with the profile engine, against a
// played node pool of two: when a server is deleted, its node goes and a
// new one (up to date) comes a moment later. Both outdated nodes are
// replaced, never two at once, and the second only once the pool is full
// again.
func TestTheSampleProfileReplacesOutdatedNodesOneAtATime(t *testing.T) {
	fake := openstacksim.New(t, account)
	fake.SetCluster("pool-test", openstacksim.NodePool{Name: "workers", Size: 2})
	current := serverVersion(t)
	pool := map[string]string{"pool": "kp"}
	for _, n := range []string{"kp-1", "kp-2"} {
		node(t, n, "v1.20.0", fake.AddServer(n), pool)
	}
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "config", "samples", "kubernikus.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	mp := &pitstopv1alpha1.MaintenanceProfile{}
	if err := yaml.UnmarshalStrict(raw, mp); err != nil {
		t.Fatal(err)
	}
	mp.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: pool}
	for i := range mp.Spec.Checks {
		if k := mp.Spec.Checks[i].KubernikusCount; k != nil {
			k.Cluster = "pool-test"
		}
	}
	testutil.Create(t, env.Client, mp)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), mp) })
	ns := testutil.Namespace(t, env.Client, "kubernikus-pool")
	conf := testutil.WriteFile(t, "cloudprovider.conf", cloudConf(fake))
	accounts := openstack.NewAccounts()
	opts := kubernikus.Options{ConfigPath: testutil.WriteFile(t, "kubernikus.yaml", "intervals:\n  requeue: 1s\n"), CloudConfigPath: conf, Accounts: accounts, LeaseNamespace: ns}
	testutil.StartControllers(t, env.Config, ctrl.Options{Controller: config.Controller{SkipNameValidation: ptr.To(true)}}, func(mgr ctrl.Manager) error {
		if err := nodemaintenance.Setup(t.Context(), mgr, nodemaintenance.DefaultOptions()); err != nil {
			return err
		}
		if _, err := kubernikus.Setup(mgr, opts); err != nil {
			return err
		}
		_, err := profile.Setup(mgr, profile.Options{LeaseNamespace: ns, Checks: check.Deps{Kubernikus: openstack.Pools{Accounts: accounts, CloudConfigPath: conf}}})
		return err
	})

	// The node pool: a node whose server is gone goes, and a new one comes
	// two seconds later. The most nodes marked for deletion at once is kept.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	var most atomic.Int32
	wg.Go(func() {
		next := 3
		for ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
			var nodes corev1.NodeList
			if env.Client.List(ctx, &nodes, client.MatchingLabels(pool)) != nil {
				continue
			}
			marked := 0
			for _, n := range nodes.Items {
				if n.Labels[kubernikus.LabelDeleteNode] == "true" {
					marked++
				}
				if !slices.Contains(fake.Servers(), n.Name) {
					_ = env.Client.Delete(ctx, &n)
					name := fmt.Sprintf("kp-%d", next)
					next++
					wg.Go(func() {
						time.Sleep(2 * time.Second)
						nn := testutil.Node(name, testutil.WithLabels(pool))
						nn.Spec.ProviderID = "openstack:///" + fake.AddServer(name)
						nn.Status.NodeInfo.KubeletVersion = current
						_ = env.Client.Create(ctx, nn)
					})
				}
			}
			if int32(marked) > most.Load() {
				most.Store(int32(marked))
			}
		}
	})

	testutil.Eventually(t, 90*time.Second, 200*time.Millisecond, func() error {
		var nodes corev1.NodeList
		if err := env.Client.List(t.Context(), &nodes, client.MatchingLabels(pool)); err != nil {
			return err
		}
		var names []string
		for _, n := range nodes.Items {
			names = append(names, n.Name+"="+n.Labels[kubernikus.LabelKubeletNeedsUpdate]+"/"+n.Labels[pitstopv1alpha1.LabelState])
		}
		slices.Sort(names)
		want := []string{"kp-3=false/operational", "kp-4=false/operational"}
		if !slices.Equal(names, want) {
			return fmt.Errorf("nodes %v, want %v", names, want)
		}
		return nil
	})
	t.Cleanup(func() {
		for _, n := range []string{"kp-3", "kp-4"} {
			_ = env.Client.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
		}
	})
	if m := most.Load(); m != 1 {
		t.Fatalf("%d nodes were marked for deletion at once, want 1", m)
	}
	if d := fake.Deleted(); len(d) != 2 {
		t.Fatalf("deleted servers %v, want 2", d)
	}
}
