//go:build e2e && linux

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pitstop-dev/pitstop/config"
	"github.com/pitstop-dev/pitstop/internal/controller/medik8s"
	"github.com/pitstop-dev/pitstop/internal/install"
	"github.com/pitstop-dev/pitstop/internal/localcluster"
	"github.com/pitstop-dev/pitstop/internal/nodeview"
	"github.com/pitstop-dev/pitstop/internal/testutil"
	"github.com/pitstop-dev/pitstop/internal/testutil/clustertest"
)

// TestMedik8sOperatorsOwnScenario plays the medik8s Node Maintenance
// Operator's public end-to-end scenario against pitstop (--medik8s-compat,
// its webhook on, as the chart's ServiceAccount) on a local cluster of 3
// control-plane nodes and 2 workers: the 1st control-plane node may go
// into maintenance, the 2nd not (quorum); a missing node is refused; a
// worker's maintenance is admitted, a duplicate and a rename are refused,
// it runs and succeeds, the node is unschedulable with medik8s' taint and
// a valid Lease, the workload has moved; ending it resets the node,
// invalidates the Lease, and the workload still runs. Then a Lease held by
// another medik8s component holds a maintenance back until it is released,
// and the operator's README example (kubevirt.io/v1alpha3) drains a node.
func TestMedik8sOperatorsOwnScenario(t *testing.T) {
	ctx := t.Context()
	opts := localcluster.DefaultOptions()
	opts.ControlPlaneNodes, opts.Workers = 3, 2
	cluster, c := startMachineCluster(t, opts)
	crds, err := config.Medik8sCRDs()
	if err != nil {
		t.Fatal(err)
	}
	if err := install.CRDs(ctx, c, crds); err != nil {
		t.Fatal(err)
	}
	const ns = "medik8s-e2e"
	web := localcluster.Deployment(ns, "test-deployment", 1)
	if err := cluster.Apply(ctx, localcluster.Workloads{Namespace: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, Deployments: []*appsv1.Deployment{web}}); err != nil {
		t.Fatal(err)
	}
	if err := cluster.AwaitWorkloads(ctx, ns); err != nil {
		t.Fatal(err)
	}
	clustertest.StartManager(t, cluster.Config, c, clustertest.Options{Webhook: true, Medik8sCompat: true, AsServiceAccount: true})

	nm := func(name, node string) *unstructured.Unstructured {
		obj := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"nodeName": node, "reason": "Set maintenance on node for e2e testing"}}}
		obj.SetGroupVersionKind(medik8s.GroupVersionKind)
		obj.SetName("nodemaintenance-" + name)
		return obj
	}
	refused := func(obj *unstructured.Unstructured, want string) {
		t.Helper()
		if err := c.Create(ctx, obj); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("creating %s: %v, want a refusal saying %q", obj.GetName(), err, want)
		}
	}
	phase := func(name, want string, within time.Duration) {
		t.Helper()
		testutil.Eventually(t, within, 200*time.Millisecond, func() error {
			obj := nm(name, "")
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
				return err
			}
			if got, _, _ := unstructured.NestedString(obj.Object, "status", "phase"); got != want {
				return fmt.Errorf("%s: phase %q, want %s", obj.GetName(), got, want)
			}
			return nil
		})
	}

	// awaitMovedFrom waits for the workload to run again, elsewhere.
	awaitMovedFrom := func(node string) {
		t.Helper()
		if err := cluster.AwaitWorkloads(ctx, ns); err != nil {
			t.Fatal(err)
		}
		if moved := podNodeOf(t, c, ns); moved == node {
			t.Errorf("the workload still runs on %s", node)
		}
	}
	// awaitReset waits until the node is schedulable again, without
	// medik8s' taint, and its Lease is gone.
	awaitReset := func(node string) {
		t.Helper()
		testutil.Eventually(t, time.Minute, 200*time.Millisecond, func() error {
			n := &corev1.Node{}
			if err := c.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
				return err
			}
			if n.Spec.Unschedulable || nodeview.HasTaint(n, "medik8s.io/drain") {
				return fmt.Errorf("node %s not reset: unschedulable %v, taints %v", node, n.Spec.Unschedulable, n.Spec.Taints)
			}
			lease := client.ObjectKey{Namespace: medik8s.LeaseNamespace, Name: "node-" + node}
			if err := c.Get(ctx, lease, &coordinationv1.Lease{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("the Lease %s is still there (%v)", lease, err)
			}
			return nil
		})
	}

	// Control-plane nodes: the 1st may go, the 2nd would break quorum.
	first := nm("test-1st-control-plane", "control-plane-0")
	testutil.Create(t, c, first)
	phase("test-1st-control-plane", "Succeeded", time.Minute)
	refused(nm("test-2nd-control-plane", "control-plane-1"), fmt.Sprintf(medik8s.ErrorControlPlaneQuorumViolation, "control-plane-1"))
	if err := c.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}

	refused(nm("test-unexisting", "doesNotExist"), fmt.Sprintf(medik8s.ErrorNodeNotExists, "doesNotExist"))

	// A worker: the one the test workload runs on.
	target := podNodeOf(t, c, ns)
	start := time.Now().Truncate(time.Second)
	worker := nm("test-maintenance", target)
	testutil.Create(t, c, worker)
	refused(nm("test-duplicate", target), fmt.Sprintf(medik8s.ErrorNodeMaintenanceExists, target))
	rename := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"nodeName":"some-random-nodename"}}`))
	if err := c.Patch(ctx, worker.DeepCopy(), rename); err == nil || !strings.Contains(err.Error(), medik8s.ErrorNodeNameUpdateForbidden) {
		t.Errorf("renaming the node: %v, want %q", err, medik8s.ErrorNodeNameUpdateForbidden)
	}
	phase("test-maintenance", "Succeeded", 2*time.Minute)
	n := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: target}, n); err != nil {
		t.Fatal(err)
	}
	if !n.Spec.Unschedulable || !nodeview.HasTaint(n, "medik8s.io/drain") {
		t.Errorf("node %s: unschedulable %v, taints %v; want cordoned with medik8s.io/drain:NoSchedule", target, n.Spec.Unschedulable, n.Spec.Taints)
	}
	lease := &coordinationv1.Lease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: medik8s.LeaseNamespace, Name: "node-" + target}, lease); err != nil {
		t.Fatalf("the node's Lease: %v", err)
	}
	now := time.Now()
	if ptr.Deref(lease.Spec.HolderIdentity, "") != medik8s.LeaseHolder || ptr.Deref(lease.Spec.LeaseDurationSeconds, 0) != 3600 ||
		lease.Spec.AcquireTime == nil || lease.Spec.AcquireTime.Before(&metav1.MicroTime{Time: start}) || lease.Spec.RenewTime.After(now) {
		t.Errorf("Lease %+v, want node-maintenance's for an hour, acquired since the maintenance began", lease.Spec)
	}
	awaitMovedFrom(target)

	// Ending it.
	if err := c.Delete(ctx, worker); err != nil {
		t.Fatal(err)
	}
	awaitReset(target)
	if err := cluster.AwaitWorkloads(ctx, ns); err != nil {
		t.Fatal(err)
	}

	// Node Health Check holds the other worker's Lease: the maintenance
	// waits, and runs once the Lease is released.
	other := "worker-000"
	if target == other {
		other = "worker-001"
	}
	micro := metav1.NewMicroTime(time.Now())
	held := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: medik8s.LeaseNamespace, Name: "node-" + other},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("node-healthcheck"), LeaseDurationSeconds: ptr.To[int32](3600), AcquireTime: &micro, RenewTime: &micro}}
	testutil.Create(t, c, held)
	testutil.Create(t, c, nm("test-held", other))
	time.Sleep(3 * time.Second)
	if err := c.Get(ctx, client.ObjectKey{Name: other}, n); err != nil {
		t.Fatal(err)
	}
	if n.Spec.Unschedulable {
		t.Fatalf("node %s cordoned while Node Health Check held its Lease", other)
	}
	phase("test-held", "Running", time.Second)
	if err := c.Delete(ctx, held); err != nil {
		t.Fatal(err)
	}
	phase("test-held", "Succeeded", time.Minute)
	if err := c.Delete(ctx, nm("test-held", "")); err != nil {
		t.Fatal(err)
	}

	// The medik8s operator's README example, the kubevirt.io/v1alpha3
	// NodeMaintenance named after its node, as written there but for the
	// node's name: it drains the node the workload runs on, and deleting
	// it restores the node.
	target = podNodeOf(t, c, ns)
	example, err := testutil.DecodeObjects(strings.ReplaceAll(`apiVersion: kubevirt.io/v1alpha3
