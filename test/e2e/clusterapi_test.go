//go:build e2e && linux

package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/config"
	"github.com/pitstop-dev/pitstop/internal/cloud/clusterapi"
	"github.com/pitstop-dev/pitstop/internal/install"
	"github.com/pitstop-dev/pitstop/internal/localcluster"
	"github.com/pitstop-dev/pitstop/internal/manager"
	"github.com/pitstop-dev/pitstop/internal/testutil"
	"github.com/pitstop-dev/pitstop/internal/testutil/clustertest"
)

// TestClusterAPIDeletionWaitsForTheWorkloadProfile: two clusters, pitstop
// in both, as its ServiceAccount, and Cluster API's real core manager
// (bin/cluster-api-manager, its webhooks not registered) in the management
// cluster, the test playing an infrastructure provider whose kwok machines
// are the workload cluster's nodes and whose control plane is managed
// outside. Cluster API links each opted-in Machine to its node. A Machine
// is deleted: Cluster API waits on pitstop's pre-drain hook; pitstop labels
// the node machine-deleted, and is restarted while it waits; the workload
// profile (config/samples/cluster-api.yaml) drains the node, no budget
// ever broken, and approves; the hook goes, and Cluster API drains,
// deletes the node and the Machine. Then a maintenance is requested on
// another Machine: the node is drained and approves, the Machine is
// approved; the request is withdrawn and the node restored.
func TestClusterAPIDeletionWaitsForTheWorkloadProfile(t *testing.T) {
	ctx := t.Context()
	opts := localcluster.DefaultOptions()
	opts.ControlPlaneNodes, opts.Workers = 0, 4
	wl, wc := startMachineCluster(t, opts)
	const ns = "shop"
	applyShop(t, wl, wc, ns)
	startWorkload := func() *clustertest.Manager {
		return clustertest.StartManager(t, wl.Config, wc, clustertest.Options{AsServiceAccount: true, Tune: func(o *manager.Options) { o.SMCCompat = true }})
	}
	workloadPitstop := startWorkload()
	sample, err := config.Sample("cluster-api.yaml")
	if err != nil {
		t.Fatal(err)
	}
	profile := &pitstopv1alpha1.MaintenanceProfile{}
	if err := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(sample), 4096).Decode(profile); err != nil {
		t.Fatal(err)
	}
	// The maintenance waits for no window here.
	profile.Spec.States.MaintenanceRequired.Transitions[1].Check = "maintenance && one_at_a_time"
	testutil.Create(t, wc, profile)

	// The management cluster, with Cluster API.
	mgmt, err := testutil.StartEnv()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mgmt.Stop() })
	mc := mgmt.Client
	if err := install.CRDs(ctx, mc, clusterAPICRDs(t)); err != nil {
		t.Fatal(err)
	}
	const cns = "clusters"
	testutil.Namespace(t, mc, cns)
	kubeconfig, err := os.ReadFile(wl.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Create(t, mc, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cns, Name: "shop-kubeconfig", Labels: map[string]string{clusterv1.ClusterNameLabel: "shop"}},
		Type: "cluster.x-k8s.io/secret", Data: map[string][]byte{"value": kubeconfig}})
	createClusterAPICluster(t, mc, cns, wl.Config.Host)
	startClusterAPIManager(t, mgmt)
	workers := &corev1.NodeList{}
	if err := wc.List(ctx, workers); err != nil {
		t.Fatal(err)
	}
	machineOf := map[string]string{}
	for _, n := range workers.Items {
		m := "m-" + n.Name
		machineOf[n.Name] = m
		createMachine(t, mc, cns, m, n.Spec.ProviderID)
	}
	// Cluster API links each Machine to its node.
	for node, m := range machineOf {
		testutil.Eventually(t, 2*time.Minute, 200*time.Millisecond, func() error {
			got := &clusterv1.Machine{}
			if err := mc.Get(ctx, client.ObjectKey{Namespace: cns, Name: m}, got); err != nil {
				return err
			}
			if got.Status.NodeRef.Name != node {
				return fmt.Errorf("Machine %s: nodeRef %q, phase %q", m, got.Status.NodeRef.Name, got.Status.Phase)
			}
			return nil
		})
	}
	start := func() *clustertest.Manager {
		return clustertest.StartManager(t, mgmt.Config, mc, clustertest.Options{AsServiceAccount: true, Tune: func(o *manager.Options) {
			o.ClusterAPI, o.ClusterAPINamespaces = true, testutil.ClusterAPINamespaces
		}})
	}
	first := start()
	for _, m := range machineOf {
		awaitHook(t, mc, cns, m, true, time.Minute)
	}

	violations := watchBudgets(t, wl.Clientset, ns)
	target := busiestNode(t, wc, ns)
	// Nothing in the workload cluster approves for now.
	workloadPitstop.Stop()
	t.Logf("deleting the Machine of %s", target)
	if err := mc.Delete(ctx, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: cns, Name: machineOf[target]}}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, time.Minute, 100*time.Millisecond, func() error {
		n := &corev1.Node{}
		if err := wc.Get(ctx, client.ObjectKey{Name: target}, n); err != nil {
			return err
		}
		if n.Labels[clusterapi.LabelMachineDeleted] != "true" {
			return fmt.Errorf("node %s not labelled machine-deleted yet", target)
		}
		return nil
	})
	// Cluster API waits on the hook, and does not drain.
	testutil.Eventually(t, time.Minute, 100*time.Millisecond, func() error {
		m := &clusterv1.Machine{}
		if err := mc.Get(ctx, client.ObjectKey{Namespace: cns, Name: machineOf[target]}, m); err != nil {
			return err
		}
		if m.Status.Deletion == nil || m.Status.Deletion.WaitForPreDrainHookStartTime.IsZero() {
			return fmt.Errorf("Cluster API does not say it waits for the pre-drain hook: %+v", m.Status.Deletion)
		}
		return nil
	})
	// pitstop in the management cluster restarts while Cluster API waits.
	first.Stop()
	start()
	time.Sleep(2 * time.Second)
	awaitHook(t, mc, cns, machineOf[target], true, time.Second)
	if n := podsOn(t, wc, ns, target); n == 0 {
		t.Fatalf("node %s was drained while nothing had approved", target)
	}
	// From here on: when the node is drained (its NodeMaintenance), and
	// when its Machine is let go (the hook gone).
	var drainedAt, releasedAt time.Time
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for drainedAt.IsZero() || releasedAt.IsZero() {
			now := time.Now()
			if drainedAt.IsZero() {
				nms := &pitstopv1alpha1.NodeMaintenanceList{}
				if err := wc.List(ctx, nms); err == nil {
					for _, nm := range nms.Items {
						if nm.Spec.NodeName == target && meta.IsStatusConditionTrue(nm.Status.Conditions, pitstopv1alpha1.ConditionDrained) {
							drainedAt = now
						}
					}
				}
			}
			if releasedAt.IsZero() {
				m := &clusterv1.Machine{}
				err := mc.Get(ctx, client.ObjectKey{Namespace: cns, Name: machineOf[target]}, m)
				if _, held := m.Annotations[clusterapi.AnnotationHook]; apierrors.IsNotFound(err) || (err == nil && !held) {
					releasedAt = now
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	startWorkload()
	// Cluster API goes on: it deletes the node and the Machine.
	testutil.Eventually(t, 2*time.Minute, 200*time.Millisecond, func() error {
		if err := mc.Get(ctx, client.ObjectKey{Namespace: cns, Name: machineOf[target]}, &clusterv1.Machine{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Machine %s still there (%v)", machineOf[target], err)
		}
		if err := wc.Get(ctx, client.ObjectKey{Name: target}, &corev1.Node{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("node %s still there (%v)", target, err)
		}
		return nil
	})
	select {
	case <-watched:
	case <-time.After(10 * time.Second):
		t.Fatal("the drain and the release were not both seen")
	}
	if drainedAt.After(releasedAt) {
		t.Errorf("the Machine of %s was let go at %s, before pitstop drained the node at %s", target, releasedAt.Format(time.StampMilli), drainedAt.Format(time.StampMilli))
	}
	if err := wl.AwaitWorkloads(ctx, ns); err != nil {
		t.Fatal(err)
	}
	violations.check(t)

	// A maintenance, requested on another Machine.
	var other string
	for n := range machineOf {
		if n != target {
			other = n
			break
		}
	}
	m := machineOf[other]
	patchJSON(t, mc, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: cns, Name: m}},
		map[string]any{"metadata": map[string]any{"labels": map[string]string{clusterapi.LabelMaintenance: clusterapi.MaintenanceRequested}}})
	testutil.Eventually(t, 2*time.Minute, 100*time.Millisecond, func() error {
		got := &clusterv1.Machine{}
		if err := mc.Get(ctx, client.ObjectKey{Namespace: cns, Name: m}, got); err != nil {
			return err
		}
		if got.Labels[clusterapi.LabelMaintenance] != clusterapi.MaintenanceApproved {
			return fmt.Errorf("maintenance of %s %q", m, got.Labels[clusterapi.LabelMaintenance])
		}
		return nil
	})
	n := &corev1.Node{}
	if err := wc.Get(ctx, client.ObjectKey{Name: other}, n); err != nil {
		t.Fatal(err)
	}
	if !n.Spec.Unschedulable || n.Labels[pitstopv1alpha1.LabelSeedState] != string(pitstopv1alpha1.StateInMaintenance) {
		t.Errorf("approved, but node %s is cordoned=%v, %s=%q", other, n.Spec.Unschedulable, pitstopv1alpha1.LabelSeedState, n.Labels[pitstopv1alpha1.LabelSeedState])
	}
	patchJSON(t, mc, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: cns, Name: m}},
		map[string]any{"metadata": map[string]any{"labels": map[string]any{clusterapi.LabelMaintenance: nil}}})
	testutil.Eventually(t, time.Minute, 100*time.Millisecond, func() error {
		n := &corev1.Node{}
		if err := wc.Get(ctx, client.ObjectKey{Name: other}, n); err != nil {
			return err
		}
		if n.Spec.Unschedulable || n.Labels[clusterapi.LabelMachineMaintenance] != "" || n.Labels[clusterapi.LabelApproveMaintenance] != "" ||
			n.Labels[pitstopv1alpha1.LabelState] != string(pitstopv1alpha1.StateOperational) {
			return fmt.Errorf("node %s: cordoned %v, labels %v", other, n.Spec.Unschedulable, n.Labels)
		}
		return nil
	})
}

