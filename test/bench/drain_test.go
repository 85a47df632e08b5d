//go:build linux

package bench

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	kubectldrain "k8s.io/kubectl/pkg/drain"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/localcluster"
)

var (
	drainRounds   = flag.Int("drain-rounds", 7, "how many drains each of pitstop and the kubectl drain library do, alternately")
	cordonSamples = flag.Int("cordon-samples", 100, "how many NodeMaintenances BenchmarkTimeToCordon creates")
)

const (
	// drainPods is how many pods the drained node holds: the kubelet's
	// default pod limit.
	drainPods = 110
	// benchNamespace holds the benchmark's workloads.
	benchNamespace = "bench"
	// drainTimeout bounds one drain, as the library's Helper.Timeout does.
	drainTimeout = 5 * time.Minute
)

// drainRun is one timed drain.
type drainRun struct {
	drainer  string
	node     string
	took     time.Duration
	phases   phases
	requests requestCounts
	cpu      cpuUsage
	// connections are the drainer's connections to the API server before
	// and after, where counted.
	connections [2]int
}

// BenchmarkDrain110Pods drains a node holding 110 ReplicaSet pods (no
// PodDisruptionBudget in the way), alternately with pitstop (create a
// NodeMaintenance, wait for Drained=True through a watch) and with the
// k8s.io/kubectl/pkg/drain library (cordon, then RunNodeDrain), both with
// the same client configuration: no client-side rate limit. Each drain is
// of a freshly filled node. It reports the median time of each, their
// ratio (the design's target is at most 0.5), and the API requests each
// makes per drained pod.
func BenchmarkDrain110Pods(b *testing.B) {
	opts := localcluster.DefaultOptions()
	opts.ControlPlaneNodes = 0
	opts.Workers = 4
	opts.PodsPerNode = 250
	e := startPitstop(b, opts)
	ctx := b.Context()
	if _, err := e.cluster.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNamespace}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}

	// The library gets the same configuration as the manager, its requests
	// counted the same way.
	libRequests := newRequestCounter()
	libConfig := rest.CopyConfig(e.cluster.Config)
	libConfig.Wrap(libRequests.wrap)
	libClient, err := kubernetes.NewForConfig(libConfig)
	if err != nil {
		b.Fatal(err)
	}
	helper := &kubectldrain.Helper{
		Ctx:                 ctx,
		Client:              libClient,
		Force:               true,
		IgnoreAllDaemonSets: true,
		DeleteEmptyDirData:  true,
		GracePeriodSeconds:  -1,
		Timeout:             drainTimeout,
		Out:                 io.Discard,
		ErrOut:              io.Discard,
	}

	var runs []drainRun
	for range b.N {
		for i := range 2 * *drainRounds {
			// pitstop first, then the library, on the same node, then the
			// next node: each drainer drains every node.
			node := e.workers[(i/2)%len(e.workers)]
			deployment := fmt.Sprintf("fill-%d", i)
			pods, target, err := e.fill(ctx, node, deployment)
			if err != nil {
				b.Fatalf("round %d: %v", i+1, err)
			}
			var run drainRun
			cpuBefore := e.cpuNow()
			if i%2 == 0 {
				run, err = e.drainWithPitstop(ctx, target, pods, fmt.Sprintf("drain-%d", i), e.managerRequests.snapshot)
			} else {
				run, err = e.drainWithLibrary(ctx, helper, libRequests, target, pods)
			}
			if err != nil {
				b.Fatalf("round %d (%s): %v", i+1, node, err)
			}
			run.cpu = e.cpuNow().since(cpuBefore)
			runs = append(runs, run)
			b.Logf("round %2d %-8s %s: %.3fs (%s); %d requests, %.2f/pod: %s",
				i+1, run.drainer, run.node, run.took.Seconds(), run.phases, run.requests.total(),
				float64(run.requests.total())/drainPods, run.requests)
			b.Logf("         CPU used meanwhile: %s", run.cpu)
			if err := e.emptyNamespace(ctx, deployment); err != nil {
				b.Fatalf("round %d: cleaning up: %v", i+1, err)
			}
			if i%2 == 0 {
				err = e.deleteNodeMaintenance(ctx, fmt.Sprintf("drain-%d", i))
			} else {
				err = e.uncordon(ctx, helper, node)
			}
			if err != nil {
				b.Fatalf("round %d: restoring %s: %v", i+1, node, err)
			}
		}
	}
	report(b, runs)
}

