//go:build fault && linux

package fault

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/localcluster"
)

// watcher records every change of the nodes and PodDisruptionBudgets, in
// the API server's order, resuming after an outage from the last version
// it saw, and keeps the first violation of an invariant:
//   - no more nodes under maintenance at once (in maintenance, or carrying
//     pitstop's drain taint) than each of the test's bounds allows, per
//     group (zone) where the bound has one (invariant 1);
//   - no pod removed (evicted or deleted) while its app has fewer healthy
//     pods than its PodDisruptionBudget requires (invariant 2). A pod that
//     goes not ready and stays is recorded but not counted: no drain does
//     that;
//   - no node that an administrator cordoned seen schedulable again
//     (invariant 3);
//   - no control-plane node carrying pitstop's drain taint while fewer
//     control-plane nodes than quorum are Ready and untainted (invariant 4).
type watcher struct {
	mu sync.Mutex
	// bounds are the budgets the test's profiles set; maintained are the
	// nodes the test maintains.
	bounds     []bound
	maintained map[string]bool
	nodes      map[string]*corev1.Node
	// cordoned are the nodes an administrator cordoned, each true once the
	// watcher has seen it unschedulable (events before the cordon come
	// first, in the API server's order).
	cordoned map[string]bool
	// evictedFrom counts, per node carrying pitstop's drain taint, the pods
	// removed from it since it was tainted; podNode is the node of each
	// live pod that a drain evicts (not a DaemonSet's).
	evictedFrom map[string]int
	podNode     map[types.UID]string
	// quorumChecks counts the node changes judged against invariant 4
	// with a control-plane node under maintenance; boundChecks those
	// judged against a bound with a node under maintenance.
	quorumChecks, boundChecks int
	removals                  int
	under                     map[string]bool
	entered                   map[string]int
	back                      map[string]bool
	state                     map[string]string
	most                      int
	violated                  error
	pdbEvents                 int
	// gaps counts the times a watch had to list again after an outage.
	gaps int
	// healthy are the sample workloads' pods that are ready and not
	// terminating, by UID (a StatefulSet's pod comes back under its name),
	// with their app; desired is how many healthy pods each app's
	// PodDisruptionBudget requires; unready lists the healthy pods that went
	// not ready without being removed.
	healthy map[types.UID]string
	unready []string
	desired map[string]int32
	// timeline lists every state change seen, with when.
	timeline []string
}

// bound is one budget the watcher holds the nodes to: at most max of
// the nodes it selects under maintenance at once, per value of groupBy
// (a node label) when set.
type bound struct {
	name    string
	selects func(*corev1.Node) bool
	groupBy string
	max     int
}

// String names the bound in a violation.
func (b bound) String() string {
	if b.groupBy == "" {
		return fmt.Sprintf("%s (at most %d)", b.name, b.max)
	}
	return fmt.Sprintf("%s (at most %d per %s)", b.name, b.max, b.groupBy)
}

func watchInvariants(t *testing.T, maintained []string, bounds []bound) *watcher {
	t.Helper()
	w := &watcher{under: map[string]bool{}, entered: map[string]int{}, back: map[string]bool{}, state: map[string]string{},
		healthy: map[types.UID]string{}, desired: map[string]int32{}, bounds: bounds, maintained: map[string]bool{},
		nodes: map[string]*corev1.Node{}, cordoned: map[string]bool{}, evictedFrom: map[string]int{}, podNode: map[types.UID]string{}}
	for _, n := range maintained {
		w.maintained[n] = true
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	nodes := cluster.Clientset.CoreV1().Nodes()
	pdbs := cluster.Clientset.PolicyV1().PodDisruptionBudgets(localcluster.SampleNamespace)
	nodeRV, err := w.listNodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pdbRV, err := w.listPDBs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	go w.follow(ctx, nodeRV, w.listNodes, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		return nodes.Watch(ctx, o)
	})
	go w.follow(ctx, pdbRV, w.listPDBs, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		return pdbs.Watch(ctx, o)
	})
	pods := cluster.Clientset.CoreV1().Pods(localcluster.SampleNamespace)
	podRV, err := w.listPods(ctx)
	if err != nil {
		t.Fatal(err)
	}
	go w.follow(ctx, podRV, w.listPods, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		return pods.Watch(ctx, o)
	})
	return w
}