// applyShop runs the sample workloads (no bare pod) in ns and waits for
// them and their budgets.
func applyShop(t *testing.T, cluster *localcluster.Cluster, c client.Client, ns string) {
	t.Helper()
	workloads := localcluster.SampleWorkloads()
	workloads.Namespace.Name = ns
	for _, o := range workloads.Services {
		o.Namespace = ns
	}
	for _, o := range workloads.Deployments {
		o.Namespace = ns
	}
	for _, o := range workloads.StatefulSets {
		o.Namespace = ns
	}
	for _, o := range workloads.DaemonSets {
		o.Namespace = ns
	}
	for _, o := range workloads.PDBs {
		o.Namespace = ns
	}
	workloads.Pods = nil
	if err := cluster.Apply(t.Context(), workloads); err != nil {
		t.Fatal(err)
	}
	if err := cluster.AwaitWorkloads(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	awaitBudgetsAllow(t, c, ns)
}

// clusterAPICRDs are Cluster API's CRDs (bin/cluster-api-crds, from the
// module the manager is built from) and the test provider's.
func clusterAPICRDs(t *testing.T) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(localcluster.DefaultBinDir(), "cluster-api-crds", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no Cluster API CRDs in bin/cluster-api-crds (make tools builds them): %v", err)
	}
	paths = append(paths, filepath.Join("testdata", "kwok-capi-provider.yaml"))
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := dec.Decode(crd); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			if crd.Name != "" {
				crds = append(crds, crd)
			}
		}
	}
	return crds
}

