//go:build linux

package bench

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/config"
	"github.com/pitstop-dev/pitstop/internal/install"
	"github.com/pitstop-dev/pitstop/internal/localcluster"
	"github.com/pitstop-dev/pitstop/internal/manager"
	"github.com/pitstop-dev/pitstop/internal/scheme"
)

var evictionConcurrency = flag.Int("eviction-concurrency", 0, "pitstop's --eviction-concurrency in the benchmarks; 0 keeps pitstop's default")

// pitstopEnv is a local cluster with pitstop's CRDs installed and pitstop's
// manager running in this process, as `pitstop run` would run it, except
// that every request the manager sends is counted.
type pitstopEnv struct {
	cluster *localcluster.Cluster
	// client is the benchmark's own client (not counted), able to watch.
	client client.WithWatch
	// managerRequests counts the manager's requests.
	managerRequests *requestCounter
	workers         []string
}

// startPitstop starts the cluster and the manager; both stop when the
// benchmark ends (the manager first: its context is b.Context()).
func startPitstop(b *testing.B, opts localcluster.Options) *pitstopEnv {
	b.Helper()
	ctx := b.Context()
	c, cl := startCluster(b, opts)

	counter := newRequestCounter()
	cfg := rest.CopyConfig(c.Config) // same client limits as the library gets: none
	cfg.Wrap(counter.wrap)
	mopts := manager.DefaultOptions()
	mopts.MetricsAddr, mopts.HealthAddr, mopts.DashboardAddr = "0", "0", "0"
	mopts.LeaderElection = false
	mopts.Webhook.Port = 0
	if *evictionConcurrency > 0 {
		mopts.NodeMaintenance.EvictionConcurrency = *evictionConcurrency
	}
	mgr, err := manager.New(ctx, cfg, mopts, logr.Discard())
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	b.Cleanup(func() { // runs after b.Context() is cancelled, before c.Stop
		if err := <-done; err != nil {
			b.Errorf("manager: %v", err)
		}
	})
	var workers []string
	for _, name := range c.NodeNames() {
		if strings.HasPrefix(name, "worker-") {
			workers = append(workers, name)
		}
	}
	e := &pitstopEnv{cluster: c, client: cl, managerRequests: counter, workers: workers}
	took, err := e.warmUp(ctx)
	if err != nil {
		b.Fatalf("warm-up: %v", err)
	}
	b.Logf("pitstop's eviction concurrency: %d; warm-up NodeMaintenance cordoned its node in %.1fms (not counted: a new CRD's first create waits on Retry-After)",
		mopts.NodeMaintenance.EvictionConcurrency, ms(took))
	return e
}

// startCluster starts a local cluster, stopped when the benchmark ends, with
// pitstop's CRDs installed, and returns it with a client that can watch.
func startCluster(b *testing.B, opts localcluster.Options) (*localcluster.Cluster, client.WithWatch) {
	b.Helper()
	ctx := b.Context()
	c, err := localcluster.Start(ctx, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := c.Stop(); err != nil {
			b.Errorf("stopping the local cluster: %v", err)
		}
	})
	cl, err := client.NewWithWatch(c.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		b.Fatal(err)
	}
	crds, err := config.CRDs()
	if err != nil {
		b.Fatal(err)
	}
	if err := install.CRDs(ctx, cl, crds); err != nil {
		b.Fatal(err)
	}
	return c, cl
}

// observeNode watches one node from the version given, so that no change
// after it is missed.
func (e *pitstopEnv) observeNode(ctx context.Context, node *corev1.Node) (*observer, error) {
	nodes := e.cluster.Clientset.CoreV1().Nodes()
	return observe(ctx, node.ResourceVersion, func(ctx context.Context, rv string) (watch.Interface, error) {
		return nodes.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + node.Name, ResourceVersion: rv, AllowWatchBookmarks: true})
	})
}

