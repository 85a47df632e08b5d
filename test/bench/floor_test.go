//go:build linux

package bench

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// countedClientset is a clientset over cfg (the local cluster's: no
// client-side rate limit) whose requests are counted, as the library
// drainer's are.
func countedClientset(cfg *rest.Config) (kubernetes.Interface, *requestCounter, error) {
	counter := newRequestCounter()
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(counter.wrap)
	cs, err := kubernetes.NewForConfig(cfg)
	return cs, counter, err
}

// drainWithFloor drains node with floorDrain, the least a drainer can do,
// and times it from just before its cordon to the moment its own watch
// delivers the deletion of the last pod it listed.
//
// That end is the end the other drainers are timed to: the moment the
// drainer knows the node is empty. The library learns it when its poll (a
// GET of each pod, once a second) finds every pod gone and RunNodeDrain
// returns; pitstop when its cache has seen the last pod gone, and the
// benchmark when the Drained condition pitstop then writes reaches its
// watch. The floor learns it first, from a watch of its own, so its "done"
// phase is its "last pod gone" (the benchmark's watch and the floor's see
// the same event), and what the other drainers take after the last pod is
// gone is what they add to it. Its start, like theirs, is just before its
// first request.
func (e *pitstopEnv) drainWithFloor(ctx context.Context, cs kubernetes.Interface, counter *requestCounter, node *corev1.Node, pods *corev1.PodList) (drainRun, error) {
	return e.timedDrain(ctx, "floor", counter, node, pods, func(ctx context.Context) (time.Time, error) {
		return floorDrain(ctx, cs, node.Name)
	})
}

// timedDrain runs a drainer against node, which holds pods: the drain's
// steps are watched, its requests counted by counter from just before run
// starts, and it is timed from then to the end run returns.
func (e *pitstopEnv) timedDrain(ctx context.Context, drainer string, counter *requestCounter, node *corev1.Node, pods *corev1.PodList, run func(context.Context) (time.Time, error)) (drainRun, error) {
	ctx, cancel := context.WithTimeout(ctx, drainTimeout)
	defer cancel()
	tracker, err := e.trackDrain(ctx, node, pods)
	if err != nil {
		return drainRun{}, err
	}
	before := counter.snapshot()
	start := time.Now()
	end, err := run(ctx)
	if err != nil {
		return drainRun{}, err
	}
	requests := counter.snapshot().since(before)
	ph, err := tracker.wait(ctx, start, end)
	if err != nil {
		return drainRun{}, err
	}
	return drainRun{drainer: drainer, node: node.Name, took: end.Sub(start), phases: ph, requests: requests}, nil
}

// floorDrain is the minimal drainer, the control plane's own floor for a
// drain: one PATCH of spec.unschedulable, one list of the node's pods, every
// eviction sent at once (a goroutine a pod, no client-side rate limit), and
// a watch of the node's pods until every pod listed is gone. It checks
// nothing a real drainer must (DaemonSet and mirror pods, budgets that
// refuse, retries): the benchmark's node holds only its Deployment's pods,
// which no PodDisruptionBudget covers. It returns when its watch delivered
// the last listed pod's deletion.
func floorDrain(ctx context.Context, cs kubernetes.Interface, node string) (time.Time, error) {
	cordon := []byte(`{"spec":{"unschedulable":true}}`)
	if _, err := cs.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, cordon, metav1.PatchOptions{}); err != nil {
		return time.Time{}, fmt.Errorf("cordoning %s: %w", node, err)
	}
	// A consistent list, as a drainer that must not miss a pod makes it:
	// the API server serves it from its watch cache once that has caught up
	// with etcd, and with no pod changing meanwhile that waits for the next
	// progress notification it requests (every 100 ms), 60 to 100 ms here.
	// pitstop, which evicts from its informer's cache, does not pay it.
	onNode := "spec.nodeName=" + node
	pods, err := cs.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: onNode})
	if err != nil {
		return time.Time{}, fmt.Errorf("listing the pods of %s: %w", node, err)
	}
	left := map[types.UID]bool{}
	for _, pod := range pods.Items {
		left[pod.UID] = true
	}
	if len(left) == 0 {
		return time.Now(), nil
	}

	// The watch starts at the list's version, so it misses no deletion
	// after the list, whenever it opens. It opens before the evictions go
	// out so that its request does not queue behind them. Pods are known by
	// UID: a pod of the same name made again on the node is not one listed.
	// An eviction that fails ends the watch through the group's context:
	// its pod would never go.
	evictions, evictCtx := errgroup.WithContext(ctx)
	podWatch, err := observe(evictCtx, pods.ResourceVersion, func(ctx context.Context, rv string) (watch.Interface, error) {
		return cs.CoreV1().Pods(metav1.NamespaceAll).Watch(ctx, metav1.ListOptions{FieldSelector: onNode, ResourceVersion: rv, AllowWatchBookmarks: true})
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("watching the pods of %s: %w", node, err)
	}
	defer podWatch.stop()
	for _, pod := range pods.Items {
		evictions.Go(func() error {
			eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}
			if err := cs.CoreV1().Pods(pod.Namespace).EvictV1(evictCtx, eviction); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("evicting pod %s: %w", klog.KObj(&pod), err)
			}
			return nil
		})
	}
	end, err := podWatch.until(func(ev watch.Event) bool {
		if pod, ok := ev.Object.(*corev1.Pod); ok && ev.Type == watch.Deleted {
			delete(left, pod.UID)
		}
		return len(left) == 0
	})
	if evictErr := evictions.Wait(); evictErr != nil {
		return time.Time{}, evictErr
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("watching the pods of %s, %d left: %w", node, len(left), err)
	}
	return end, nil
}