// report logs and reports the medians, the ratio and requests per pod.
func report(b *testing.B, runs []drainRun) {
	took := map[string][]time.Duration{}
	perPod := map[string][]float64{}
	writesPerPod := map[string][]float64{}
	for _, r := range runs {
		took[r.drainer] = append(took[r.drainer], r.took)
		perPod[r.drainer] = append(perPod[r.drainer], float64(r.requests.total())/drainPods)
		writesPerPod[r.drainer] = append(writesPerPod[r.drainer], float64(r.requests.writes())/drainPods)
	}
	pitstop, library := median(took["pitstop"]), median(took["library"])
	ratio := pitstop.Seconds() / library.Seconds()
	b.ReportMetric(pitstop.Seconds(), "pitstop-s")
	b.ReportMetric(library.Seconds(), "library-s")
	b.ReportMetric(ratio, "pitstop/library")
	b.ReportMetric(medianFloat(perPod["pitstop"]), "pitstop-req/pod")
	b.ReportMetric(medianFloat(perPod["library"]), "library-req/pod")
	b.ReportMetric(medianFloat(writesPerPod["pitstop"]), "pitstop-writes/pod")
	b.ReportMetric(medianFloat(writesPerPod["library"]), "library-writes/pod")
	b.ReportMetric(0, "ns/op") // the wall time of the loop says nothing
	b.Logf("pitstop runs: %s (median %.3fs)", formatRuns(took["pitstop"]), pitstop.Seconds())
	b.Logf("library runs: %s (median %.3fs)", formatRuns(took["library"]), library.Seconds())
	b.Logf("pitstop/library: %.2f (target ≤ 0.5)", ratio)
	for _, drainer := range []string{"pitstop", "library"} {
		b.Logf("%s median phases: %s", drainer, medianPhases(runs, drainer))
	}
}

// medianPhases is each phase's median over one drainer's runs, and the
// median tail from the last pod gone to the drainer saying it is done.
func medianPhases(runs []drainRun, drainer string) string {
	var created, cordoned, first, last, gone, tail []time.Duration
	for _, r := range runs {
		if r.drainer != drainer {
			continue
		}
		created = append(created, r.phases.created)
		cordoned = append(cordoned, r.phases.cordoned)
		first = append(first, r.phases.firstEviction)
		last = append(last, r.phases.lastEviction)
		gone = append(gone, r.phases.lastGone)
		tail = append(tail, r.phases.done-r.phases.lastGone)
	}
	prefix := ""
	if c := median(created); c > 0 {
		prefix = fmt.Sprintf("created +%dms, ", c.Milliseconds())
	}
	return prefix + fmt.Sprintf("cordoned +%dms, first eviction +%dms, last eviction +%dms, last pod gone +%dms, then done %dms later",
		median(cordoned).Milliseconds(), median(first).Milliseconds(), median(last).Milliseconds(), median(gone).Milliseconds(), median(tail).Milliseconds())
}

// fill puts a Deployment of drainPods replicas on node: the other workers
// are cordoned while it is scheduled, and uncordoned once every pod runs.
// It returns the pods and the node as they are then.
func (e *pitstopEnv) fill(ctx context.Context, node, deployment string) (*corev1.PodList, *corev1.Node, error) {
	for _, w := range e.workers {
		if w != node {
			if err := e.setUnschedulable(ctx, w, true); err != nil {
				return nil, nil, err
			}
		}
	}
	cs := e.cluster.Clientset
	if _, err := cs.AppsV1().Deployments(benchNamespace).Create(ctx, localcluster.Deployment(benchNamespace, deployment, drainPods), metav1.CreateOptions{}); err != nil {
		return nil, nil, err
	}
	fillCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := e.cluster.AwaitWorkloads(fillCtx, benchNamespace); err != nil {
		return nil, nil, err
	}
	for _, w := range e.workers {
		if w != node {
			if err := e.setUnschedulable(ctx, w, false); err != nil {
				return nil, nil, err
			}
		}
	}
	pods, err := cs.CoreV1().Pods(benchNamespace).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return nil, nil, err
	}
	if len(pods.Items) != drainPods {
		return nil, nil, fmt.Errorf("%d pods on %s, want %d", len(pods.Items), node, drainPods)
	}
	target, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	if target.Spec.Unschedulable {
		return nil, nil, fmt.Errorf("node %s is still cordoned from the last round", node)
	}
	return pods, target, nil
}