// observePods watches the pods of the benchmark's namespace on one node.
func (e *pitstopEnv) observePods(ctx context.Context, node string, rv string) (*observer, error) {
	pods := e.cluster.Clientset.CoreV1().Pods(benchNamespace)
	return observe(ctx, rv, func(ctx context.Context, rv string) (watch.Interface, error) {
		return pods.Watch(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node, ResourceVersion: rv, AllowWatchBookmarks: true})
	})
}

// observeNodeMaintenance watches one NodeMaintenance by name, from now: it
// may be started before the object exists.
func (e *pitstopEnv) observeNodeMaintenance(ctx context.Context, name string) (*observer, error) {
	list := &pitstopv1alpha1.NodeMaintenanceList{}
	if err := e.client.List(ctx, list); err != nil {
		return nil, err
	}
	return observe(ctx, list.ResourceVersion, func(ctx context.Context, rv string) (watch.Interface, error) {
		return e.client.Watch(ctx, &pitstopv1alpha1.NodeMaintenanceList{}, &client.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("metadata.name", name),
			Raw:           &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true},
		})
	})
}

// nodeIs adapts a node predicate to watch events.
func nodeIs(ok func(*corev1.Node) bool) func(watch.Event) bool {
	return func(ev watch.Event) bool {
		n, isNode := ev.Object.(*corev1.Node)
		return isNode && ok(n)
	}
}

// isCordoned: what `kubectl cordon` and pitstop's first step set.
func isCordoned(n *corev1.Node) bool { return n.Spec.Unschedulable }

// warmUp runs one NodeMaintenance through cordon and restore on an empty
// node, so that measurements start with the controller's workers known to
// run and the CRD fully served: the API server answers the first requests
// for a CRD it has just established with 429 and Retry-After while it sets
// up its storage, and client-go waits and retries (the first create of a
// NodeMaintenance took about 2 s here, all of it in the create call).
func (e *pitstopEnv) warmUp(ctx context.Context) (time.Duration, error) {
	return e.timeCordon(ctx, e.workers[0], "warm-up")
}

// timeCordon creates a NodeMaintenance for node and times it to the
// cordon, observed through a watch opened before; then it deletes the
// NodeMaintenance and waits until the node is restored.
func (e *pitstopEnv) timeCordon(ctx context.Context, node, name string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	current, err := e.cluster.Clientset.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return 0, err
	}
	if !isRestored(current) {
		return 0, fmt.Errorf("node %s is not restored from the last sample", node)
	}
	o, err := e.observeNode(ctx, current)
	if err != nil {
		return 0, err
	}
	defer o.stop()
	nm := &pitstopv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       pitstopv1alpha1.NodeMaintenanceSpec{NodeName: node, Reason: "benchmark: time to cordon"},
	}
	start := time.Now()
	if err := e.client.Create(ctx, nm); err != nil {
		return 0, err
	}
	at, err := o.until(nodeIs(isCordoned))
	if err != nil {
		return 0, fmt.Errorf("waiting for %s to be cordoned: %w", node, err)
	}
	if err := e.deleteNodeMaintenance(ctx, name); err != nil {
		return 0, err
	}
	if _, err := o.until(nodeIs(isRestored)); err != nil {
		return 0, fmt.Errorf("waiting for %s to be restored: %w", node, err)
	}
	return at.Sub(start), nil
}

// deleteNodeMaintenance deletes a NodeMaintenance and waits until it is
// gone, which is after pitstop has restored its node (the finalizer).
func (e *pitstopEnv) deleteNodeMaintenance(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	o, err := e.observeNodeMaintenance(ctx, name)
	if err != nil {
		return err
	}
	defer o.stop()
	nm := &pitstopv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := e.client.Delete(ctx, nm); err != nil {
		return client.IgnoreNotFound(err)
	}
	if _, err := o.until(func(ev watch.Event) bool { return ev.Type == watch.Deleted }); err != nil {
		return fmt.Errorf("waiting for NodeMaintenance %s to go: %w", name, err)
	}
	return nil
}

