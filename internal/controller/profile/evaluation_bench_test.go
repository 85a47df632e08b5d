//go:build unix

package profile_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/budget"
	"github.com/pitstop-dev/pitstop/internal/controller/profile"
	"github.com/pitstop-dev/pitstop/internal/engine"
	"github.com/pitstop-dev/pitstop/internal/maintenance"
	"github.com/pitstop-dev/pitstop/internal/scheme"
)

// BenchmarkNodeEvaluation times one node's evaluation (a Reconcile) with
// 100, 1,000 and 5,000 nodes in the informer cache, all under one profile:
// most operational, one in twenty waiting for a budget slot, three in
// maintenance holding the slots. The profile counts a budget of its own
// and one shared by every profile per zone, so a waiting node's evaluation
// reads everything a budget count reads. What it costs should not grow
// with the fleet. cpu-ns/op is the process's CPU time per evaluation;
// apireq/op counts the requests the evaluation sends to the API server
// (none, once the cache shows the node as the engine last wrote it).
//
//	go test -run '^$' -bench BenchmarkNodeEvaluation -benchtime 200x -count 3 ./internal/controller/profile/
func BenchmarkNodeEvaluation(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("nodes=%d", size), func(b *testing.B) {
			f := benchFleetOf(b, size)
			e := newBenchEvaluator(b, f)
			b.Run("waiting", func(b *testing.B) {
				e.run(b, f.waiting, pitstopv1alpha1.StateMaintenanceRequired)
			})
			b.Run("operational", func(b *testing.B) {
				e.run(b, f.operational, pitstopv1alpha1.StateOperational)
			})
		})
	}
}

// The benchmark fleets' shape.
const (
	// benchFleetLabel tells the fleets apart: each size's cache holds its
	// own nodes only.
	benchFleetLabel = "bench.pitstop.dev/fleet"
	benchZoneLabel  = "topology.kubernetes.io/zone"
	// benchBudget nodes are in maintenance, one a zone; as many are
	// allowed by the profile's budget.
	benchBudget = 3
	// benchWaitingEvery: one node in this many waits for a slot.
	benchWaitingEvery = 20
)

var (
	benchSizes = []int{100, 1000, 5000}
	benchZones = []string{"eu-de-1a", "eu-de-1b", "eu-de-1d"}
)

// benchFleet is one fleet in the API server: its profile, the namespace of
// its slots, and the nodes whose evaluation is timed.
type benchFleet struct {
	profile, namespace   string
	waiting, operational string
}

var (
	benchFleetsMu sync.Mutex
	benchFleets   = map[int]*benchFleet{}
)

// benchFleetOf creates the fleet of size nodes once per process: -count
// runs the benchmark again over the same nodes.
func benchFleetOf(b *testing.B, size int) *benchFleet {
	benchFleetsMu.Lock()
	defer benchFleetsMu.Unlock()
	if f := benchFleets[size]; f != nil {
		return f
	}
	ctx := context.Background()
	if len(benchFleets) == 0 {
		// Every size's profile and namespace at once: each evaluation
		// reads every profile, so every size reads as many.
		for _, n := range benchSizes {
			name := benchFleetName(n)
			for _, o := range []client.Object{benchProfile(name), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}} {
				if err := env.Client.Create(ctx, o); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	name := benchFleetName(size)
	f := &benchFleet{profile: name, namespace: name}
	p := benchProfile(name)
	now := time.Now()
	slots := &budget.Slots{Client: env.Client, Namespace: name}
	nodes := make(chan *corev1.Node)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for n := range nodes {
				if err := env.Client.Create(ctx, n); err != nil {
					select {
					case errs <- fmt.Errorf("creating node %s: %w", n.Name, err):
					default:
					}
				}
			}
		})
	}
	waiting := 0
	for i := range size {
		node, state := benchNode(name, i, now)
		switch {
		case state == pitstopv1alpha1.StateInMaintenance:
			benchInMaintenance(b, slots, p, node, now)
		case state == pitstopv1alpha1.StateMaintenanceRequired:
			// The timed one has waiters ahead of it and behind it.
			if waiting++; waiting == size/benchWaitingEvery/2 {
				f.waiting = node.Name
			}
		case i == size-1:
			f.operational = node.Name
		}
		nodes <- node
	}
	close(nodes)
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	benchFleets[size] = f
	return f
}

