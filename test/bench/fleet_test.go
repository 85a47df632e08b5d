//go:build linux

package bench

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	slotbudget "github.com/pitstop-dev/pitstop/internal/budget"
	"github.com/pitstop-dev/pitstop/internal/engine"
	"github.com/pitstop-dev/pitstop/internal/localcluster"
	"github.com/pitstop-dev/pitstop/internal/maintenance"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

var (
	fleetSizes       = flag.String("fleet-sizes", "100,300,1000", "fleet sizes BenchmarkFleet maintains, comma-separated")
	fleetPods        = flag.Int("fleet-pods-per-node", 30, "pods per node in BenchmarkFleet (30 Deployments with one replica per node each)")
	fleetMaintenance = flag.Duration("fleet-maintenance", 20*time.Second, "how long each node of BenchmarkFleet stays in maintenance once drained")
	fleetHeapProfile = flag.String("fleet-heap-profile", "", "if set, BenchmarkFleet saves the manager's heap profile to PATH.synced once its caches are synced and to PATH.done after the fleet's maintenance (go tool pprof)")
	managerFlags     = flag.String("manager-flags", "", "more flags for the manager's `pitstop run`, separated by spaces (BenchmarkFleet, BenchmarkManagerMemory)")
	pitstopBinary    = flag.String("pitstop-binary", "../../bin/pitstop", "the pitstop binary BenchmarkFleet runs as the manager (make build)")
)

const (
	fleetNamespace  = "fleet"
	fleetProfile    = "fleet"
	fleetAnnotation = "bench.example.com/maintain" // a trigger may not write pitstop.dev keys
	managerNS       = "pitstop-system"
	// fleetStall is how long a fleet run may go without a node finishing
	// its maintenance before it fails as stuck.
	fleetStall = 10 * time.Minute
)

// BenchmarkFleet maintains every worker of a simulated fleet (100, 300 and
// 1,000 nodes, 30 pods each) through one MaintenanceProfile: every node is
// annotated at once; the profile admits 10% of the fleet at a time
// (maxMaintenance), drains each admitted node, keeps it in maintenance for
// a fixed time and restores it. The manager runs as its own process
// (bin/pitstop run), so that its peak resident memory is its own.
//
// It reports the makespan against the lower bound ceil(N / budget) ×
// (median drain + maintenance time), the manager's peak RSS, the API
// requests the manager sent per node maintained, and the most nodes ever
// seen in maintenance at once (which must not exceed the budget).
func BenchmarkFleet(b *testing.B) {
	binary, err := filepath.Abs(*pitstopBinary)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := os.Stat(binary); err != nil {
		b.Fatalf("%v: build it with `make build`", err)
	}
	for _, field := range strings.Split(*fleetSizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(field))
		if err != nil || n < 10 {
			b.Fatalf("-fleet-sizes: %q is not a fleet size of at least 10", field)
		}
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			for range b.N {
				runFleet(b, binary, n)
			}
		})
	}
}

// fleetResult is what one run measured.
type fleetResult struct {
	makespan, drain, lowerBound time.Duration
	// workBound is the slot time the nodes' drains and maintenance took,
	// spread over the budget's slots: no order of admissions can end
	// sooner with these drains. The lower bound above counts the median
	// drain for every node, which is below it when drains vary.
	workBound time.Duration
	// listSchedule is the makespan a scheduler without any overhead of its
	// own would reach with this run's drains: the nodes, in the order they
	// were admitted, each given the first slot to come free for its drain
	// and maintenance, the next one starting the instant a slot frees.
	listSchedule      time.Duration
	mostInMaintenance int
	mostDraining      int
	mostCordoned      int
	// twoSlots counts the times a node was seen holding two slots at
	// once: the budget is then a node short (never over) until it leaves.
	twoSlots int
	peakRSS  int64 // bytes
	// peak is the sample of the manager's memory, taken once a second
	// during the maintenance, with the largest resident set.
	peak     memorySample
	requests float64
	// cpu is the CPU time each process of the cluster, and the manager,
	// used during the maintenance.
	cpu cpuUsage
	// phases are the medians of the steps of a node's maintenance, as the
	// benchmark's watches saw them.
	phases []phase
	// occupancy is the share of the budget's slot time (budget ×
	// makespan) during which a node held a slot, from its NodeMaintenance's
	// creation to the node out of maintenance; lastAdmission is when the
	// last NodeMaintenance was created, from the start.
	occupancy     float64
	lastAdmission time.Duration
	// apiRequests are the API server's answers per node maintained to what
	// pitstop does, by verb, resource and code.
	apiRequests string
	// apiLatency is the API server's mean time to answer the requests
	// pitstop's steps wait on, during the maintenance (every client's).
	apiLatency string
	// evictions are the evictions the API server accepted; toEvict the
	// pods the drains had to evict (their NodeMaintenances' evictionPods,
	// counted when each drain started). A pod evicted from one node comes
	// back as a new pod, which the drain of the node it lands on counts
	// again, so evictions above toEvict are evictions asked again for the
	// same pod.
	evictions float64
	toEvict   int
}

// phase is one step of a node's maintenance: how long it took for each
// node, as the benchmark's watches saw it.
type phase struct {
	name    string
	samples []time.Duration
	// round marks one of pitstop's own steps a round, which follow each
	// other in every slot; over is the part of the step that is not
	// pitstop's (the maintenance the wait step waits out).
	round bool
	over  time.Duration
}

// mean is the step's mean duration; 0 if no node went through it.
func (p phase) mean() time.Duration {
	if len(p.samples) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range p.samples {
		sum += d
	}
	return sum / time.Duration(len(p.samples))
}