func (w *watcher) listPods(ctx context.Context) (string, error) {
	list, err := cluster.Clientset.CoreV1().Pods(localcluster.SampleNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	// Pods removed while the watch was broken are not in the list.
	w.mu.Lock()
	w.healthy = map[types.UID]string{}
	w.podNode = map[types.UID]string{}
	w.mu.Unlock()
	for i := range list.Items {
		w.pod(&list.Items[i], false)
	}
	return list.ResourceVersion, nil
}

// listNodes feeds every node to the watcher and returns the list's
// version.
func (w *watcher) listNodes(ctx context.Context) (string, error) {
	list, err := cluster.Clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	for i := range list.Items {
		w.node(&list.Items[i])
	}
	return list.ResourceVersion, nil
}

func (w *watcher) listPDBs(ctx context.Context) (string, error) {
	list, err := cluster.Clientset.PolicyV1().PodDisruptionBudgets(localcluster.SampleNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	for i := range list.Items {
		w.pdb(&list.Items[i])
	}
	return list.ResourceVersion, nil
}

// follow feeds every event from version rv on to the watcher; a watch
// that breaks (the API server or etcd stopped) resumes where it was. When
// the restarted API server no longer has that version (410 Gone), it
// lists again and goes on from there: the changes in between are seen
// only as their sum (gaps counts these).
func (w *watcher) follow(ctx context.Context, rv string, relist func(context.Context) (string, error), watchFunc cache.WatchFuncWithContext) {
	for ctx.Err() == nil {
		rw, err := watchtools.NewRetryWatcherWithContext(ctx, rv, &cache.ListWatch{WatchFuncWithContext: watchFunc})
		if err != nil {
			w.fail(fmt.Errorf("watching: %w", err))
			return
		}
		rv = w.drain(ctx, rw)
		rw.Stop()
		if rv != "" || ctx.Err() != nil {
			continue
		}
		w.mu.Lock()
		w.gaps++
		w.mu.Unlock()
		for ctx.Err() == nil {
			if rv, err = relist(ctx); err == nil {
				break
			}
			time.Sleep(time.Second)
		}
	}
}

// drain feeds the events of one watch to the watcher until it ends: with
// the last version seen, or "" when the version is gone.
func (w *watcher) drain(ctx context.Context, rw *watchtools.RetryWatcher) string {
	last := ""
	for {
		select {
		case <-ctx.Done():
			return last
		case e, ok := <-rw.ResultChan():
			if !ok {
				return last
			}
			switch o := e.Object.(type) {
			case *corev1.Node:
				last = o.ResourceVersion
				w.node(o)
			case *policyv1.PodDisruptionBudget:
				last = o.ResourceVersion
				w.pdb(o)
			case *corev1.Pod:
				last = o.ResourceVersion
				w.pod(o, e.Type == watch.Deleted)
			case *metav1.Status:
				if o.Code == http.StatusGone {
					return ""
				}
				w.fail(fmt.Errorf("watch error: %s", o.Message))
			}
		}
	}
}

func (w *watcher) node(n *corev1.Node) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.nodes[n.Name] = n
	tainted := slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == pitstopv1alpha1.TaintDrain })
	if !tainted {
		delete(w.evictedFrom, n.Name)
	} else if _, ok := w.evictedFrom[n.Name]; !ok {
		w.evictedFrom[n.Name] = 0
	}
	if seen, ok := w.cordoned[n.Name]; ok {
		switch {
		case n.Spec.Unschedulable:
			w.cordoned[n.Name] = true
		case seen && w.violated == nil:
			w.violated = fmt.Errorf("node %s, which an administrator cordoned, is schedulable again at %s (invariant 3)", n.Name, time.Now().Format("15:04:05.000"))
		}
	}
	w.checkQuorum()
	if !w.maintained[n.Name] {
		return
	}
	state := n.Labels["pitstop.dev/state"]
	if state == string(pitstopv1alpha1.StateInMaintenance) && w.state[n.Name] != state {
		w.entered[n.Name]++
	}
	if state != w.state[n.Name] {
		w.timeline = append(w.timeline, fmt.Sprintf("%s %s→%s", time.Now().Format("15:04:05.0"), n.Name, state))
	}
	if state == string(pitstopv1alpha1.StateOperational) && w.entered[n.Name] > 0 {
		w.back[n.Name] = true
	}
	w.state[n.Name] = state
	w.under[n.Name] = state == string(pitstopv1alpha1.StateInMaintenance) || tainted
	count := 0
	for _, under := range w.under {
		if under {
			count++
		}
	}
	w.most = max(w.most, count)
	for _, b := range w.bounds {
		w.checkBound(b)
	}
}

