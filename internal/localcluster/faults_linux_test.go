package localcluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestComponentsStopAndStartAgain stops, kills and restarts each component
// of a one-node cluster and checks what a fault test relies on: while the
// API server or etcd is down requests fail, and once it is back they
// succeed on the same data; pods created while the scheduler and kwok were
// down, and after they came back, are scheduled and run; a component that
// dies on its own is still reported, and started again when the cluster
// supervises its components; Stop leaves no process, restarted ones
// included.
func TestComponentsStopAndStartAgain(t *testing.T) {
	opts := DefaultOptions()
	opts.ControlPlaneNodes = 0
	opts.Workers = 1
	c := startForTest(t, opts)
	ctx := t.Context()
	pids := c.PIDs()

	if err := c.StartComponent(ctx, "kube-apiserver"); err == nil || !strings.Contains(err.Error(), "still running") {
		t.Fatalf("starting the running API server: got %v, want an error saying it still runs", err)
	}
	if err := c.StopComponent("kubelet"); err == nil || !strings.Contains(err.Error(), "unknown component") {
		t.Fatalf("stopping a component the cluster does not have: got %v, want an error", err)
	}

	// The API server stopped: requests fail. Started again, it serves the
	// same nodes.
	timed(t, "stopping kube-apiserver", func() error { return c.StopComponent("kube-apiserver") })
	if err := c.StopComponent("kube-apiserver"); err != nil {
		t.Fatalf("stopping the stopped API server again: %v", err)
	}
	if err := c.checkProcesses(); err != nil {
		t.Fatalf("a component stopped on purpose is reported as failed: %v", err)
	}
	if _, err := listNodes(ctx, c); err == nil {
		t.Fatal("listing nodes with the API server stopped succeeded")
	}
	timed(t, "starting kube-apiserver", func() error { return c.StartComponent(ctx, "kube-apiserver") })
	if nodes, err := listNodes(ctx, c); err != nil || !slices.Equal(nodes, c.NodeNames()) {
		t.Fatalf("after the API server restarted: nodes %v, %v; want %v", nodes, err, c.NodeNames())
	}

	// etcd killed: the API server stops being ready. Started again on the
	// same data directory, writes succeed.
	timed(t, "killing etcd", func() error { return c.KillComponent("etcd") })
	awaitCondition(t, 60*time.Second, func() error {
		if ready(ctx, c) {
			return fmt.Errorf("the API server is still ready with etcd killed")
		}
		return nil
	})
	timed(t, "starting etcd", func() error { return c.StartComponent(ctx, "etcd") })
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "after-etcd"}}
	if _, err := c.Clientset.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("writing after etcd restarted: %v", err)
	}

	// The controller manager, scheduler and kwok stopped: a pod created now
	// is not scheduled. Started again, it runs, and so does a pod created
	// afterwards.
	for _, name := range []string{"kube-controller-manager", "kube-scheduler", "kwok"} {
		timed(t, "stopping "+name, func() error { return c.StopComponent(name) })
	}
	createPod(t, c, ns.Name, "while-down")
	time.Sleep(2 * time.Second)
	if pod, err := c.Clientset.CoreV1().Pods(ns.Name).Get(ctx, "while-down", metav1.GetOptions{}); err != nil || pod.Spec.NodeName != "" {
		t.Fatalf("pod created with the scheduler stopped: node %q, %v; want it unscheduled", pod.Spec.NodeName, err)
	}
	for _, name := range []string{"kube-controller-manager", "kube-scheduler", "kwok"} {
		timed(t, "starting "+name, func() error { return c.StartComponent(ctx, name) })
	}
	createPod(t, c, ns.Name, "after-restart")
	awaitPodsRunning(t, c, ns.Name, "while-down", "after-restart")

	// kwok killed by someone else is a failure the cluster reports; it can be
	// started again like a stopped component.
	kwok := c.pidOf(t, "kwok")
	if err := syscall.Kill(kwok, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	awaitCondition(t, 10*time.Second, func() error {
		if err := c.checkProcesses(); err == nil || !strings.Contains(err.Error(), "kwok exited early") {
			return fmt.Errorf("kwok killed from outside: checkProcesses says %v, want kwok exited early", err)
		}
		return nil
	})
	if err := c.StopComponent("kwok"); err == nil {
		t.Error("stopping kwok after it died on its own: got no error, want its failure")
	}
	timed(t, "starting kwok", func() error { return c.StartComponent(ctx, "kwok") })
	if err := c.checkProcesses(); err != nil {
		t.Fatalf("after restarting every component: %v", err)
	}

	// With RestartExited, a component that dies on its own is started
	// again; one stopped on purpose stays stopped.
	c.superviseComponents()
	scheduler := c.pidOf(t, "kube-scheduler")
	if err := syscall.Kill(scheduler, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	timed(t, "stopping the controller manager under supervision", func() error { return c.StopComponent("kube-controller-manager") })
	awaitCondition(t, 15*time.Second, func() error {
		if n := c.Restarts()["kube-scheduler"]; n != 1 || c.pidOf(t, "kube-scheduler") == scheduler {
			return fmt.Errorf("kube-scheduler killed from outside: restarted %d times, want 1 with a new pid", n)
		}
		return nil
	})
	time.Sleep(2 * time.Second)
	if n := c.Restarts()["kube-controller-manager"]; n != 0 {
		t.Fatalf("the controller manager, stopped on purpose, was started again %d times", n)
	}
	timed(t, "starting the controller manager under supervision", func() error { return c.StartComponent(ctx, "kube-controller-manager") })
	createPod(t, c, ns.Name, "after-crash")
	awaitPodsRunning(t, c, ns.Name, "after-crash")

	// Restarted components keep their own process group, which Stop kills.
	restarted := c.PIDs()
	for i, pid := range restarted {
		if pid == pids[i] {
			t.Errorf("%s has its first pid %d, want a new process", Components[i], pid)
		}
		if pgid, err := syscall.Getpgid(pid); err != nil || pgid != pid {
			t.Errorf("%s (pid %d) is in process group %d (%v), want its own", Components[i], pid, pgid, err)
		}
	}
	dir := c.Dir
	timed(t, "stopping the cluster", c.Stop)
	assertGone(t, append(pids, restarted...), dir)
	assertNoProcessUses(t, dir)
	if err := c.StartComponent(ctx, "kwok"); err == nil {
		t.Error("starting kwok after Stop succeeded")
	}
}

// timed runs step, fails the test if it fails, and logs how long it took.
func timed(t *testing.T, what string, step func() error) {
	t.Helper()
	started := time.Now()
	if err := step(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	t.Logf("%s took %s", what, time.Since(started).Round(time.Millisecond))
}

func listNodes(ctx context.Context, c *Cluster) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	nodes, err := c.Clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, n := range nodes.Items {
		names = append(names, n.Name)
	}
	return names, nil
}

// ready reports whether the API server's /readyz answers ok.
func ready(ctx context.Context, c *Cluster) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	body, err := c.Clientset.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	return err == nil && string(body) == "ok"
}