// stepsPerRound is pitstop's own part of a round: the sum of the means of
// its steps a round (drained → in-maintenance, the wait's overrun, deleted
// → restored, restored → out, out → next NodeMaintenance created).
func stepsPerRound(phases []phase) time.Duration {
	var sum time.Duration
	for _, p := range phases {
		if p.round {
			sum += max(p.mean()-p.over, 0)
		}
	}
	return sum
}

// median is the step's median duration; 0 if no node went through it.
func (p phase) median() time.Duration {
	if len(p.samples) == 0 {
		return 0
	}
	return median(p.samples)
}

// String gives the step's median, mean, 90th percentile and maximum: the
// spread of a step delays the slot chains it is part of, and the mean is
// what the slots lose to it over a run.
func (p phase) String() string {
	if len(p.samples) == 0 {
		return p.name + ": no samples"
	}
	return fmt.Sprintf("%s: median %.2fs, mean %.2fs, p90 %.2fs, max %.2fs (%d)", p.name, p.median().Seconds(),
		p.mean().Seconds(), percentile(p.samples, 0.9).Seconds(), slices.Max(p.samples).Seconds(), len(p.samples))
}

// timeline is when the benchmark's watches saw a node's maintenance go
// through its steps.
type timeline struct {
	created, drained, entered, deleting, gone, left time.Time
	// restored is when the node was first seen uncordoned after it
	// entered maintenance.
	restored time.Time
	// slotTaken and slotFreed are when the node's budget slot Lease
	// showed it as holder, and then no longer.
	slotTaken, slotFreed time.Time
}

// spans are the durations to - from over the timelines that have both.
func spans(timelines map[string]*timeline, span func(*timeline) (from, to time.Time)) []time.Duration {
	var d []time.Duration
	for _, t := range timelines {
		if from, to := span(t); !from.IsZero() && !to.IsZero() {
			d = append(d, to.Sub(from))
		}
	}
	return d
}

func runFleet(b *testing.B, binary string, nodes int) {
	ctx := b.Context()
	opts := localcluster.DefaultOptions()
	opts.ControlPlaneNodes = 0
	opts.Workers = nodes
	opts.StartTimeout = 5 * time.Minute
	// On 2 cores a simulated fleet of 1,000 nodes and 30,000 pods sends its
	// heartbeats late; with the default grace period the node lifecycle
	// controller keeps marking nodes NotReady and their pods unready. The
	// benchmark measures pitstop, not the simulator keeping up.
	opts.NodeMonitorGracePeriod = 3 * time.Minute
	start := time.Now()
	c, cl := startCluster(b, opts)
	for _, ns := range []string{fleetNamespace, managerNS} {
		if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			b.Fatal(err)
		}
	}
	w := localcluster.Workloads{}
	for i := range *fleetPods {
		w.Deployments = append(w.Deployments, localcluster.Deployment(fleetNamespace, fmt.Sprintf("app-%02d", i), int32(nodes)))
	}
	if err := c.Apply(ctx, w); err != nil {
		b.Fatal(err)
	}
	if err := awaitPodsRunning(ctx, cl, nodes**fleetPods); err != nil {
		b.Fatal(err)
	}
	spread, err := podSpread(ctx, cl)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%d nodes, %d pods running (%s) after %.0fs", nodes, nodes**fleetPods, spread, time.Since(start).Seconds())

	m := startManagerProcess(b, binary, c.KubeconfigPath)
	budget := int(math.Ceil(float64(nodes) / 10))
	if err := cl.Create(ctx, fleetProfileFor(budget)); err != nil {
		b.Fatal(err)
	}
	if err := awaitProfileValid(ctx, cl, fleetProfile); err != nil {
		b.Fatal(err)
	}
	res, err := maintainFleet(ctx, cl, c.Clientset, m, c.PIDs(), nodes, budget)
	if err != nil {
		m.controllerLoad(b, nodes)
		b.Fatal(err)
	}
	b.Logf("nodes=%d budget=%d: makespan %.1fs, lower bound %.1fs (ceil(%d/%d) × (median drain %.2fs + maintenance %s)), ratio %.3f",
		nodes, budget, res.makespan.Seconds(), res.lowerBound.Seconds(), nodes, budget, res.drain.Seconds(), *fleetMaintenance,
		res.makespan.Seconds()/res.lowerBound.Seconds())
	b.Logf("nodes=%d: slot time of the drains and maintenance / budget %.1fs, makespan / that %.3f",
		nodes, res.workBound.Seconds(), res.makespan.Seconds()/res.workBound.Seconds())
	b.Logf("nodes=%d: a scheduler without overhead, with this run's drains, would take %.1fs: %.3f of the bound; makespan / that %.3f",
		nodes, res.listSchedule.Seconds(), res.listSchedule.Seconds()/res.lowerBound.Seconds(), res.makespan.Seconds()/res.listSchedule.Seconds())
	b.Logf("nodes=%d: most in maintenance at once %d, most drains at once %d, most nodes cordoned at once %d (budget %d), a node seen holding two slots %d times; manager peak RSS %.0f MB; %.1f API requests per node",
		nodes, res.mostInMaintenance, res.mostDraining, res.mostCordoned, budget, res.twoSlots, float64(res.peakRSS)/(1<<20), res.requests)
	for _, p := range res.phases {
		b.Logf("nodes=%d: %s", nodes, p)
	}
	b.Logf("nodes=%d: the API server's answers per node to what pitstop does: %s", nodes, res.apiRequests)
	b.Logf("nodes=%d: the API server's mean time to answer, during the maintenance (every client's requests): %s", nodes, res.apiLatency)
	if res.toEvict > 0 {
		b.Logf("nodes=%d: %.0f evictions accepted for %d pods the drains had to evict: %.3f a pod", nodes, res.evictions, res.toEvict, res.evictions/float64(res.toEvict))
	}
	b.Logf("nodes=%d: slots held %.1f%% of the time; last NodeMaintenance created at %.1fs", nodes, 100*res.occupancy, res.lastAdmission.Seconds())
	b.Logf("nodes=%d: manager's largest resident set sampled during the maintenance: %s", nodes, res.peak)
	b.Logf("nodes=%d: CPU during the maintenance, share of one core: %s", nodes, res.cpu.share(res.makespan))
	m.controllerLoad(b, nodes)
	m.saveHeapProfile(b, "done")
	if res.mostInMaintenance > budget || res.mostDraining > budget || res.mostCordoned > budget {
		b.Errorf("the budget of %d was exceeded: %d in maintenance, %d draining, %d cordoned at once", budget, res.mostInMaintenance, res.mostDraining, res.mostCordoned)
	}
	b.ReportMetric(res.makespan.Seconds(), "makespan-s")
	b.ReportMetric(res.makespan.Seconds()/res.lowerBound.Seconds(), "makespan/bound")
	b.ReportMetric(res.makespan.Seconds()/res.workBound.Seconds(), "makespan/work")
	b.ReportMetric(res.makespan.Seconds()/res.listSchedule.Seconds(), "makespan/list")
	b.ReportMetric(stepsPerRound(res.phases).Seconds(), "steps-s/round")
	b.ReportMetric(float64(res.peakRSS)/(1<<20), "peak-RSS-MB")
	b.ReportMetric(res.requests, "requests/node")
}