// createClusterAPICluster creates cluster "shop": its infrastructure is
// provisioned and its control plane, managed outside the cluster, is
// initialized, both at the workload cluster's API server.
func createClusterAPICluster(t *testing.T, c client.Client, ns, apiServer string) {
	t.Helper()
	u, err := url.Parse(apiServer)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatal(err)
	}
	endpoint := map[string]any{"host": u.Hostname(), "port": int64(port)}
	provided := func(apiVersion, kind string, spec, status map[string]any) {
		o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind,
			"metadata": map[string]any{"namespace": ns, "name": "shop"}, "spec": spec}}
		testutil.Create(t, c, o)
		o.Object["status"] = status
		if err := c.Status().Update(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	provided("infrastructure.cluster.x-k8s.io/v1alpha1", "KwokCluster", map[string]any{"controlPlaneEndpoint": endpoint},
		map[string]any{"initialization": map[string]any{"provisioned": true}})
	provided("controlplane.cluster.x-k8s.io/v1alpha1", "KwokControlPlane", map[string]any{"controlPlaneEndpoint": endpoint, "version": "v1.36.3"},
		map[string]any{"initialization": map[string]any{"controlPlaneInitialized": true}, "externalManagedControlPlane": true, "version": "v1.36.3"})
	testutil.Create(t, c, &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop"},
		Spec: clusterv1.ClusterSpec{
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "KwokCluster", Name: "shop"},
			ControlPlaneRef:   clusterv1.ContractVersionedObjectReference{APIGroup: "controlplane.cluster.x-k8s.io", Kind: "KwokControlPlane", Name: "shop"},
		},
	})
}

