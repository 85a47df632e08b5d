//go:build linux

package bench

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pitstop-dev/pitstop/internal/kwoknode"
	"github.com/pitstop-dev/pitstop/internal/localcluster"
	"github.com/pitstop-dev/pitstop/internal/scheme"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

var (
	memoryNodes = flag.Int("memory-nodes", 1000, "nodes BenchmarkManagerMemory creates")
	memoryPods  = flag.Int("memory-pods-per-node", 30, "pods per node BenchmarkManagerMemory creates")
)

// BenchmarkManagerMemory measures the manager's memory with a large fleet
// in its cache, without the minutes a simulated fleet takes to start: an
// API server and etcd (envtest) get N nodes and N × pods-per-node pods
// bound to them (Running, owned by a ReplicaSet, as a scheduler and kubelet
// would leave them), then the pitstop binary starts against it. It reports
// the manager's peak resident memory (VmHWM) once its caches are synced, and
// its resident memory a few seconds later, after a garbage collection had
// time to run. With -fleet-heap-profile it saves the heap profile too.
func BenchmarkManagerMemory(b *testing.B) {
	binary, err := filepath.Abs(*pitstopBinary)
	if err != nil {
		b.Fatal(err)
	}
	env, err := testutil.StartEnv()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = env.Stop() })
	start := time.Now()
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 2000, 4000
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		b.Fatal(err)
	}
	if err := fillFleet(context.Background(), c, *memoryNodes, *memoryPods); err != nil {
		b.Fatal(err)
	}
	b.Logf("%d nodes and %d pods created in %.0fs", *memoryNodes, *memoryNodes**memoryPods, time.Since(start).Seconds())
	kubeconfig := filepath.Join(b.TempDir(), "kubeconfig")
	if err := env.WriteKubeconfig(kubeconfig); err != nil {
		b.Fatal(err)
	}
	for range b.N {
		m := startManagerProcess(b, binary, kubeconfig)
		synced, err := m.peakRSS()
		if err != nil {
			b.Fatal(err)
		}
		time.Sleep(10 * time.Second) // steady state: the sync's garbage collected
		settled, err := m.rss()
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("nodes=%d pods=%d: manager peak RSS at cache sync %.0f MB, RSS 10 s later %.0f MB",
			*memoryNodes, *memoryNodes**memoryPods, float64(synced)/(1<<20), float64(settled)/(1<<20))
		b.ReportMetric(float64(synced)/(1<<20), "peak-RSS-MB")
		b.ReportMetric(float64(settled)/(1<<20), "settled-RSS-MB")
	}
}

// fillFleet creates the nodes and their pods, many at a time.
func fillFleet(ctx context.Context, c client.Client, nodes, podsPerNode int) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fleetNamespace}}
	if err := c.Create(ctx, ns); err != nil {
		return err
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: managerNS}}); err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for i := range nodes {
		node := kwoknode.New(fmt.Sprintf("worker-%04d", i), i, "", podsPerNode, map[string]string{localcluster.LabelWorker: ""})
		g.Go(func() error { return c.Create(gctx, node) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	g, gctx = errgroup.WithContext(ctx)
	g.SetLimit(32)
	for i := range nodes {
		for j := range podsPerNode {
			pod := replicaSetPod(fmt.Sprintf("app-%02d", j), i)
			g.Go(func() error {
				status := pod.Status
				if err := c.Create(gctx, pod, client.FieldOwner("kube-controller-manager")); err != nil {
					return err
				}
				pod.Status = status
				return c.Status().Update(gctx, pod, client.FieldOwner("kwok"))
			})
		}
	}
	return g.Wait()
}

// replicaSetPod is a pod as the fleet benchmark's Deployments leave them on
// a simulated node: the pod template the ReplicaSet controller stamps out
// (with the API server's defaults, the not-ready and unreachable
// tolerations), bound to the node, and the status kwok writes, each written
// under its own field manager so that the managed fields are as large as a
// real cluster's.
func replicaSetPod(app string, node int) *corev1.Pod {
	const hash = "5d8f7c9b6"
	now := metav1.Now()
	rs := app + "-" + hash
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: fleetNamespace,
			Name:      fmt.Sprintf("%s-%05d", rs, node),
			Labels:    map[string]string{"app": app, "pod-template-hash": hash},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs, UID: types.UID("3f1c2a4e-0b6d-4c8e-9a57-" + hash + "abc"),
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: *localcluster.Deployment(fleetNamespace, app, 1).Spec.Template.Spec.DeepCopy(),
		Status: corev1.PodStatus{
			Phase:     corev1.PodRunning,
			HostIP:    fmt.Sprintf("10.64.%d.%d", node/250, node%250+2),
			HostIPs:   []corev1.HostIP{{IP: fmt.Sprintf("10.64.%d.%d", node/250, node%250+2)}},
			PodIP:     fmt.Sprintf("10.128.%d.%d", node/250, node%250+2),
			PodIPs:    []corev1.PodIP{{IP: fmt.Sprintf("10.128.%d.%d", node/250, node%250+2)}},
			QOSClass:  corev1.PodQOSBurstable,
			StartTime: &now,
			ContainerStatuses: []corev1.ContainerStatus{{
				Name: app, Image: "registry.k8s.io/pause:3.10", Ready: true,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
			}},
		},
	}
	pod.Spec.NodeName = fmt.Sprintf("worker-%04d", node)
	pod.Spec.Tolerations = []corev1.Toleration{
		{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
		{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
	}
	for _, t := range []corev1.PodConditionType{corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled} {
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	return pod
}