// awaitProfileValid waits for the manager to find the profile valid, and
// says why when it does not: a run whose profile never runs would only
// time out after ten minutes without progress.
func awaitProfileValid(ctx context.Context, cl client.Client, name string) error {
	var cond *metav1.Condition
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		p := &pitstopv1alpha1.MaintenanceProfile{}
		if err := cl.Get(ctx, client.ObjectKey{Name: name}, p); err != nil {
			return false, err
		}
		cond = meta.FindStatusCondition(p.Status.Conditions, pitstopv1alpha1.ConditionValid)
		return cond != nil && cond.ObservedGeneration == p.Generation && cond.Status != metav1.ConditionUnknown, nil
	})
	switch {
	case err != nil:
		return fmt.Errorf("MaintenanceProfile %s: the manager did not report it valid: %w", name, err)
	case cond.Status != metav1.ConditionTrue:
		return fmt.Errorf("MaintenanceProfile %s is not valid: %s", name, cond.Message)
	}
	return nil
}

// fleetProfileFor is the benchmark's profile: annotated nodes wait for one
// of budget slots, are drained, stay in maintenance for the fixed time and
// come back with the annotation removed.
func fleetProfileFor(budget int) *pitstopv1alpha1.MaintenanceProfile {
	return &pitstopv1alpha1.MaintenanceProfile{
		ObjectMeta: metav1.ObjectMeta{Name: fleetProfile},
		Spec: pitstopv1alpha1.MaintenanceProfileSpec{
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{localcluster.LabelWorker: ""}},
			Checks: []pitstopv1alpha1.CheckInstance{
				{Name: "wanted", HasAnnotation: &pitstopv1alpha1.KeyValueCheck{Key: fleetAnnotation}},
				{Name: "budget", MaxMaintenance: &pitstopv1alpha1.MaxMaintenanceCheck{Max: int32(budget), ProfileScoped: true}},
				{Name: "done", Wait: &pitstopv1alpha1.WaitCheck{Duration: pitstopv1alpha1.Duration{Duration: *fleetMaintenance}}},
			},
			Triggers: []pitstopv1alpha1.TriggerInstance{
				{Name: "drain", Drain: &pitstopv1alpha1.DrainTrigger{}},
				{Name: "restore", Restore: &pitstopv1alpha1.RestoreTrigger{}},
				{Name: "clear", AlterAnnotation: &pitstopv1alpha1.AlterTrigger{Key: fleetAnnotation, Remove: true}},
			},
			States: pitstopv1alpha1.StatesSpec{
				Operational: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{
					{Check: "wanted", Next: pitstopv1alpha1.StateMaintenanceRequired},
				}},
				MaintenanceRequired: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{
					{Check: "budget", Triggers: []string{"drain"}, Next: pitstopv1alpha1.StateInMaintenance},
				}},
				InMaintenance: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{
					{Check: "done", Triggers: []string{"restore", "clear"}, Next: pitstopv1alpha1.StateOperational},
				}},
			},
		},
	}
}