// checkBound keeps a violation of b: more of its nodes under maintenance
// in one group than it allows.
func (w *watcher) checkBound(b bound) {
	groups := map[string][]string{}
	for name, under := range w.under {
		if n := w.nodes[name]; under && n != nil && b.selects(n) {
			group := ""
			if b.groupBy != "" {
				group = n.Labels[b.groupBy]
			}
			groups[group] = append(groups[group], name)
		}
	}
	if len(groups) > 0 {
		w.boundChecks++
	}
	for group, names := range groups {
		if len(names) > b.max && w.violated == nil {
			slices.Sort(names)
			in := ""
			if group != "" {
				in = " in " + group
			}
			w.violated = fmt.Errorf("%d nodes under maintenance at once%s (%s), over the budget %s, at %s (invariant 1)",
				len(names), in, strings.Join(names, ", "), b, time.Now().Format("15:04:05.000"))
		}
	}
}

// checkQuorum keeps a violation of invariant 4: a control-plane node
// carrying pitstop's drain taint while fewer control-plane nodes than a
// quorum of them are Ready and untainted (pitstop counts quorum the same
// way: a majority of every control-plane node, a node down when not Ready
// or tainted by a drain).
func (w *watcher) checkQuorum() {
	total, up := 0, 0
	var drained []string
	for _, n := range w.nodes {
		if !isControlPlane(n) {
			continue
		}
		total++
		if slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == pitstopv1alpha1.TaintDrain }) {
			drained = append(drained, n.Name)
			continue
		}
		if isReady(n) {
			up++
		}
	}
	if len(drained) == 0 {
		return
	}
	w.quorumChecks++
	if quorum := total/2 + 1; up < quorum && w.violated == nil {
		slices.Sort(drained)
		w.violated = fmt.Errorf("control-plane nodes %s drained while %d of %d control-plane nodes are Ready and untainted, fewer than the quorum of %d, at %s (invariant 4)",
			strings.Join(drained, ", "), up, total, quorum, time.Now().Format("15:04:05.000"))
	}
}

func isControlPlane(n *corev1.Node) bool {
	_, cp := n.Labels[localcluster.LabelControlPlane]
	_, master := n.Labels["node-role.kubernetes.io/master"]
	return cp || master
}

func isReady(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
		return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
	})
}

// keepCordoned makes the watcher fail once node, which an administrator
// has just cordoned, is seen schedulable after being seen cordoned.
func (w *watcher) keepCordoned(node string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.cordoned[node]; !ok {
		w.cordoned[node] = false
	}
}

// midEviction returns a node whose drain has removed at least one pod and
// has pods left to evict, or "".
func (w *watcher) midEviction() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	for node, evicted := range w.evictedFrom {
		if evicted == 0 {
			continue
		}
		for _, on := range w.podNode {
			if on == node {
				return node
			}
		}
	}
	return ""
}