// emptyNamespace deletes the Deployment and waits until no pod is left in
// the namespace, so the next round starts from an empty cluster.
func (e *pitstopEnv) emptyNamespace(ctx context.Context, deployment string) error {
	cs := e.cluster.Clientset
	if err := cs.AppsV1().Deployments(benchNamespace).Delete(ctx, deployment, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods(benchNamespace).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0, nil
	})
}

// uncordon undoes the library's cordon with the library.
func (e *pitstopEnv) uncordon(ctx context.Context, helper *kubectldrain.Helper, node string) error {
	current, err := e.cluster.Clientset.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	return kubectldrain.RunCordonOrUncordon(helper, current, false)
}

// drainWithPitstop creates a NodeMaintenance for node and returns when its
// Drained condition is observed True; requests counts the manager's
// requests so far.
func (e *pitstopEnv) drainWithPitstop(ctx context.Context, node *corev1.Node, pods *corev1.PodList, name string, requests func() requestCounts) (drainRun, error) {
	ctx, cancel := context.WithTimeout(ctx, drainTimeout)
	defer cancel()
	o, err := e.observeNodeMaintenance(ctx, name)
	if err != nil {
		return drainRun{}, err
	}
	defer o.stop()
	tracker, err := e.trackDrain(ctx, node, pods)
	if err != nil {
		return drainRun{}, err
	}
	nm := &pitstopv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       pitstopv1alpha1.NodeMaintenanceSpec{NodeName: node.Name, Reason: "benchmark: drain 110 pods"},
	}
	before := requests()
	start := time.Now()
	if err := e.client.Create(ctx, nm); err != nil {
		return drainRun{}, err
	}
	created := time.Since(start)
	end, err := o.until(func(ev watch.Event) bool {
		nm, ok := ev.Object.(*pitstopv1alpha1.NodeMaintenance)
		return ok && meta.IsStatusConditionTrue(nm.Status.Conditions, pitstopv1alpha1.ConditionDrained)
	})
	sent := requests().since(before)
	if err != nil {
		return drainRun{}, fmt.Errorf("waiting for NodeMaintenance %s to be Drained: %w", name, err)
	}
	ph, err := tracker.wait(ctx, start, end)
	if err != nil {
		return drainRun{}, err
	}
	ph.created = created
	return drainRun{drainer: "pitstop", node: node.Name, took: end.Sub(start), phases: ph, requests: sent}, nil
}

// drainWithLibrary cordons and drains node with the kubectl drain library,
// as `kubectl drain --force --ignore-daemonsets --delete-emptydir-data`
// does, timed from the read of the node the cordon needs to RunNodeDrain's
// return.
func (e *pitstopEnv) drainWithLibrary(ctx context.Context, helper *kubectldrain.Helper, counter *requestCounter, node *corev1.Node, pods *corev1.PodList) (drainRun, error) {
	return e.timedDrain(ctx, "library", counter, node, pods, func(ctx context.Context) (time.Time, error) {
		current, err := helper.Client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		if err != nil {
			return time.Time{}, err
		}
		if err := kubectldrain.RunCordonOrUncordon(helper, current, true); err != nil {
			return time.Time{}, fmt.Errorf("cordoning %s: %w", node.Name, err)
		}
		if err := kubectldrain.RunNodeDrain(helper, node.Name); err != nil {
			return time.Time{}, fmt.Errorf("draining %s: %w", node.Name, err)
		}
		return time.Now(), nil
	})
}

// phases are when a drain's steps were observed through watches, as
// offsets from its start.
type phases struct {
	// created is when the create of the NodeMaintenance returned (its
	// admission webhook included); zero for the library.
	created                                               time.Duration
	cordoned, firstEviction, lastEviction, lastGone, done time.Duration
}

func (p phases) String() string {
	ms := func(d time.Duration) string { return fmt.Sprintf("%dms", d.Milliseconds()) }
	created := ""
	if p.created > 0 {
		created = "created +" + ms(p.created) + ", "
	}
	return created + strings.Join([]string{
		"cordoned +" + ms(p.cordoned),
		"first eviction +" + ms(p.firstEviction),
		"last eviction +" + ms(p.lastEviction),
		"last pod gone +" + ms(p.lastGone),
		"done +" + ms(p.done),
	}, ", ")
}

// drainTracker watches a drain from the outside: the node being cordoned,
// pods being marked for deletion (an accepted eviction), pods going away.
type drainTracker struct {
	mu                                          sync.Mutex
	cordoned, firstEviction, lastEviction, gone time.Time
	nodeDone, podsDone                          chan struct{}
	errs                                        chan error
}