func benchFleetName(size int) string { return fmt.Sprintf("bench-%d", size) }

// benchProfile is a rolling reboot of the workers of one fleet: a node
// annotated reboot-needed waits for the window and for a slot of both
// budgets (the profile's, and one node a zone of every profile), is
// drained, and comes back once the annotation is gone.
func benchProfile(name string) *pitstopv1alpha1.MaintenanceProfile {
	return &pitstopv1alpha1.MaintenanceProfile{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: pitstopv1alpha1.MaintenanceProfileSpec{
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"node-role.kubernetes.io/worker": "", benchFleetLabel: name}},
			Checks: []pitstopv1alpha1.CheckInstance{
				{Name: "reboot_needed", HasAnnotation: &pitstopv1alpha1.KeyValueCheck{Key: "reboot-needed"}},
				{Name: "window", TimeWindow: &pitstopv1alpha1.TimeWindowCheck{Start: "00:00", End: "00:00"}},
				{Name: "budget", MaxMaintenance: &pitstopv1alpha1.MaxMaintenanceCheck{Max: benchBudget, ProfileScoped: true}},
				{Name: "zone_budget", MaxMaintenance: &pitstopv1alpha1.MaxMaintenanceCheck{Max: 1, GroupBy: benchZoneLabel}},
			},
			Triggers: []pitstopv1alpha1.TriggerInstance{
				{Name: "drain", Drain: &pitstopv1alpha1.DrainTrigger{}},
				{Name: "restore", Restore: &pitstopv1alpha1.RestoreTrigger{}},
			},
			States: pitstopv1alpha1.StatesSpec{
				Operational:         pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "reboot_needed", Next: pitstopv1alpha1.StateMaintenanceRequired}}},
				MaintenanceRequired: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "window && budget && zone_budget", Triggers: []string{"drain"}, Next: pitstopv1alpha1.StateInMaintenance}}},
				InMaintenance:       pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "!reboot_needed", Triggers: []string{"restore"}, Next: pitstopv1alpha1.StateOperational}}},
			},
		},
	}
}