// pdb keeps how many healthy pods a budget requires, as the disruption
// controller computes it from its spec.
func (w *watcher) pdb(p *policyv1.PodDisruptionBudget) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pdbEvents++
	if p.Status.ObservedGeneration < p.Generation || p.Status.ExpectedPods == 0 || p.Spec.Selector == nil {
		return
	}
	w.desired[p.Spec.Selector.MatchLabels["app"]] = p.Status.DesiredHealthy
}

// pod counts the app's healthy pods (ready, not terminating), from the
// pods themselves: fewer than its budget requires means more were
// disrupted than the budget allows.
func (w *watcher) pod(p *corev1.Pod, deleted bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	app := p.Labels["app"]
	ready := slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
	})
	removed := deleted || p.DeletionTimestamp != nil
	if removed {
		if node, ok := w.podNode[p.UID]; ok {
			delete(w.podNode, p.UID)
			if _, tainted := w.evictedFrom[node]; tainted {
				w.evictedFrom[node]++
			}
		}
	} else if p.Spec.NodeName != "" && !slices.ContainsFunc(p.OwnerReferences, func(o metav1.OwnerReference) bool { return o.Kind == "DaemonSet" }) {
		w.podNode[p.UID] = p.Spec.NodeName
	}
	if ready && !removed {
		w.healthy[p.UID] = app
		return
	}
	if _, was := w.healthy[p.UID]; !was {
		return
	}
	delete(w.healthy, p.UID)
	at := time.Now().Format("15:04:05.000")
	if !removed {
		w.unready = append(w.unready, fmt.Sprintf("%s on %s at %s", p.Name, p.Spec.NodeName, at))
		return
	}
	w.removals++
	count := int32(0)
	for _, a := range w.healthy {
		if a == app {
			count++
		}
	}
	if desired, ok := w.desired[app]; ok && count < desired && w.violated == nil {
		why := "terminating"
		if deleted {
			why = "deleted"
		}
		// The app's pods that went not ready without being removed tell a
		// budget passed by pitstop from one the pods' own readiness took.
		var unready []string
		for _, u := range w.unready {
			if strings.HasPrefix(u, app+"-") {
				unready = append(unready, u)
			}
		}
		w.violated = fmt.Errorf("app %s had %d healthy pods once pod %s on %s went (%s, at %s), fewer than the %d its PodDisruptionBudget requires (its pods that went not ready without being removed: %v)",
			app, count, p.Name, p.Spec.NodeName, why, at, desired, unready)
	}
}

// unreadyPods lists the healthy pods that went not ready without being
// removed: no drain does that, so the watcher does not count them against
// a budget.
func (w *watcher) unreadyPods() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.unready)
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

// inMaintenanceWithNoDrain returns a node in maintenance now while no other
// node is draining (tainted by a drain but not yet in maintenance), or "".
// With last, also every other node must be in maintenance or back from it:
// no drain is to come.
func (w *watcher) inMaintenanceWithNoDrain(last bool) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	in := ""
	for node, state := range w.state {
		if !w.maintained[node] {
			continue
		}
		switch {
		case state == string(pitstopv1alpha1.StateInMaintenance):
			in = node
		case w.under[node]:
			return ""
		case last && !w.back[node]:
			return ""
		}
	}
	return in
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

func (w *watcher) relisted() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.gaps
}

func (w *watcher) story() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.timeline, "; ")
}

// moves counts the state changes seen.
func (w *watcher) moves() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.timeline)
}

// checks says how many times the watcher judged each invariant, for the
// test's log and docs/safety.md's figures.
func (w *watcher) checks() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return fmt.Sprintf("invariants judged: budgets %d times with a node under maintenance, PodDisruptionBudgets at %d pod removals, administrators' cordons on %d nodes, quorum %d times with a control-plane node drained",
		w.boundChecks, w.removals, len(w.cordoned), w.quorumChecks)
}

// waiting returns a node the test maintains that is neither under
// maintenance nor back from it, and not in except, or "".
func (w *watcher) waiting(except []string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	for node := range w.maintained {
		if !w.under[node] && !w.back[node] && !slices.Contains(except, node) && w.state[node] != string(pitstopv1alpha1.StateInMaintenance) {
			return node
		}
	}
	return ""
}
