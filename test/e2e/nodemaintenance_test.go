//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/config"
	"github.com/pitstop-dev/pitstop/internal/install"
	"github.com/pitstop-dev/pitstop/internal/localcluster"
	"github.com/pitstop-dev/pitstop/internal/testutil"
	"github.com/pitstop-dev/pitstop/internal/testutil/clustertest"
)

// TestDrainKeepsEveryBudget drains the busiest node of a 5-node cluster
// running Deployments and a StatefulSet behind PodDisruptionBudgets. While
// it drains, no budget ever has fewer healthy pods than it requires; after,
// every replica runs on another node, the DaemonSet pod stays, and deleting
// the NodeMaintenance makes the node schedulable again.
func TestDrainKeepsEveryBudget(t *testing.T) {
	ctx := t.Context()
	opts := localcluster.DefaultOptions()
	opts.ControlPlaneNodes = 0
	opts.Workers = 5
	cluster, c := testutil.StartLocalCluster(t, opts)

	const ns = "shop"
	applyShop(t, cluster, c, ns)

	startPitstop(t, cluster, c)
	violations := watchBudgets(t, cluster.Clientset, ns)

	target := busiestNode(t, c, ns)
	t.Logf("draining %s", target)
	nm := &pitstopv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: "drain-" + target},
		Spec:       pitstopv1alpha1.NodeMaintenanceSpec{NodeName: target, Reason: "e2e"},
	}
	if err := c.Create(ctx, nm); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 2*time.Minute, 100*time.Millisecond, func() error {
		got := &pitstopv1alpha1.NodeMaintenance{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(nm), got); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(got.Status.Conditions, pitstopv1alpha1.ConditionDrained) {
			cond := meta.FindStatusCondition(got.Status.Conditions, pitstopv1alpha1.ConditionDrained)
			return fmt.Errorf("not drained yet: %+v", cond)
		}
		return nil
	})
	if err := cluster.AwaitWorkloads(ctx, ns); err != nil {
		t.Fatalf("workloads not back to full strength after the drain: %v", err)
	}
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	daemonOnTarget := false
	for _, p := range pods.Items {
		if p.Spec.NodeName != target {
			continue
		}
		if owner := metav1.GetControllerOf(&p); owner != nil && owner.Kind == "DaemonSet" {
			daemonOnTarget = true
			continue
		}
		t.Errorf("pod %s still on drained node %s", p.Name, target)
	}
	if !daemonOnTarget {
		t.Error("the DaemonSet pod was evicted from the drained node")
	}
	violations.check(t)

	if err := c.Delete(ctx, nm); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		n := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: target}, n); err != nil {
			return err
		}
		if n.Spec.Unschedulable {
			return fmt.Errorf("node %s still cordoned", target)
		}
		return nil
	})
}

// startPitstop installs the CRDs and runs pitstop's manager, with its
// webhook, in this process until the test ends.
func startPitstop(t *testing.T, cluster *localcluster.Cluster, c client.Client) {
	t.Helper()
	crds, err := config.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	if err := install.CRDs(t.Context(), c, crds); err != nil {
		t.Fatal(err)
	}
	// As its ServiceAccount: the chart's roles must grant what a drain does.
	clustertest.StartManager(t, cluster.Config, c, clustertest.Options{Webhook: true, AsServiceAccount: true})
}

// awaitBudgetsAllow waits until the disruption controller has computed
// every budget, so the drain starts from a settled state.
func awaitBudgetsAllow(t *testing.T, c client.Client, ns string) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		list := &policyv1.PodDisruptionBudgetList{}
		if err := c.List(t.Context(), list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, p := range list.Items {
			if p.Status.ObservedGeneration < p.Generation || p.Status.DisruptionsAllowed < 1 {
				return fmt.Errorf("PodDisruptionBudget %s allows %d disruptions", p.Name, p.Status.DisruptionsAllowed)
			}
		}
		return nil
	})
}

// budgetWatch records every moment a budget had fewer healthy pods than it
// requires.
type budgetWatch struct {
	mu         sync.Mutex
	violations []string
	seen       int
}

func (w *budgetWatch) check(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seen == 0 {
		t.Error("the budget watch saw no update: it cannot have checked anything")
	}
	for _, v := range w.violations {
		t.Error(v)
	}
}

func watchBudgets(t *testing.T, cs kubernetes.Interface, ns string) *budgetWatch {
	t.Helper()
	w := &budgetWatch{}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	watcher, err := cs.PolicyV1().PodDisruptionBudgets(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for ev := range watcher.ResultChan() {
			p, ok := ev.Object.(*policyv1.PodDisruptionBudget)
			if !ok {
				continue
			}
			w.mu.Lock()
			w.seen++
			if p.Status.ObservedGeneration >= p.Generation && p.Status.CurrentHealthy < p.Status.DesiredHealthy {
				w.violations = append(w.violations, fmt.Sprintf("PodDisruptionBudget %s/%s had %d healthy pods, fewer than the %d it requires",
					p.Namespace, p.Name, p.Status.CurrentHealthy, p.Status.DesiredHealthy))
			}
			w.mu.Unlock()
		}
	}()
	return w
}

// busiestNode is the worker running the most pods of the namespace.
func busiestNode(t *testing.T, c client.Client, ns string) string {
	t.Helper()
	pods := &corev1.PodList{}
	if err := c.List(t.Context(), pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	best := ""
	for _, p := range pods.Items {
		count[p.Spec.NodeName]++
		if count[p.Spec.NodeName] > count[best] {
			best = p.Spec.NodeName
		}
	}
	return best
}