// benchNode is node i of the fleet, with the labels and annotations a
// cloud's worker carries, and the record the engine would have written:
// the first benchBudget nodes in maintenance, one in benchWaitingEvery
// waiting for a slot (the longer, the lower its number), the rest
// operational.
func benchNode(fleet string, i int, now time.Time) (*corev1.Node, pitstopv1alpha1.MaintenanceState) {
	name := fmt.Sprintf("%s-%05d", fleet, i)
	zone := benchZones[i%len(benchZones)]
	pods := resource.MustParse("110")
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				benchFleetLabel:                  fleet,
				corev1.LabelHostname:             name,
				corev1.LabelOSStable:             "linux",
				corev1.LabelArchStable:           "amd64",
				corev1.LabelInstanceTypeStable:   "m5.2xlarge",
				corev1.LabelTopologyRegion:       "eu-de-1",
				benchZoneLabel:                   zone,
				"node-role.kubernetes.io/worker": "",
				"node.kubernetes.io/pool":        fmt.Sprintf("pool-%d", i%4),
				"kubernetes.io/kernel-version":   "6.1.0-31-cloud-amd64",
				"example.com/nodepool-template":  "worker-v3",
			},
			Annotations: map[string]string{
				"node.alpha.kubernetes.io/ttl":                           "0",
				"volumes.kubernetes.io/controller-managed-attach-detach": "true",
				"csi.volume.kubernetes.io/nodeid":                        fmt.Sprintf(`{"cinder.csi.openstack.org":"%08x-4a6e-4c3b-9d1e-5f2a7b8c9d0e"}`, i),
				"kubeadm.alpha.kubernetes.io/cri-socket":                 "unix:///run/containerd/containerd.sock",
			},
		},
		Spec: corev1.NodeSpec{ProviderID: fmt.Sprintf("openstack:///%08x-7c1d-4e2f-8a3b-6d5e4f3a2b1c", i)},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{corev1.ResourcePods: pods},
			Allocatable: corev1.ResourceList{corev1.ResourcePods: pods},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	record := engine.Record{Profiles: map[string]engine.ProfileRecord{}}
	record.Sync([]string{fleet}, now.Add(-30*24*time.Hour))
	state := pitstopv1alpha1.StateOperational
	switch {
	case i < benchBudget:
		state = pitstopv1alpha1.StateInMaintenance
		n.Annotations["reboot-needed"] = "true"
		n.Spec.Unschedulable = true
		record.Move(fleet, pitstopv1alpha1.StateMaintenanceRequired, now.Add(-2*time.Hour), false)
		record.Move(fleet, state, now.Add(-10*time.Minute), false)
		record.SetChecks(fleet, map[string]bool{"reboot_needed": true})
	case i%benchWaitingEvery == 0:
		state = pitstopv1alpha1.StateMaintenanceRequired
		n.Annotations["reboot-needed"] = "true"
		record.Move(fleet, state, now.Add(-time.Hour+time.Duration(i)*time.Second), false)
		record.SetChecks(fleet, map[string]bool{"window": true, "budget": false, "zone_budget": false})
	default:
		record.SetChecks(fleet, map[string]bool{"reboot_needed": false})
	}
	n.Annotations[pitstopv1alpha1.AnnotationMaintenanceData] = record.Encode()
	n.Labels[pitstopv1alpha1.LabelState] = string(record.MostSevere())
	return n, state
}

// benchInMaintenance gives a node in maintenance what the engine gave it
// on its way in: a slot of each budget and its drain's NodeMaintenance.
func benchInMaintenance(b *testing.B, slots *budget.Slots, p *pitstopv1alpha1.MaintenanceProfile, node *corev1.Node, now time.Time) {
	ctx := context.Background()
	for _, check := range []string{"budget", "zone_budget"} {
		key, err := profile.BudgetKey(p, check, node)
		if err != nil {
			b.Fatal(err)
		}
		size := benchBudget
		if check == "zone_budget" {
			size = 1
		}
		if _, ok, err := slots.Acquire(ctx, key, size, node.Name, now, nil); err != nil || !ok {
			b.Fatalf("%s takes no slot of %s: %v", node.Name, check, err)
		}
	}
	if err := env.Client.Create(ctx, maintenance.NewForProfile(node.Name, p.Name, pitstopv1alpha1.DrainSpec{})); err != nil {
		b.Fatal(err)
	}
}

// benchEvaluator is a Reconciler reading one fleet through an informer
// cache of its own, as the manager's does, and counting the requests it
// sends to the API server.
type benchEvaluator struct {
	r        *profile.Reconciler
	cache    cache.Cache
	direct   client.Reader
	requests *atomic.Int64
}