// createMachine creates an opted-in Machine of cluster "shop" and its
// provisioned KwokMachine, whose instance is the node of providerID.
func createMachine(t *testing.T, c client.Client, ns, name, providerID string) {
	t.Helper()
	infra := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "KwokMachine",
		"metadata": map[string]any{"namespace": ns, "name": name}, "spec": map[string]any{"providerID": providerID}}}
	testutil.Create(t, c, infra)
	infra.Object["status"] = map[string]any{"initialization": map[string]any{"provisioned": true}}
	if err := c.Status().Update(t.Context(), infra); err != nil {
		t.Fatal(err)
	}
	testutil.Create(t, c, &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{clusterapi.LabelEnabled: "true", clusterv1.ClusterNameLabel: "shop"}},
		Spec: clusterv1.MachineSpec{ClusterName: "shop", Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To("bootstrap")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "KwokMachine", Name: name}},
	})
}

// startClusterAPIManager runs Cluster API's core manager against the
// management cluster until the test ends. Its webhook server serves a
// self-signed certificate that no webhook configuration names: its
// webhooks are off.
func startClusterAPIManager(t *testing.T, mgmt *testutil.Env) {
	t.Helper()
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := mgmt.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	crt, key, err := certutil.GenerateSelfSignedCertKey("127.0.0.1", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"tls.crt": crt, "tls.key": key} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	logFile, err := os.Create(filepath.Join(dir, "cluster-api.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(localcluster.DefaultBinDir(), "cluster-api-manager"),
		"--kubeconfig="+kubeconfig, "--leader-elect=false", "--webhook-port="+strconv.Itoa(freePort(t)), "--webhook-cert-dir="+dir,
		"--health-addr=127.0.0.1:"+strconv.Itoa(freePort(t)), "--diagnostics-address=127.0.0.1:"+strconv.Itoa(freePort(t)), "--insecure-diagnostics=true")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Stopped, not killed: its log is flushed on the way out.
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = logFile.Close()
		if t.Failed() {
			if data, err := os.ReadFile(logFile.Name()); err == nil {
				if len(data) > 20000 {
					data = data[len(data)-20000:]
				}
				t.Logf("cluster-api-manager's log (its end):\n%s", data)
			}
		}
	})
}

// podsOn counts the pods of ns on node that are not a DaemonSet's.
func podsOn(t *testing.T, c client.Client, ns, node string) int {
	t.Helper()
	pods := &corev1.PodList{}
	if err := c.List(t.Context(), pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range pods.Items {
		if owner := metav1.GetControllerOf(&p); p.Spec.NodeName == node && (owner == nil || owner.Kind != "DaemonSet") {
			n++
		}
	}
	return n
}

// freePort is a TCP port nothing listens on.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// awaitHook waits for pitstop's pre-drain hook on the Machine (want) or
// for it to be gone.
func awaitHook(t *testing.T, c client.Client, ns, name string, want bool, within time.Duration) {
	t.Helper()
	testutil.Eventually(t, within, 100*time.Millisecond, func() error {
		m := &clusterv1.Machine{}
		if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, m); err != nil {
			return err
		}
		if _, ok := m.Annotations[clusterapi.AnnotationHook]; ok != want {
			return fmt.Errorf("Machine %s: hook present %v, want %v", name, ok, want)
		}
		return nil
	})
}

// patchJSON merge-patches obj with body.
func patchJSON(t *testing.T, c client.Client, obj client.Object, body map[string]any) {
	t.Helper()
	data, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Patch(t.Context(), obj, client.RawPatch(types.MergePatchType, data)); err != nil {
		t.Fatal(err)
	}
}
