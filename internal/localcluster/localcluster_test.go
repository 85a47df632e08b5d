package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// startForTest starts a cluster that is stopped when the test ends; the
// cluster's logs are kept when the test fails.
func startForTest(t *testing.T, opts Options) *Cluster {
	t.Helper()
	c, err := Start(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			c.opts.KeepDir = true
			t.Logf("cluster directory kept: %s", c.Dir)
		}
		if err := c.Stop(); err != nil {
			t.Errorf("stopping cluster: %v", err)
		}
	})
	return c
}

// TestEvictedReplicasComeBackElsewhere drains one node of a 5-node cluster
// through the Eviction API, as a drain does, and checks what only a real
// control plane does: the PodDisruptionBudget refuses evictions beyond its
// budget (429), the ReplicaSet recreates evicted pods, the scheduler puts
// them on other nodes and kwok runs them. After Stop nothing is left.
func TestEvictedReplicasComeBackElsewhere(t *testing.T) {
	opts := DefaultOptions()
	opts.ControlPlaneNodes = 0
	opts.Workers = 5
	c := startForTest(t, opts)
	ctx := t.Context()

	err := c.Apply(ctx, Workloads{
		Namespace:   &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}},
		Deployments: []*appsv1.Deployment{Deployment("shop", "web", 10)},
		PDBs:        []*policyv1.PodDisruptionBudget{PDB("shop", "web", &intstr.IntOrString{Type: intstr.Int, IntVal: 1}, nil)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AwaitWorkloads(ctx, "shop"); err != nil {
		t.Fatal(err)
	}
	awaitDisruptionsAllowed(t, c, "shop", "web", 1)

	node, victims := busiestNode(t, c, "shop")
	t.Logf("draining %s with %d pods of web", node, len(victims))
	cordon(t, c, node)

	// While the budget allows no disruption, the API server refuses the
	// eviction with 429 and the pod stays.
	setMaxUnavailable(t, c, "shop", "web", 0)
	awaitDisruptionsAllowed(t, c, "shop", "web", 0)
	if err := evict(c, "shop", victims[0]); !apierrors.IsTooManyRequests(err) {
		t.Fatalf("evicting %s with 0 disruptions allowed: got %v, want 429 Too Many Requests", victims[0], err)
	}
	setMaxUnavailable(t, c, "shop", "web", 1)
	awaitDisruptionsAllowed(t, c, "shop", "web", 1)

	// Ask for every eviction at once and retry the refused ones, as kubectl
	// drain does; the budget lets them through one at a time.
	var wg sync.WaitGroup
	for _, pod := range victims {
		wg.Go(func() {
			for ctx.Err() == nil {
				err := evict(c, "shop", pod)
				switch {
				case err == nil, apierrors.IsNotFound(err):
					return
				case apierrors.IsTooManyRequests(err):
					time.Sleep(200 * time.Millisecond)
				default:
					t.Errorf("evicting %s: %v", pod, err)
					return
				}
			}
		})
	}
	wg.Wait()

	awaitCondition(t, 60*time.Second, func() error {
		if err := c.AwaitWorkloads(ctx, "shop"); err != nil {
			return err
		}
		pods, err := c.Clientset.CoreV1().Pods("shop").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(pods.Items) != 10 {
			return fmt.Errorf("%d pods, want 10", len(pods.Items))
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName == node {
				return fmt.Errorf("pod %s is still on drained node %s", p.Name, node)
			}
		}
		return nil
	})

	pids := c.PIDs()
	dir := c.Dir
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	assertGone(t, pids, dir)
}

// TestPodsBecomeReadyAgain marks a running pod not Ready, as the node
// lifecycle controller does when a heartbeat comes late, and expects the
// simulated kubelet to report it Ready again, as a real one does once it
// reaches the API server.
func TestPodsBecomeReadyAgain(t *testing.T) {
	opts := DefaultOptions()
	opts.ControlPlaneNodes = 0
	opts.Workers = 1
	c := startForTest(t, opts)
	ctx := t.Context()
	err := c.Apply(ctx, Workloads{
		Namespace:   &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}},
		Deployments: []*appsv1.Deployment{Deployment("shop", "web", 1)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AwaitWorkloads(ctx, "shop"); err != nil {
		t.Fatal(err)
	}
	pods, err := c.Clientset.CoreV1().Pods("shop").List(ctx, metav1.ListOptions{})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("listing pods: %d, %v", len(pods.Items), err)
	}
	pod := &pods.Items[0]
	for i, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodReady {
			pod.Status.Conditions[i].Status = corev1.ConditionFalse
			pod.Status.Conditions[i].Reason = "NodeNotReady"
		}
	}
	if _, err := c.Clientset.CoreV1().Pods("shop").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	awaitCondition(t, 30*time.Second, func() error {
		p, err := c.Clientset.CoreV1().Pods("shop").Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("pod %s is still not Ready: %+v", p.Name, p.Status.Conditions)
	})
}