func createPod(t *testing.T, c *Cluster, namespace, name string) {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Spec: podTemplate(name).Spec}
	if _, err := c.Clientset.CoreV1().Pods(namespace).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func awaitPodsRunning(t *testing.T, c *Cluster, namespace string, names ...string) {
	t.Helper()
	awaitCondition(t, 60*time.Second, func() error {
		for _, name := range names {
			pod, err := c.Clientset.CoreV1().Pods(namespace).Get(t.Context(), name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if pod.Spec.NodeName == "" || pod.Status.Phase != corev1.PodRunning {
				return fmt.Errorf("pod %s is %s on node %q, want Running on a node", name, pod.Status.Phase, pod.Spec.NodeName)
			}
		}
		return nil
	})
}

// pidOf returns the pid of the named component's current process.
func (c *Cluster) pidOf(t *testing.T, name string) int {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	_, p, err := c.component(name)
	if err != nil {
		t.Fatal(err)
	}
	return p.cmd.Process.Pid
}

// TestTheAuditLogRecordsPodRemovals evicts one pod, deletes another and
// evicts one that does not exist: PodRemovals returns the three requests,
// made by the cluster's own client, with their answers, and none made
// before its since.
func TestTheAuditLogRecordsPodRemovals(t *testing.T) {
	opts := DefaultOptions()
	opts.ControlPlaneNodes = 0
	opts.Workers = 1
	opts.AuditPodRemovals = true
	c := startForTest(t, opts)
	ctx := t.Context()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "audited"}}
	if _, err := c.Clientset.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createPod(t, c, ns.Name, "early")
	awaitPodsRunning(t, c, ns.Name, "early")
	if err := c.Clientset.CoreV1().Pods(ns.Name).Delete(ctx, "early", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	since := time.Now()
	createPod(t, c, ns.Name, "evicted")
	createPod(t, c, ns.Name, "deleted")
	awaitPodsRunning(t, c, ns.Name, "evicted", "deleted")
	pods := c.Clientset.CoreV1().Pods(ns.Name)
	evict := func(name string) error {
		return pods.EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: name}})
	}
	if err := evict("evicted"); err != nil {
		t.Fatal(err)
	}
	if err := pods.Delete(ctx, "deleted", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := evict("missing"); !apierrors.IsNotFound(err) {
		t.Fatalf("evicting a missing pod: %v, want NotFound", err)
	}
	got, err := c.PodRemovals(since)
	if err != nil {
		t.Fatal(err)
	}
	var mine []string
	for _, r := range got {
		// kwok, as a kubelet does, deletes each pod for good once its
		// containers are stopped.
		if r.Namespace != ns.Name || r.UserAgent != "pitstop-localcluster" {
			continue
		}
		mine = append(mine, fmt.Sprintf("%s %v %d", r.Pod, r.Eviction, r.Code))
	}
	want := []string{"evicted true 201", "deleted false 200", "missing true 404"}
	if !slices.Equal(mine, want) {
		t.Fatalf("pod removals since the first delete: %q, want %q", mine, want)
	}
}