// maintainFleet annotates every node at once and watches nodes and
// NodeMaintenances until every node has been through maintenance.
func maintainFleet(ctx context.Context, cl client.WithWatch, cs kubernetes.Interface, m *managerProcess, clusterPIDs []int, nodes, budget int) (fleetResult, error) {
	var res fleetResult
	nodeList := &corev1.NodeList{}
	if err := cl.List(ctx, nodeList); err != nil {
		return res, err
	}
	nmList := &pitstopv1alpha1.NodeMaintenanceList{}
	if err := cl.List(ctx, nmList); err != nil {
		return res, err
	}
	// The API server ends a watch after a while; a retry watcher resumes
	// it from the last version seen, so no change is missed.
	nodeWatch, err := retryWatch(ctx, cl, &corev1.NodeList{}, nodeList.ResourceVersion)
	if err != nil {
		return res, err
	}
	defer nodeWatch.Stop()
	nmWatch, err := retryWatch(ctx, cl, &pitstopv1alpha1.NodeMaintenanceList{}, nmList.ResourceVersion)
	if err != nil {
		return res, err
	}
	defer nmWatch.Stop()
	slotList := &coordinationv1.LeaseList{}
	slotsOnly := []client.ListOption{client.InNamespace(managerNS), client.HasLabels{pitstopv1alpha1.LabelBudget}}
	if err := cl.List(ctx, slotList, slotsOnly...); err != nil {
		return res, err
	}
	slotWatch, err := retryWatch(ctx, cl, &coordinationv1.LeaseList{}, slotList.ResourceVersion, slotsOnly...)
	if err != nil {
		return res, err
	}
	defer slotWatch.Stop()
	requestsBefore, err := m.requests()
	if err != nil {
		return res, err
	}
	answeredBefore, err := readAPIRequests(ctx, cs)
	if err != nil {
		return res, err
	}

	pids, names := append(clusterPIDs, m.cmd.Process.Pid), map[int]string{m.cmd.Process.Pid: "pitstop"}
	cpuBefore := processesCPU(pids, names)
	start := time.Now()
	if err := annotateAll(ctx, cl, nodeList.Items); err != nil {
		return res, err
	}
	inMaintenance := map[string]bool{}
	timelines := map[string]*timeline{}
	at := func(node string) *timeline {
		if timelines[node] == nil {
			timelines[node] = &timeline{}
		}
		return timelines[node]
	}
	var exits, admissions, slotsFreed, slotsTaken []time.Time
	toEvict := map[types.UID]int32{} // NodeMaintenance → status.evictionPods
	holders := map[string]string{}   // slot Lease → the node holding it
	done := map[string]bool{}
	// draining holds the NodeMaintenances from their creation until their
	// node is restored (or they are gone); cordoned the nodes
	// unschedulable.
	draining, cordoned := map[string]bool{}, map[string]bool{}
	// The run fails when no node has finished its maintenance for
	// fleetStall (the fleet is stuck, or as good as), or at the overall
	// limit: a round of drains may take minutes on a slow machine.
	timeout := time.After(time.Duration(nodes/budget+2) * (*fleetMaintenance + 4*time.Minute))
	stall := time.NewTimer(fleetStall)
	defer stall.Stop()
	progress := time.NewTicker(time.Minute)
	defer progress.Stop()
	memory := time.NewTicker(time.Second)
	defer memory.Stop()
	for len(done) < nodes {
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-memory.C:
			// /proc only; the heap from /metrics only for a new peak.
			if rss, err := m.rss(); err == nil && rss > res.peak.rss {
				res.peak = m.sample(time.Since(start))
			}
		case <-timeout:
			res.cpu = processesCPU(pids, names).since(cpuBefore)
			res.phases = fleetPhases(start, timelines, admissions, exits, slotsFreed, slotsTaken, budget)
			return res, fmt.Errorf("%d of %d nodes maintained before the timeout; %s; CPU, share of one core: %s",
				len(done), nodes, phaseSummary(res.phases), res.cpu.share(time.Since(start)))
		case <-stall.C:
			res.cpu = processesCPU(pids, names).since(cpuBefore)
			res.phases = fleetPhases(start, timelines, admissions, exits, slotsFreed, slotsTaken, budget)
			return res, fmt.Errorf("%d of %d nodes maintained, none in the last %s; %s; CPU, share of one core: %s",
				len(done), nodes, fleetStall, phaseSummary(res.phases), res.cpu.share(time.Since(start)))
		case <-progress.C:
			// Live on stderr: a benchmark's log is only printed when it ends.
			drained := 0
			for _, t := range timelines {
				if !t.drained.IsZero() && t.entered.IsZero() {
					drained++
				}
			}
			fmt.Fprintf(os.Stderr, "fleet %d: %4.0fs: %d maintained, %d NodeMaintenances, %d drained not yet in maintenance, %d in maintenance\n",
				nodes, time.Since(start).Seconds(), len(done), len(draining), drained, len(inMaintenance))
		case ev, ok := <-nodeWatch.ResultChan():
			if !ok {
				return res, errors.New("the node watch ended")
			}
			n, ok := ev.Object.(*corev1.Node)
			if !ok {
				continue
			}
			now := time.Now()
			in := n.Labels[pitstopv1alpha1.LabelState] == string(pitstopv1alpha1.StateInMaintenance)
			switch {
			case in && !inMaintenance[n.Name]:
				at(n.Name).entered = now
			case !in && inMaintenance[n.Name]:
				at(n.Name).left = now
				exits = append(exits, now)
			}
			res.mostInMaintenance = max(res.mostInMaintenance, mark(inMaintenance, n.Name, in))
			res.mostCordoned = max(res.mostCordoned, mark(cordoned, n.Name, n.Spec.Unschedulable))
			if t := at(n.Name); !t.entered.IsZero() && t.restored.IsZero() && !n.Spec.Unschedulable {
				t.restored = now
				// The node leaves maintenance once restored; its
				// NodeMaintenance goes a moment later.
				delete(draining, maintenance.ForProfile(n.Name))
			}
			rec, err := engine.ReadRecord(n)
			if err == nil && rec.Profiles[fleetProfile].Previous == pitstopv1alpha1.StateInMaintenance &&
				n.Annotations[fleetAnnotation] == "" && !n.Spec.Unschedulable && !done[n.Name] {
				done[n.Name] = true
				stall.Reset(fleetStall)
			}
		case ev, ok := <-nmWatch.ResultChan():
			if !ok {
				return res, errors.New("the NodeMaintenance watch ended")
			}
			nm, ok := ev.Object.(*pitstopv1alpha1.NodeMaintenance)
			if !ok {
				continue
			}
			now, t := time.Now(), at(nm.Spec.NodeName)
			if nm.Status.EvictionPods > 0 {
				toEvict[nm.UID] = nm.Status.EvictionPods
			}
			switch {
			case ev.Type == watch.Added:
				t.created = now
				admissions = append(admissions, now)
				draining[nm.Name] = true
			case ev.Type == watch.Deleted:
				t.gone = now
				delete(draining, nm.Name)
			case t.drained.IsZero() && meta.IsStatusConditionTrue(nm.Status.Conditions, pitstopv1alpha1.ConditionDrained):
				t.drained = now
			case t.deleting.IsZero() && nm.DeletionTimestamp != nil:
				t.deleting = now
			}
			res.mostDraining = max(res.mostDraining, len(draining))
		case ev, ok := <-slotWatch.ResultChan():
			if !ok {
				return res, errors.New("the slot Lease watch ended")
			}
			lease, ok := ev.Object.(*coordinationv1.Lease)
			if !ok {
				continue
			}
			now, holder := time.Now(), slotbudget.HolderOf(lease)
			if ev.Type == watch.Deleted {
				holder = ""
			}
			if before := holders[lease.Name]; before != holder {
				if before != "" {
					at(before).slotFreed = now
					slotsFreed = append(slotsFreed, now)
				}
				if holder != "" {
					if at(holder).slotTaken.IsZero() {
						at(holder).slotTaken = now
					}
					slotsTaken = append(slotsTaken, now)
				}
			}
			holders[lease.Name] = holder
			if holder != "" && ev.Type != watch.Deleted {
				held := 0
				for _, h := range holders {
					if h == holder {
						held++
					}
				}
				if held > 1 {
					res.twoSlots++
				}
			}
		}
	}
	res.makespan = time.Since(start)
	res.cpu = processesCPU(pids, names).since(cpuBefore)
	requestsAfter, err := m.requests()
	if err != nil {
		return res, err
	}
	res.requests = (requestsAfter - requestsBefore) / float64(nodes)
	answered, err := readAPIRequests(ctx, cs)
	if err != nil {
		return res, err
	}
	res.apiRequests = answered.perNode(answeredBefore, nodes)
	res.apiLatency = answered.latencies(answeredBefore, "PATCH nodes", "POST pods/eviction", "POST nodemaintenances",
		"PATCH nodemaintenances/status", "POST leases", "POST events")
	res.evictions = answered.since(answeredBefore, "POST pods/eviction 201")
	for _, n := range toEvict {
		res.toEvict += int(n)
	}
	res.peakRSS, err = m.peakRSS()
	if err != nil {
		return res, err
	}
	if drains := spans(timelines, func(t *timeline) (time.Time, time.Time) { return t.created, t.drained }); len(drains) > 0 {
		res.drain = median(drains)
		var work time.Duration
		for _, d := range drains {
			work += d + *fleetMaintenance
		}
		res.workBound = work / time.Duration(budget)
		res.listSchedule = listSchedule(timelines, budget, *fleetMaintenance)
	}
	res.phases = fleetPhases(start, timelines, admissions, exits, slotsFreed, slotsTaken, budget)
	var held time.Duration
	for _, d := range spans(timelines, func(t *timeline) (time.Time, time.Time) { return t.created, t.left }) {
		held += d
	}
	res.occupancy = held.Seconds() / (float64(budget) * res.makespan.Seconds())
	if len(admissions) > 0 {
		res.lastAdmission = admissions[len(admissions)-1].Sub(start)
	}
	rounds := (nodes + budget - 1) / budget
	res.lowerBound = time.Duration(rounds) * (res.drain + *fleetMaintenance)
	return res, nil
}