// TestTwoClustersSideBySide starts two clusters at once: ports are picked
// free, so neither sees the other.
func TestTwoClustersSideBySide(t *testing.T) {
	opts := DefaultOptions()
	opts.ControlPlaneNodes = 0
	opts.Workers = 1
	var clusters [2]*Cluster
	var errs [2]error
	var wg sync.WaitGroup
	for i := range clusters {
		wg.Go(func() { clusters[i], errs[i] = Start(t.Context(), opts) })
	}
	wg.Wait()
	for i, c := range clusters {
		if c != nil {
			t.Cleanup(func() { _ = c.Stop() })
		}
		if errs[i] != nil {
			t.Fatalf("cluster %d: %v", i, errs[i])
		}
	}
	if clusters[0].Config.Host == clusters[1].Config.Host {
		t.Fatalf("both clusters serve at %s", clusters[0].Config.Host)
	}
	// A namespace made in one does not appear in the other.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "only-in-first"}}
	if _, err := clusters[0].Clientset.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := clusters[1].Clientset.CoreV1().Namespaces().Get(t.Context(), ns.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("namespace from the first cluster seen in the second: err=%v", err)
	}
}

// TestStartFailsClearlyWithoutBinaries names the missing binary and the
// command that builds it.
func TestStartFailsClearlyWithoutBinaries(t *testing.T) {
	opts := DefaultOptions()
	opts.BinDir = t.TempDir()
	_, err := Start(t.Context(), opts)
	if err == nil || !containsAll(err.Error(), "etcd", "make tools") {
		t.Fatalf("got %v, want an error naming etcd and `make tools`", err)
	}
}

// TestStartReportsAComponentThatDies fails fast, with the end of the
// component's log, when a component exits during start, and leaves no
// process behind.
func TestStartReportsAComponentThatDies(t *testing.T) {
	real := DefaultBinDir()
	bin := t.TempDir()
	for _, name := range requiredBinaries {
		if err := os.Symlink(filepath.Join(real, name), filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	broken := "#!/bin/sh\necho 'kwok: cannot reach the simulated kubelets' >&2\nexit 3\n"
	os.Remove(filepath.Join(bin, "kwok"))
	if err := os.WriteFile(filepath.Join(bin, "kwok"), []byte(broken), 0o755); err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	opts.BinDir = bin
	opts.WorkDir = t.TempDir()
	opts.ControlPlaneNodes = 0
	opts.Workers = 1
	started := time.Now()
	_, err := Start(t.Context(), opts)
	if err == nil || !containsAll(err.Error(), "kwok exited early", "cannot reach the simulated kubelets") {
		t.Fatalf("got %v, want an error saying kwok exited, with its log", err)
	}
	if took := time.Since(started); took > 30*time.Second {
		t.Errorf("Start took %s to notice; it should fail as soon as kwok exits", took)
	}
	assertNoProcessUses(t, opts.WorkDir)
}

// TestStopIsIdempotentAndRemovesTheDirectory stops twice and checks that
// every component is gone.
func TestStopIsIdempotentAndRemovesTheDirectory(t *testing.T) {
	opts := DefaultOptions()
	opts.ControlPlaneNodes = 1
	opts.Workers = 0
	c, err := Start(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	pids := c.PIDs()
	if len(pids) != 5 {
		t.Errorf("started %d processes, want 5 (etcd, apiserver, controller manager, scheduler, kwok)", len(pids))
	}
	for range 2 {
		if err := c.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	assertGone(t, pids, c.Dir)
}

func busiestNode(t *testing.T, c *Cluster, namespace string) (string, []string) {
	t.Helper()
	pods, err := c.Clientset.CoreV1().Pods(namespace).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byNode := map[string][]string{}
	best := ""
	for _, p := range pods.Items {
		byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p.Name)
		if len(byNode[p.Spec.NodeName]) > len(byNode[best]) {
			best = p.Spec.NodeName
		}
	}
	return best, byNode[best]
}

func evict(c *Cluster, namespace, pod string) error {
	return c.Clientset.PolicyV1().Evictions(namespace).Evict(context.Background(), &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: pod},
	})
}

func setMaxUnavailable(t *testing.T, c *Cluster, namespace, name string, n int) {
	t.Helper()
	patch := []byte(fmt.Sprintf(`{"spec":{"maxUnavailable":%d}}`, n))
	if _, err := c.Clientset.PolicyV1().PodDisruptionBudgets(namespace).Patch(t.Context(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func cordon(t *testing.T, c *Cluster, node string) {
	t.Helper()
	patch := []byte(`{"spec":{"unschedulable":true}}`)
	if _, err := c.Clientset.CoreV1().Nodes().Patch(t.Context(), node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func awaitDisruptionsAllowed(t *testing.T, c *Cluster, namespace, name string, want int32) {
	t.Helper()
	awaitCondition(t, 30*time.Second, func() error {
		pdb, err := c.Clientset.PolicyV1().PodDisruptionBudgets(namespace).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if pdb.Status.DisruptionsAllowed != want {
			return fmt.Errorf("PodDisruptionBudget %s/%s allows %d disruptions, want %d", namespace, name, pdb.Status.DisruptionsAllowed, want)
		}
		return nil
	})
}

func awaitCondition(t *testing.T, timeout time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %v", timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// assertGone checks that no process of pids is alive and dir is removed.
func assertGone(t *testing.T, pids []int, dir string) {
	t.Helper()
	for _, pid := range pids {
		if pidAlive(pid) {
			t.Errorf("process %d is still running after Stop", pid)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cluster directory %s still exists after Stop (err=%v)", dir, err)
	}
}

// assertNoProcessUses fails if any process on the machine has dir in its
// command line: every component gets paths under the cluster's directory.
func assertNoProcessUses(t *testing.T, dir string) {
	t.Helper()
	if procs := ProcessesUsing(dir); len(procs) > 0 {
		t.Errorf("processes still running with %s in their command line: %v", dir, procs)
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