// trackDrain starts watching node and its pods from the versions given.
func (e *pitstopEnv) trackDrain(ctx context.Context, node *corev1.Node, pods *corev1.PodList) (*drainTracker, error) {
	nodeWatch, err := e.observeNode(ctx, node)
	if err != nil {
		return nil, err
	}
	podWatch, err := e.observePods(ctx, node.Name, pods.ResourceVersion)
	if err != nil {
		nodeWatch.stop()
		return nil, err
	}
	t := &drainTracker{nodeDone: make(chan struct{}), podsDone: make(chan struct{}), errs: make(chan error, 2)}
	go func() {
		defer close(t.nodeDone)
		defer nodeWatch.stop()
		at, err := nodeWatch.until(nodeIs(isCordoned))
		if err != nil {
			t.errs <- fmt.Errorf("watching the cordon of %s: %w", node.Name, err)
			return
		}
		t.mu.Lock()
		t.cordoned = at
		t.mu.Unlock()
	}()
	left := map[string]bool{}
	for _, p := range pods.Items {
		left[p.Name] = true
	}
	go func() {
		defer close(t.podsDone)
		defer podWatch.stop()
		terminating := map[string]bool{}
		_, err := podWatch.until(func(ev watch.Event) bool {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok || !left[pod.Name] {
				return false
			}
			now := time.Now()
			t.mu.Lock()
			defer t.mu.Unlock()
			if (pod.DeletionTimestamp != nil || ev.Type == watch.Deleted) && !terminating[pod.Name] {
				terminating[pod.Name] = true
				if t.firstEviction.IsZero() {
					t.firstEviction = now
				}
				t.lastEviction = now
			}
			if ev.Type == watch.Deleted {
				delete(left, pod.Name)
				t.gone = now
			}
			return len(left) == 0
		})
		if err != nil {
			t.errs <- fmt.Errorf("watching pods on %s, %d left: %w", node.Name, len(left), err)
		}
	}()
	return t, nil
}

// wait returns the phases once the tracker has seen the node cordoned and
// every pod gone; the drainer says it is done, so that cannot take long.
func (t *drainTracker) wait(ctx context.Context, start, end time.Time) (phases, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, done := range []chan struct{}{t.nodeDone, t.podsDone} {
		select {
		case <-done:
		case err := <-t.errs:
			return phases{}, err
		case <-ctx.Done():
			return phases{}, fmt.Errorf("drain tracker: %w", ctx.Err())
		}
	}
	select {
	case err := <-t.errs:
		return phases{}, err
	default:
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return phases{
		cordoned:      t.cordoned.Sub(start),
		firstEviction: t.firstEviction.Sub(start),
		lastEviction:  t.lastEviction.Sub(start),
		lastGone:      t.gone.Sub(start),
		done:          end.Sub(start),
	}, nil
}

// BenchmarkTimeToCordon measures pitstop's reaction: from just before a
// NodeMaintenance is created to its node observed unschedulable through a
// watch started beforehand. NodeMaintenances are created one at a time on
// empty nodes in turn; each is deleted, and its node observed restored,
// before the next. The figures are the running controller's: startPitstop's
// warm-up comes first. It reports p50 and p99 in milliseconds (the design's
// target: p99 under 100 ms).
func BenchmarkTimeToCordon(b *testing.B) {
	opts := localcluster.DefaultOptions()
	opts.ControlPlaneNodes = 0
	opts.Workers = 4
	e := startPitstop(b, opts)
	ctx := b.Context()

	var samples []time.Duration
	for range b.N {
		for i := range *cordonSamples {
			took, err := e.timeCordon(ctx, e.workers[i%len(e.workers)], fmt.Sprintf("cordon-%03d", i))
			if err != nil {
				b.Fatalf("sample %d: %v", i, err)
			}
			samples = append(samples, took)
		}
	}
	p50, p99 := percentile(samples, 0.50), percentile(samples, 0.99)
	b.ReportMetric(ms(p50), "p50-ms")
	b.ReportMetric(ms(p99), "p99-ms")
	b.ReportMetric(0, "ns/op")
	b.Logf("%d samples: min %.1fms, p50 %.1fms, p90 %.1fms, p99 %.1fms, max %.1fms",
		len(samples), ms(percentile(samples, 0)), ms(p50), ms(percentile(samples, 0.90)), ms(p99), ms(percentile(samples, 1)))
	parts := make([]string, len(samples))
	for i, s := range samples {
		parts[i] = fmt.Sprintf("%.1f", ms(s))
	}
	b.Logf("samples (ms, in order): %s", strings.Join(parts, " "))
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