// mark puts name in set or takes it out, and returns how many the set
// holds.
func mark(set map[string]bool, name string, in bool) int {
	if in {
		set[name] = true
	} else {
		delete(set, name)
	}
	return len(set)
}

// listSchedule is the makespan of the nodes' drains and maintenance on
// budget slots with no time lost between them: in the order the nodes were
// admitted, each starts on the slot that comes free first. It is what the
// bound misses of this run's drains (their spread, and the slots finishing
// apart at the end), and leaves out what the scheduler itself costs.
func listSchedule(timelines map[string]*timeline, budget int, maintenance time.Duration) time.Duration {
	type job struct {
		admitted time.Time
		took     time.Duration
	}
	var jobs []job
	for _, t := range timelines {
		if !t.created.IsZero() && !t.drained.IsZero() {
			jobs = append(jobs, job{t.created, t.drained.Sub(t.created) + maintenance})
		}
	}
	slices.SortFunc(jobs, func(a, b job) int { return a.admitted.Compare(b.admitted) })
	free := make([]time.Duration, budget) // when each slot comes free
	var end time.Duration
	for _, j := range jobs {
		i := slices.Index(free, slices.Min(free))
		free[i] += j.took
		end = max(end, free[i])
	}
	return end
}

// fleetPhases are the medians of the steps of the nodes' maintenance, as
// far as the timelines go.
func fleetPhases(start time.Time, timelines map[string]*timeline, admissions, exits, slotsFreed, slotsTaken []time.Time, budget int) []phase {
	var phases []phase
	if len(admissions) > 0 {
		phases = append(phases, phase{name: "start (all nodes annotated at once) → first NodeMaintenance created", samples: []time.Duration{admissions[0].Sub(start)}})
	}
	step := func(name string, span func(t *timeline) (time.Time, time.Time)) phase {
		return phase{name: name, samples: spans(timelines, span)}
	}
	ofRound := func(p phase, over time.Duration) phase {
		p.round, p.over = true, over
		return p
	}
	phases = append(phases,
		step("NodeMaintenance created → Drained", func(t *timeline) (time.Time, time.Time) { return t.created, t.drained }),
		ofRound(step("drained → in-maintenance", func(t *timeline) (time.Time, time.Time) { return t.drained, t.entered }), 0),
		ofRound(step("in-maintenance → NodeMaintenance deleted", func(t *timeline) (time.Time, time.Time) { return t.entered, t.deleting }), *fleetMaintenance),
		ofRound(step("deleted → node restored (uncordoned)", func(t *timeline) (time.Time, time.Time) { return t.deleting, t.restored }), 0),
		ofRound(step("restored → node out of maintenance", func(t *timeline) (time.Time, time.Time) { return t.restored, t.left }), 0),
		step("deleted → NodeMaintenance gone", func(t *timeline) (time.Time, time.Time) { return t.deleting, t.gone }),
	)
	if refills := refills(exits, admissions, budget); len(refills) > 0 {
		phases = append(phases, phase{name: "node out of maintenance → next NodeMaintenance created", samples: refills, round: true})
	}
	// The refill's parts, from the slot Leases.
	phases = append(phases, step("  of it: node out of maintenance → its slot given back", func(t *timeline) (time.Time, time.Time) { return t.left, t.slotFreed }))
	if handOvers := refills(slotsFreed, slotsTaken, budget); len(handOvers) > 0 {
		phases = append(phases, phase{name: "  of it: slot given back → next slot taken", samples: handOvers})
	}
	phases = append(phases, step("  of it: slot taken → its NodeMaintenance created", func(t *timeline) (time.Time, time.Time) { return t.slotTaken, t.created }))
	return phases
}