// observer is a watch that outlives the API server closing it: it reopens
// from the last resource version it saw. Under load the API server closes
// watches whose client falls behind; a benchmark stopping there would
// measure nothing.
type observer struct {
	ctx  context.Context
	open func(ctx context.Context, rv string) (watch.Interface, error)
	w    watch.Interface
	rv   string
}

// observe opens a watch from resource version rv.
func observe(ctx context.Context, rv string, open func(ctx context.Context, rv string) (watch.Interface, error)) (*observer, error) {
	w, err := open(ctx, rv)
	if err != nil {
		return nil, err
	}
	return &observer{ctx: ctx, open: open, w: w, rv: rv}, nil
}

// until reads events until ok returns true for one, and returns the time
// that event arrived.
func (o *observer) until(ok func(watch.Event) bool) (time.Time, error) {
	for {
		select {
		case <-o.ctx.Done():
			return time.Time{}, o.ctx.Err()
		case ev, open := <-o.w.ResultChan():
			if !open {
				o.w.Stop()
				w, err := o.open(o.ctx, o.rv)
				if err != nil {
					return time.Time{}, fmt.Errorf("reopening a watch from version %s: %w", o.rv, err)
				}
				o.w = w
				continue
			}
			if ev.Type == watch.Error {
				return time.Time{}, fmt.Errorf("watch: %w", apierrors.FromObject(ev.Object))
			}
			if m, err := meta.Accessor(ev.Object); err == nil {
				o.rv = m.GetResourceVersion()
			}
			if ev.Type != watch.Bookmark && ok(ev) {
				return time.Now(), nil
			}
		}
	}
}

func (o *observer) stop() { o.w.Stop() }

// setUnschedulable cordons or uncordons a node the way `kubectl cordon`
// does, without waiting.
func (e *pitstopEnv) setUnschedulable(ctx context.Context, node string, unschedulable bool) error {
	patch := fmt.Appendf(nil, `{"spec":{"unschedulable":%t}}`, unschedulable)
	_, err := e.cluster.Clientset.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// isRestored: schedulable, without pitstop's taint.
func isRestored(n *corev1.Node) bool {
	if n.Spec.Unschedulable {
		return false
	}
	for _, t := range n.Spec.Taints {
		if t.Key == pitstopv1alpha1.TaintDrain {
			return false
		}
	}
	return true
}

// requestCounter counts HTTP requests to the API server by verb and
// resource ("create pods/eviction", "list pods", "watch nodes").
type requestCounter struct {
	mu     sync.Mutex
	counts requestCounts
}

func newRequestCounter() *requestCounter { return &requestCounter{counts: requestCounts{}} }

// wrap is a rest.Config WrapTransport.
func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		kind := requestKind(req)
		c.mu.Lock()
		c.counts[kind]++
		c.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

// snapshot returns the counts so far; subtract two with since.
func (c *requestCounter) snapshot() requestCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.counts)
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// requestCounts are request counts by kind.
type requestCounts map[string]int