// newBenchEvaluator starts an informer cache of the fleet's nodes, its
// slots and NodeMaintenances, and every profile, until the benchmark ends.
func newBenchEvaluator(b *testing.B, f *benchFleet) *benchEvaluator {
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	ownFleet := labels.SelectorFromSet(labels.Set{benchFleetLabel: f.profile})
	slotLeases, err := labels.NewRequirement(pitstopv1alpha1.LabelBudget, selection.Exists, nil)
	if err != nil {
		b.Fatal(err)
	}
	c, err := cache.New(env.Config, cache.Options{
		Scheme:           scheme.New(),
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Node{}:                     {Label: ownFleet},
			&coordinationv1.Lease{}:            {Namespaces: map[string]cache.Config{f.namespace: {}}, Label: labels.NewSelector().Add(*slotLeases)},
			&pitstopv1alpha1.NodeMaintenance{}: {Label: labels.SelectorFromSet(labels.Set{pitstopv1alpha1.LabelProfile: f.profile})},
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	for _, o := range []client.Object{&corev1.Node{}, &pitstopv1alpha1.MaintenanceProfile{}, &coordinationv1.Lease{}, &pitstopv1alpha1.NodeMaintenance{}} {
		if _, err := c.GetInformer(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		b.Fatal("the cache did not sync")
	}
	e := &benchEvaluator{cache: c, requests: &atomic.Int64{}}
	counted := rest.CopyConfig(env.Config)
	counted.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{rt: rt, n: e.requests} })
	direct, err := client.New(counted, client.Options{Scheme: scheme.New()})
	if err != nil {
		b.Fatal(err)
	}
	cached, err := client.New(counted, client.Options{Scheme: scheme.New(), Cache: &client.CacheOptions{Reader: c}})
	if err != nil {
		b.Fatal(err)
	}
	e.direct = direct
	slots := &budget.Slots{Client: budget.LiveClient(cached, direct), Cache: cached, Namespace: f.namespace}
	if e.r, err = profile.NewBareReconciler(cached, direct).WithSlots(slots).WithInformerNodes(c); err != nil {
		b.Fatal(err)
	}
	return e
}

// run times b.N evaluations of node, which stays in state.
func (e *benchEvaluator) run(b *testing.B, node string, state pitstopv1alpha1.MaintenanceState) {
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: node}}
	e.settle(b, req)
	before, cpuBefore := e.requests.Load(), processCPU(b)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := e.r.Reconcile(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(e.requests.Load()-before)/float64(b.N), "apireq/op")
	// The process's CPU time, the garbage collector's included: less
	// swayed than ns/op by other processes on a busy machine.
	b.ReportMetric(float64(processCPU(b)-cpuBefore)/float64(b.N), "cpu-ns/op")
	n := &corev1.Node{}
	if err := e.cache.Get(context.Background(), req.NamespacedName, n); err != nil {
		b.Fatal(err)
	}
	if got := n.Labels[pitstopv1alpha1.LabelState]; got != string(state) {
		b.Fatalf("%s is %s after the evaluations, want %s", node, got, state)
	}
}

// settle evaluates the node until an evaluation, with the cache showing
// the node as the engine last wrote it, writes nothing: what is timed is
// the evaluation of a node that stays where it is.
func (e *benchEvaluator) settle(b *testing.B, req ctrl.Request) {
	ctx := context.Background()
	for range 5 {
		live := &corev1.Node{}
		if err := e.direct.Get(ctx, req.NamespacedName, live); err != nil {
			b.Fatal(err)
		}
		e.awaitCached(b, req, live.ResourceVersion)
		if _, err := e.r.Reconcile(ctx, req); err != nil {
			b.Fatal(err)
		}
		after := &corev1.Node{}
		if err := e.direct.Get(ctx, req.NamespacedName, after); err != nil {
			b.Fatal(err)
		}
		if after.ResourceVersion == live.ResourceVersion {
			return
		}
	}
	b.Fatalf("every evaluation of %s writes it", req.Name)
}

// awaitCached waits for the cache to show the node at version.
func (e *benchEvaluator) awaitCached(b *testing.B, req ctrl.Request, version string) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := &corev1.Node{}
		if err := e.cache.Get(context.Background(), req.NamespacedName, n); err == nil && n.ResourceVersion == version {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("the cache does not show %s at version %s", req.Name, version)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// processCPU is the CPU time the process has used, user and system.
func processCPU(b *testing.B) time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		b.Fatal(err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// countingTransport counts the requests sent to the API server.
type countingTransport struct {
	rt http.RoundTripper
	n  *atomic.Int64
}

func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.n.Add(1)
	return t.rt.RoundTrip(req)
}