// refills pairs the times slots came free with the times they were taken
// again: the k-th taking after the first budget ones took the slot the
// (k-budget)-th freeing gave back.
func refills(freed, taken []time.Time, budget int) []time.Duration {
	var d []time.Duration
	for k := budget; k < len(taken) && k-budget < len(freed); k++ {
		d = append(d, taken[k].Sub(freed[k-budget]))
	}
	return d
}

func phaseSummary(phases []phase) string {
	var parts []string
	for _, p := range phases {
		parts = append(parts, p.String())
	}
	return strings.Join(parts, ", ")
}

// retryWatch watches list's kind from version on, resuming after the API
// server ends the watch.
func retryWatch(ctx context.Context, cl client.WithWatch, list client.ObjectList, version string, only ...client.ListOption) (*watchtools.RetryWatcher, error) {
	return watchtools.NewRetryWatcherWithContext(ctx, version, &toolscache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			o := &client.ListOptions{Raw: &opts}
			o.ApplyOptions(only)
			return cl.Watch(ctx, list.DeepCopyObject().(client.ObjectList), o)
		},
	})
}

// annotateAll marks every node for maintenance, 32 patches in flight.
func annotateAll(ctx context.Context, cl client.Client, nodes []corev1.Node) error {
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+fleetAnnotation+`":"true"}}}`))
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	errs := make([]error, len(nodes))
	for i := range nodes {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = cl.Patch(ctx, &nodes[i], patch)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// awaitPodsRunning waits until the fleet namespace holds want pods, all
// past Pending. It does not wait for them to be Ready: on a large
// simulated fleet the node lifecycle controller keeps marking some pods
// NotReady when heartbeats run late, and the benchmark's drains (no
// PodDisruptionBudgets) do not depend on readiness. On 2 cores a fleet of
// 1,000 nodes and 30,000 pods has taken 26 to 31 minutes to get there, so
// the wait is 45 minutes, and the count is logged each minute so that a
// run that gives up says how far it got.
func awaitPodsRunning(ctx context.Context, cl client.Client, want int) error {
	var logged time.Time
	var pending, all int
	err := wait.PollUntilContextTimeout(ctx, 5*time.Second, 45*time.Minute, true, func(ctx context.Context) (bool, error) {
		notRunning := &corev1.PodList{}
		if err := cl.List(ctx, notRunning, client.InNamespace(fleetNamespace), client.MatchingFields{"status.phase": "Pending"}); err != nil {
			return false, nil
		}
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
		if err := cl.List(ctx, list, client.InNamespace(fleetNamespace)); err != nil {
			return false, nil
		}
		pending, all = len(notRunning.Items), len(list.Items)
		if time.Since(logged) >= time.Minute {
			logged = time.Now()
			fmt.Fprintf(os.Stderr, "%s waiting for the fleet's pods: %d of %d created, %d pending\n", logged.Format(time.TimeOnly), all, want, pending)
		}
		return pending == 0 && all == want, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %d pods to run: %d created, %d pending: %w", want, all, pending, err)
	}
	return nil
}

// podSpread says how evenly the fleet's pods are spread: the fewest and
// most pods on a node.
func podSpread(ctx context.Context, cl client.Client) (string, error) {
	pods := &corev1.PodList{}
	if err := cl.List(ctx, pods, client.InNamespace(fleetNamespace)); err != nil {
		return "", err
	}
	per := map[string]int{}
	for _, p := range pods.Items {
		per[p.Spec.NodeName]++
	}
	lo, hi := math.MaxInt, 0
	for _, n := range per {
		lo, hi = min(lo, n), max(hi, n)
	}
	return fmt.Sprintf("%d to %d pods a node", lo, hi), nil
}

// managerProcess is `pitstop run` started by the benchmark.
type managerProcess struct {
	cmd            *exec.Cmd
	metrics, pprof string
	// readyAfter is how long it took from its start to ready.
	readyAfter time.Duration
}

// stop stops the manager as a pod's termination does (SIGTERM) and waits
// for it to exit.
func (m *managerProcess) stop() {
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	_ = m.cmd.Wait()
}

// startManagerProcess runs the pitstop binary against the cluster, without
// leader election or webhook (the benchmark's profile is valid), and waits
// until it is ready, logging its memory meanwhile.
func startManagerProcess(b *testing.B, binary, kubeconfig string) *managerProcess {
	b.Helper()
	return runManagerProcess(b, binary, kubeconfig, managerRun{flags: strings.Fields(*managerFlags), logMemory: true})
}

// managerRun is how runManagerProcess runs the manager.
type managerRun struct {
	// flags are added to `pitstop run`'s, after the benchmark's own
	// (a later flag wins).
	flags []string
	// logMemory samples and logs the manager's memory while it starts, and
	// saves a heap profile once it is ready.
	logMemory bool
}

// runManagerProcess runs `pitstop run` against the cluster as
// startManagerProcess says, with run's flags, and waits until it is ready.
func runManagerProcess(b *testing.B, binary, kubeconfig string, run managerRun) *managerProcess {
	b.Helper()
	metricsPort, healthPort, pprofPort := testutil.FreePort(b), testutil.FreePort(b), testutil.FreePort(b)
	cmd := exec.Command(binary, "run", "--kubeconfig="+kubeconfig, "--leader-elect=false", "--webhook-port=0",
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metricsPort),
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", healthPort),
		fmt.Sprintf("--pprof-addr=127.0.0.1:%d", pprofPort),
		"--dashboard-addr=0", "--log-level=error")
	cmd.Args = append(cmd.Args, run.flags...)
	cmd.Env = append(os.Environ(), "POD_NAMESPACE="+managerNS)
	logFile, err := os.Create(filepath.Join(b.TempDir(), "pitstop.log"))
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM) // nothing when it was stopped already
		_ = cmd.Wait()
		if b.Failed() {
			log, _ := os.ReadFile(logFile.Name())
			lines := strings.Split(strings.TrimSpace(string(log)), "\n")
			b.Logf("last lines of the manager's log:\n%s", strings.Join(lines[max(0, len(lines)-20):], "\n"))
		}
	})
	m := &managerProcess{cmd: cmd, metrics: fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort), pprof: fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/", pprofPort)}
	ready := fmt.Sprintf("http://127.0.0.1:%d/readyz", healthPort)
	started := time.Now()
	var start []memorySample
	poll := 200 * time.Millisecond
	if !run.logMemory {
		poll = 20 * time.Millisecond
	}
	err = wait.PollUntilContextTimeout(b.Context(), poll, 5*time.Minute, true, func(context.Context) (bool, error) {
		if run.logMemory {
			start = append(start, m.sample(time.Since(started)))
		}
		resp, err := http.Get(ready)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		b.Fatalf("the manager did not become ready: %v", err)
	}
	m.readyAfter = time.Since(started)
	if !run.logMemory {
		return m
	}
	b.Logf("manager ready after %.1fs; its memory while the caches filled: %s", m.readyAfter.Seconds(), startCurve(start))
	if log, err := os.ReadFile(logFile.Name()); err == nil {
		for _, line := range strings.Split(string(log), "\n") {
			if strings.Contains(strings.ToLower(line), "watchlist") || strings.Contains(line, "falling back") {
				b.Logf("manager log: %s", line)
			}
		}
	}
	m.saveHeapProfile(b, "synced")
	return m
}