// since returns the requests made after earlier was taken.
func (r requestCounts) since(earlier requestCounts) requestCounts {
	out := requestCounts{}
	for k, n := range r {
		if d := n - earlier[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

func (r requestCounts) total() int {
	n := 0
	for _, v := range r {
		n += v
	}
	return n
}

// writes counts the requests that change something.
func (r requestCounts) writes() int {
	n := 0
	for k, v := range r {
		switch strings.Fields(k)[0] {
		case "create", "update", "patch", "delete":
			n += v
		}
	}
	return n
}

// String lists the counts, largest first: "create pods/eviction=110, ...".
func (r requestCounts) String() string {
	keys := slices.Collect(maps.Keys(r))
	slices.SortFunc(keys, func(a, b string) int {
		if r[a] != r[b] {
			return r[b] - r[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, r[k])
	}
	return strings.Join(parts, ", ")
}

// requestKind names a request by Kubernetes verb and resource, from its
// method and path (/api/v1/namespaces/NS/pods/NAME/eviction and the like).
func requestKind(req *http.Request) string {
	segs := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	switch {
	case len(segs) >= 2 && segs[0] == "api":
		segs = segs[2:]
	case len(segs) >= 3 && segs[0] == "apis":
		segs = segs[3:]
	default:
		return "discovery " + req.URL.Path
	}
	if len(segs) >= 3 && segs[0] == "namespaces" {
		segs = segs[2:]
	}
	if len(segs) == 0 {
		return "discovery " + req.URL.Path
	}
	resource, named := segs[0], len(segs) > 1
	if len(segs) > 2 {
		resource += "/" + segs[2]
	}
	verb := strings.ToLower(req.Method)
	switch req.Method {
	case http.MethodGet:
		switch w := req.URL.Query().Get("watch"); {
		case w == "true" || w == "1":
			verb = "watch"
		case !named:
			verb = "list"
		default:
			verb = "get"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	}
	return verb + " " + resource
}

// percentile is the nearest-rank percentile (0 < p ≤ 1) of samples.
func percentile(samples []time.Duration, p float64) time.Duration {
	s := slices.Clone(samples)
	slices.Sort(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[max(i, 0)]
}

func medianFloat(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// cpuUsage is CPU time (user and system) by process.
type cpuUsage map[string]time.Duration

// cpuNow reads the CPU time used so far by each control-plane component,
// kwok, and this process (pitstop's manager, the library, the benchmark's
// watches), from /proc. On a 2-core machine the drainers compete with the
// simulated cluster for CPU, and this shows who used it.
func (e *pitstopEnv) cpuNow() cpuUsage {
	return processesCPU(append(e.cluster.PIDs(), os.Getpid()), map[int]string{os.Getpid(): "bench-process"})
}

// processesCPU reads the CPU time used so far by each process, by its
// name or the one given.
func processesCPU(pids []int, names map[int]string) cpuUsage {
	out := cpuUsage{}
	for _, pid := range pids {
		name, used, err := processCPU(pid)
		if err != nil {
			continue // gone, or not Linux: the figure is informative only
		}
		if n, ok := names[pid]; ok {
			name = n
		}
		out[name] += used
	}
	return out
}

// processCPU returns a process's name and CPU time from /proc/PID/stat
// (utime and stime, fields 14 and 15, in clock ticks of 10 ms).
func processCPU(pid int) (string, time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0, err
	}
	s := string(data)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return "", 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	fields := strings.Fields(s[end+1:]) // fields[0] is field 3, the state
	if len(fields) < 13 {
		return "", 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return "", 0, fmt.Errorf("/proc/%d/stat: bad CPU times", pid)
	}
	return s[open+1 : end], time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

// since returns the CPU time used after earlier was read.
func (u cpuUsage) since(earlier cpuUsage) cpuUsage {
	out := cpuUsage{}
	for k, v := range u {
		out[k] = v - earlier[k]
	}
	return out
}

// share lists each process's CPU use over a span as a share of one core,
// largest first: "kube-apiserver 95%, ...".
func (u cpuUsage) share(span time.Duration) string {
	var parts []string
	for _, k := range u.byUse() {
		parts = append(parts, fmt.Sprintf("%s %.0f%%", k, 100*u[k].Seconds()/span.Seconds()))
	}
	return strings.Join(parts, ", ")
}

// byUse is the processes, largest use first.
func (u cpuUsage) byUse() []string {
	keys := slices.Collect(maps.Keys(u))
	slices.SortFunc(keys, func(a, b string) int {
		if u[a] != u[b] {
			return int(u[b] - u[a])
		}
		return strings.Compare(a, b)
	})
	return keys
}

// String lists CPU seconds, largest first: "kube-apiserver 1.20s, ...".
func (u cpuUsage) String() string {
	keys := u.byUse()
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %.2fs", k, u[k].Seconds())
	}
	return strings.Join(parts, ", ")
}