kind: NodeMaintenance
metadata:
  name: node02
spec:
  reason: "Test node maintenance"
`, "node02", target))
	if err != nil {
		t.Fatal(err)
	}
	readme := example[0]
	readme.SetNamespace("default")
	testutil.Create(t, c, readme)
	testutil.Eventually(t, 2*time.Minute, 200*time.Millisecond, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(readme), readme); err != nil {
			return err
		}
		if got, _, _ := unstructured.NestedString(readme.Object, "status", "phase"); got != "Succeeded" {
			return fmt.Errorf("kubevirt.io NodeMaintenance %s: phase %q, want Succeeded", target, got)
		}
		return nil
	})
	awaitMovedFrom(target)
	if err := c.Delete(ctx, readme); err != nil {
		t.Fatal(err)
	}
	awaitReset(target)
}

// podNodeOf is the node of the namespace's one Running pod.
func podNodeOf(t *testing.T, c client.Client, ns string) string {
	t.Helper()
	var node string
	testutil.Eventually(t, time.Minute, 200*time.Millisecond, func() error {
		pods := &corev1.PodList{}
		if err := c.List(t.Context(), pods, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && p.Spec.NodeName != "" {
				node = p.Spec.NodeName
				return nil
			}
		}
		return fmt.Errorf("no Running pod in %s", ns)
	})
	return node
}