// memorySample is the manager's memory at one moment of its start: its
// resident set and, once its metrics are served, the Go heap.
type memorySample struct {
	at                 time.Duration
	rss, heap, heapSys int64 // bytes; heap and heapSys 0 before /metrics answers
	// anon and file split the resident set: the process's own memory, and
	// the pages of its binary (and other files) mapped in.
	anon, file int64
}

func (s memorySample) String() string {
	mb := func(v int64) float64 { return float64(v) / (1 << 20) }
	return fmt.Sprintf("%.0f MB at %.0fs (anonymous %.0f MB, file-backed %.0f MB; Go heap in use %.0f MB, obtained %.0f MB)",
		mb(s.rss), s.at.Seconds(), mb(s.anon), mb(s.file), mb(s.heap), mb(s.heapSys))
}

func (m *managerProcess) sample(at time.Duration) memorySample {
	s := memorySample{at: at}
	s.rss, _ = m.rss()
	s.anon, _ = m.status("RssAnon:")
	s.file, _ = m.status("RssFile:")
	if v, err := m.sum("go_memstats_heap_inuse_bytes"); err == nil {
		s.heap = int64(v)
		if v, err := m.sum("go_memstats_heap_sys_bytes"); err == nil {
			s.heapSys = int64(v)
		}
	}
	return s
}

