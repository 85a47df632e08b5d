//go:build linux

package fault

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/localcluster"
)

// watcher records every change of the nodes and PodDisruptionBudgets, in
// the API server's order, resuming after an outage from the last version
// it saw, and keeps the first violation of an invariant:
//   - no more than budget nodes under maintenance at once (in
//     maintenance, or carrying pitstop's drain taint);
//   - no PodDisruptionBudget with fewer healthy pods than it requires.
type watcher struct {
	mu        sync.Mutex
	under     map[string]bool
	entered   map[string]int
	back      map[string]bool
	state     map[string]string
	most      int
	violated  error
	pdbEvents int
}

func watchInvariants(t *testing.T) *watcher {
	t.Helper()
	w := &watcher{under: map[string]bool{}, entered: map[string]int{}, back: map[string]bool{}, state: map[string]string{}}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	nodes := cluster.Clientset.CoreV1().Nodes()
	list, err := nodes.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		w.node(&list.Items[i])
	}
	go w.follow(ctx, list.ResourceVersion, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		return nodes.Watch(ctx, o)
	})
	pdbs := cluster.Clientset.PolicyV1().PodDisruptionBudgets(localcluster.SampleNamespace)
	pdbList, err := pdbs.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range pdbList.Items {
		w.pdb(&pdbList.Items[i])
	}
	go w.follow(ctx, pdbList.ResourceVersion, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		return pdbs.Watch(ctx, o)
	})
	return w
}

// follow feeds every event from version rv on to the watcher; a watch
// that breaks (the API server or etcd stopped) resumes where it was.
func (w *watcher) follow(ctx context.Context, rv string, watchFunc cache.WatchFuncWithContext) {
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, rv, &cache.ListWatch{WatchFuncWithContext: watchFunc})
	if err != nil {
		w.fail(fmt.Errorf("watching: %w", err))
		return
	}
	defer rw.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-rw.ResultChan():
			if !ok {
				if ctx.Err() == nil {
					w.fail(fmt.Errorf("the watch ended: changes may have been missed"))
				}
				return
			}
			switch o := e.Object.(type) {
			case *corev1.Node:
				w.node(o)
			case *policyv1.PodDisruptionBudget:
				w.pdb(o)
			case *metav1.Status:
				w.fail(fmt.Errorf("watch error: %s", o.Message))
			}
		}
	}
}

func (w *watcher) node(n *corev1.Node) {
	if !strings.HasPrefix(n.Name, "worker-") {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	state := n.Labels["pitstop.dev/state"]
	if state == string(pitstopv1alpha1.StateInMaintenance) && w.state[n.Name] != state {
		w.entered[n.Name]++
	}
	if state == string(pitstopv1alpha1.StateOperational) && w.entered[n.Name] > 0 {
		w.back[n.Name] = true
	}
	w.state[n.Name] = state
	w.under[n.Name] = state == string(pitstopv1alpha1.StateInMaintenance) ||
		slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == pitstopv1alpha1.TaintDrain })
	count := 0
	var names []string
	for name, under := range w.under {
		if under {
			count++
			names = append(names, name)
		}
	}
	w.most = max(w.most, count)
	if count > budget && w.violated == nil {
		slices.Sort(names)
		w.violated = fmt.Errorf("%d nodes under maintenance at once (%s), the budget is %d", count, strings.Join(names, ", "), budget)
	}
}

func (w *watcher) pdb(p *policyv1.PodDisruptionBudget) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pdbEvents++
	if p.Status.ObservedGeneration < p.Generation || p.Status.ExpectedPods == 0 {
		return
	}
	if p.Status.CurrentHealthy < p.Status.DesiredHealthy && w.violated == nil {
		w.violated = fmt.Errorf("PodDisruptionBudget %s/%s had %d healthy pods, fewer than the %d it requires",
			p.Namespace, p.Name, p.Status.CurrentHealthy, p.Status.DesiredHealthy)
	}
}

func (w *watcher) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.violated == nil {
		w.violated = err
	}
}

func (w *watcher) violation() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.violated
}

func (w *watcher) entries(node string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.entered[node]
}

func (w *watcher) through() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.back)
}

func (w *watcher) mostAtOnce() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.most
}
