//go:build linux

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/config"
	"github.com/pitstop-dev/pitstop/internal/capi"
	"github.com/pitstop-dev/pitstop/internal/install"
	"github.com/pitstop-dev/pitstop/internal/localcluster"
	"github.com/pitstop-dev/pitstop/internal/manager"
	"github.com/pitstop-dev/pitstop/internal/testutil"
	"github.com/pitstop-dev/pitstop/internal/testutil/clustertest"
)

// capiFinalizer is Cluster API's finalizer on Machines: it holds a deleted
// Machine until Cluster API has drained and removed it.
const capiFinalizer = "machine.cluster.x-k8s.io"

// TestClusterAPIDeletionWaitsForTheWorkloadProfile: two clusters, pitstop
// in both, as its ServiceAccount. The management cluster (an API server
// with Cluster API's Machine CRD; the test plays Cluster API's Machine
// controller by its documented deletion contract) has an opted-in Machine
// for each worker of the workload cluster (kwok nodes, a shop with
// PodDisruptionBudgets, the sample profile config/samples/cluster-api.yaml).
// A Machine is deleted: pitstop in the management cluster labels its node
// machine-deleted and keeps the pre-drain hook, and is restarted while it
// waits; the workload profile drains the node (no budget ever broken) and
// approves; the hook goes, and Cluster API (the test) deletes the node and
// the Machine. Then a maintenance is requested on another Machine: the
// node is drained and approves, the Machine is approved; the request is
// withdrawn and the node restored.
func TestClusterAPIDeletionWaitsForTheWorkloadProfile(t *testing.T) {
	ctx := t.Context()
	opts := localcluster.DefaultOptions()
	opts.ControlPlaneNodes, opts.Workers = 0, 4
	wl, wc := startMachineCluster(t, opts)
	const ns = "shop"
	applyShop(t, wl, wc, ns)
	clustertest.StartManager(t, wl.Config, wc, clustertest.Options{AsServiceAccount: true, Tune: func(o *manager.Options) { o.SMCCompat = true }})
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

	// The management cluster.
	mgmt, err := testutil.StartEnv()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mgmt.Stop() })
	mc := mgmt.Client
	if err := install.CRDs(ctx, mc, []*apiextensionsv1.CustomResourceDefinition{machineCRD(t)}); err != nil {
		t.Fatal(err)
	}
	const cns = "clusters"
	testutil.Namespace(t, mc, cns)
	kubeconfig, err := os.ReadFile(wl.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Create(t, mc, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cns, Name: "shop-kubeconfig"}, Type: "cluster.x-k8s.io/secret",
		Data: map[string][]byte{"value": kubeconfig}})
	workers := &corev1.NodeList{}
	if err := wc.List(ctx, workers); err != nil {
		t.Fatal(err)
	}
	machineOf := map[string]string{}
	for _, n := range workers.Items {
		m := "m-" + n.Name
		machineOf[n.Name] = m
		createMachine(t, mc, cns, m, n.Name)
		// Cluster API writes these on the node.
		patchJSON(t, wc, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name}}, map[string]any{"metadata": map[string]any{"annotations": map[string]string{
			clusterv1.MachineAnnotation: m, clusterv1.ClusterNamespaceAnnotation: cns, clusterv1.ClusterNameAnnotation: "shop"}}})
	}
	start := func() *clustertest.Manager {
		return clustertest.StartManager(t, mgmt.Config, mc, clustertest.Options{AsServiceAccount: true, Tune: func(o *manager.Options) { o.ClusterAPI = true }})
	}
	first := start()
	for _, m := range machineOf {
		awaitHook(t, mc, cns, m, true, time.Minute)
	}

	violations := watchBudgets(t, wl.Clientset, ns)
	target := busiestNode(t, wc, ns)
	t.Logf("deleting the Machine of %s", target)
	if err := mc.Delete(ctx, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: cns, Name: machineOf[target]}}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, time.Minute, 100*time.Millisecond, func() error {
		n := &corev1.Node{}
		if err := wc.Get(ctx, client.ObjectKey{Name: target}, n); err != nil {
			return err
		}
		if n.Labels[capi.LabelMachineDeleted] != "true" {
			return fmt.Errorf("node %s not labelled machine-deleted yet", target)
		}
		return nil
	})
	first.Stop()
	start()
	awaitHook(t, mc, cns, machineOf[target], false, 3*time.Minute)
	// The hook went only after the workload profile had drained the node.
	drained := false
	nms := &pitstopv1alpha1.NodeMaintenanceList{}
	if err := wc.List(ctx, nms); err != nil {
		t.Fatal(err)
	}
	for _, nm := range nms.Items {
		if nm.Spec.NodeName == target && meta.IsStatusConditionTrue(nm.Status.Conditions, pitstopv1alpha1.ConditionDrained) {
			drained = true
		}
	}
	if !drained {
		t.Errorf("the hook of %s's Machine went before a NodeMaintenance drained it: %+v", target, nms.Items)
	}
	pods := &corev1.PodList{}
	if err := wc.List(ctx, pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if owner := metav1.GetControllerOf(&p); p.Spec.NodeName == target && (owner == nil || owner.Kind != "DaemonSet") {
			t.Errorf("pod %s still on %s when its Machine was let go", p.Name, target)
		}
	}
	// Cluster API goes on: the node and the Machine go.
	if err := wc.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: target}}); err != nil {
		t.Fatal(err)
	}
	patchJSON(t, mc, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: cns, Name: machineOf[target]}}, map[string]any{"metadata": map[string]any{"finalizers": nil}})
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
		map[string]any{"metadata": map[string]any{"labels": map[string]string{capi.LabelMaintenance: capi.MaintenanceRequested}}})
	testutil.Eventually(t, 2*time.Minute, 100*time.Millisecond, func() error {
		got := &clusterv1.Machine{}
		if err := mc.Get(ctx, client.ObjectKey{Namespace: cns, Name: m}, got); err != nil {
			return err
		}
		if got.Labels[capi.LabelMaintenance] != capi.MaintenanceApproved {
			return fmt.Errorf("maintenance of %s %q", m, got.Labels[capi.LabelMaintenance])
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
		map[string]any{"metadata": map[string]any{"labels": map[string]any{capi.LabelMaintenance: nil}}})
	testutil.Eventually(t, time.Minute, 100*time.Millisecond, func() error {
		n := &corev1.Node{}
		if err := wc.Get(ctx, client.ObjectKey{Name: other}, n); err != nil {
			return err
		}
		if n.Spec.Unschedulable || n.Labels[capi.LabelMachineMaintenance] != "" || n.Labels[capi.LabelApproveMaintenance] != "" ||
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

// machineCRD is Cluster API's Machine CRD, as the bridge's tests use it.
func machineCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	data, err := os.ReadFile("../../internal/capi/testdata/crds/cluster.x-k8s.io_machines.yaml")
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096).Decode(crd); err != nil {
		t.Fatal(err)
	}
	return crd
}

// createMachine creates an opted-in Machine of cluster "shop" whose node
// is node, with Cluster API's finalizer.
func createMachine(t *testing.T, c client.Client, ns, name, node string) {
	t.Helper()
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Finalizers: []string{capiFinalizer},
			Labels: map[string]string{capi.LabelEnabled: "true", clusterv1.ClusterNameLabel: "shop"}},
		Spec: clusterv1.MachineSpec{ClusterName: "shop", Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To("bootstrap")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "KwokMachine", Name: name}},
	}
	testutil.Create(t, c, m)
	base := m.DeepCopy()
	m.Status.NodeRef = clusterv1.MachineNodeReference{Name: node}
	m.Status.Phase = "Running"
	if err := c.Status().Patch(t.Context(), m, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
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
		if _, ok := m.Annotations[capi.AnnotationHook]; ok != want {
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