// startCurve summarizes the samples: the peak resident set, when it was
// reached and the heap then, and the curve about once a second.
func startCurve(samples []memorySample) string {
	if len(samples) == 0 {
		return "no samples"
	}
	peak := samples[0]
	for _, s := range samples {
		if s.rss > peak.rss {
			peak = s
		}
	}
	mb := func(v int64) float64 { return float64(v) / (1 << 20) }
	var curve []string
	next := time.Duration(0)
	for _, s := range samples {
		if s.at >= next {
			curve = append(curve, fmt.Sprintf("%.0fs %.0f/%.0f/%.0f", s.at.Seconds(), mb(s.rss), mb(s.heap), mb(s.heapSys)))
			next = s.at + time.Second
		}
	}
	return fmt.Sprintf("RSS peak %.0f MB at %.1fs (heap in use %.0f MB, heap obtained %.0f MB); RSS/heap in use/heap obtained (MB) over time: %s",
		mb(peak.rss), peak.at.Seconds(), mb(peak.heap), mb(peak.heapSys), strings.Join(curve, ", "))
}

// saveHeapProfile saves the manager's heap profile to -fleet-heap-profile
// with the suffix, if that flag is set.
func (m *managerProcess) saveHeapProfile(b *testing.B, suffix string) {
	if *fleetHeapProfile == "" {
		return
	}
	resp, err := http.Get(m.pprof + "heap?gc=1")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := os.Create(*fleetHeapProfile + "." + suffix)
	if err != nil {
		b.Fatal(err)
	}
	defer out.Close()
	if _, err := io.Copy(out, resp.Body); err != nil {
		b.Fatal(err)
	}
	b.Logf("heap profile: %s", out.Name())
}

// requests sums client-go's rest_client_requests_total from the manager's
// /metrics: every request the manager has sent to the API server.
func (m *managerProcess) requests() (float64, error) {
	return m.sum("rest_client_requests_total")
}

// sum adds up the samples of a metric in the manager's /metrics whose
// labels include every one given (as `name="value"`).
func (m *managerProcess) sum(metric string, labels ...string) (float64, error) {
	resp, err := http.Get(m.metrics)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var total float64
	s := bufio.NewScanner(resp.Body)
next:
	for s.Scan() {
		line := s.Text()
		if !strings.HasPrefix(line, metric+"{") && !strings.HasPrefix(line, metric+" ") {
			continue
		}
		for _, l := range labels {
			if !strings.Contains(line, l) {
				continue next
			}
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			return 0, fmt.Errorf("parsing %q: %w", line, err)
		}
		total += v
	}
	return total, s.Err()
}

// controllerLoad logs, for each of the manager's controllers, how many
// reconciles it ran, how long they took and waited in the queue on
// average, how many of the manager's writes lost a conflict, and its
// requests per node by method.
func (m *managerProcess) controllerLoad(b *testing.B, nodes int) {
	for _, c := range []string{"profile-node", "nodemaintenance", "profile-status"} {
		name := `controller="` + c + `"`
		n, err1 := m.sum("controller_runtime_reconcile_time_seconds_count", name)
		took, err2 := m.sum("controller_runtime_reconcile_time_seconds_sum", name)
		queued, err3 := m.sum("workqueue_queue_duration_seconds_count", `name="`+c+`"`)
		waited, err4 := m.sum("workqueue_queue_duration_seconds_sum", `name="`+c+`"`)
		if err := errors.Join(err1, err2, err3, err4); err != nil || n == 0 || queued == 0 {
			b.Logf("controller %s: no figures (%v)", c, err)
			continue
		}
		b.Logf("controller %s: %.0f reconciles, %.1f ms each on average, %.1f ms in the queue on average", c, n, took/n*1000, waited/queued*1000)
		var results []string
		for _, result := range []string{"success", "requeue", "requeue_after", "error"} {
			if k, err := m.sum("controller_runtime_reconcile_total", name, `result="`+result+`"`); err == nil && k > 0 {
				results = append(results, fmt.Sprintf("%s %.0f", result, k))
			}
		}
		b.Logf("controller %s: reconcile results: %s", c, strings.Join(results, ", "))
		b.Logf("controller %s: reconciles %s; queue waits %s", c,
			m.spread("controller_runtime_reconcile_time_seconds_bucket", name, n),
			m.spread("workqueue_queue_duration_seconds_bucket", `name="`+c+`"`, queued))
	}
	conflicts, err := m.sum("rest_client_requests_total", `code="409"`)
	if err == nil {
		b.Logf("manager: %.0f requests answered 409 Conflict", conflicts)
	}
	var methods []string
	for _, method := range []string{"GET", "PATCH", "PUT", "POST", "DELETE"} {
		if n, err := m.sum("rest_client_requests_total", `method="`+method+`"`); err == nil && n > 0 {
			methods = append(methods, fmt.Sprintf("%s %.2f", method, n/float64(nodes)))
		}
	}
	b.Logf("manager's own requests per node, by method (client-go's count; LIST and WATCH are both GET there): %s", strings.Join(methods, ", "))
}

// spread says what share of a histogram's n observations took under 10 ms,
// and what share over one and over ten seconds.
func (m *managerProcess) spread(bucket, label string, n float64) string {
	under := func(le string) float64 {
		v, err := m.sum(bucket, label, `le="`+le+`"`)
		if err != nil {
			return math.NaN()
		}
		return v
	}
	return fmt.Sprintf("%.0f %% under 10 ms, %.0f %% over 1 s, %.0f %% over 10 s",
		100*under("0.01")/n, 100*(n-under("1"))/n, 100*(n-under("10"))/n)
}

// rss reads the manager's resident set size now (VmRSS).
func (m *managerProcess) rss() (int64, error) { return m.status("VmRSS:") }

// peakRSS reads the manager's peak resident set size (VmHWM).
func (m *managerProcess) peakRSS() (int64, error) { return m.status("VmHWM:") }

// status reads a size in kB from the manager's /proc/PID/status.
func (m *managerProcess) status(field string) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", m.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/PID/status", field)
}
