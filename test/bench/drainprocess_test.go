//go:build linux

package bench

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	kubectldrain "k8s.io/kubectl/pkg/drain"

	"github.com/pitstop-dev/pitstop/internal/localcluster"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

var (
	processDrainRounds   = flag.Int("process-drain-rounds", 5, "how many rounds BenchmarkDrain110PodsOwnProcess runs: each a drain by a pitstop just started, one by the same pitstop again, one by the kubectl drain library, and one by the minimal drainer (the floor)")
	processDrainVariants = flag.String("process-drain-variants", "", "BenchmarkDrain110PodsOwnProcess: flag sets, separated by ';', each run as its own pitstop in every round, side by side (default: one, pitstop's defaults)")
	processDrainSettle   = flag.Duration("process-drain-settle", 0, "BenchmarkDrain110PodsOwnProcess: how long to wait after the manager is ready before its first drain")
	processDrainCPU      = flag.String("process-drain-cpuprofile", "", "BenchmarkDrain110PodsOwnProcess: write a CPU profile of the manager during each of its drains to this path, suffixed with the round and drain")
)

// cpuProfile profiles the manager's CPU for the next span, in the
// background, into path; wait waits for it.
func (m *managerProcess) cpuProfile(b *testing.B, path string, span time.Duration) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := http.Get(fmt.Sprintf("%sprofile?seconds=%d", m.pprof, int(span.Seconds())))
		if err != nil {
			b.Errorf("CPU profile: %v", err)
			return
		}
		defer resp.Body.Close()
		out, err := os.Create(path)
		if err != nil {
			b.Errorf("CPU profile: %v", err)
			return
		}
		defer out.Close()
		_, _ = io.Copy(out, resp.Body)
	}()
	return func() { <-done }
}

// BenchmarkDrain110PodsOwnProcess measures the drain as a user meets it:
// pitstop runs as its own process, `pitstop run` as docs/manager.md starts
// it outside a cluster (leader election off, its webhook reached by URL),
// on a control plane whose controller-manager and scheduler run at their
// defaults (localcluster.Options.DefaultClientLimits), 4 workers of 120
// pods. Each round:
//   - fills a worker with a 110-replica Deployment, starts pitstop, waits
//     until it is ready, and times a NodeMaintenance from just before its
//     create to its Drained condition seen True through a watch: the first
//     drain after a start ("pitstop, first");
//   - fills the next worker and times a second NodeMaintenance of the same
//     process ("pitstop, again"), then stops it;
//   - fills the next worker and drains it with the kubectl drain library,
//     no client-side rate limit, from the read of the node for the cordon
//     to RunNodeDrain's return;
//   - fills the next worker and drains it with the minimal drainer
//     (floorDrain: one cordon patch, one list, every eviction at once, a
//     watch until the last pod is gone), from just before the cordon to
//     its watch seeing the last pod gone: the floor, what the control plane
//     itself takes to drain the node.
//
// Each drain's node is restored before the next fill, so the 4 workers
// take the round's drains in turn, starting one further on each round. It reports the medians, their ratios to
// the library's (the design's target is at most 0.5) and to the floor's,
// and where the time goes in each.
func BenchmarkDrain110PodsOwnProcess(b *testing.B) {
	opts := localcluster.DefaultOptions()
	opts.ControlPlaneNodes, opts.Workers, opts.PodsPerNode = 0, 4, 120
	opts.DefaultClientLimits = true
	c, cl := startCluster(b, opts)
	ctx := b.Context()
	for _, ns := range []string{benchNamespace, managerNS} {
		if _, err := c.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	var workers []string
	for _, name := range c.NodeNames() {
		if strings.HasPrefix(name, "worker-") {
			workers = append(workers, name)
		}
	}
	e := &pitstopEnv{cluster: c, client: cl, workers: workers}
	binary, err := filepath.Abs(*pitstopBinary)
	if err != nil {
		b.Fatal(err)
	}

	libRequests := newRequestCounter()
	libConfig := rest.CopyConfig(c.Config)
	libConfig.Wrap(libRequests.wrap)
	libClient, err := kubernetes.NewForConfig(libConfig)
	if err != nil {
		b.Fatal(err)
	}
	helper := &kubectldrain.Helper{
		Ctx: ctx, Client: libClient, Force: true, IgnoreAllDaemonSets: true, DeleteEmptyDirData: true,
		GracePeriodSeconds: -1, Timeout: drainTimeout, Out: io.Discard, ErrOut: io.Discard,
	}
	floorClient, floorRequests, err := countedClientset(c.Config)
	if err != nil {
		b.Fatal(err)
	}

	var runs []drainRun
	var ready []time.Duration
	next := 0
	fill := func(round int, what string) (*corev1.PodList, *corev1.Node, string) {
		b.Helper()
		node := workers[next%len(workers)]
		next++
		deployment := fmt.Sprintf("fill-%d-%s", round, what)
		pods, target, err := e.fill(ctx, node, deployment)
		if err != nil {
			b.Fatalf("round %d (%s): %v", round, what, err)
		}
		return pods, target, deployment
	}
	var manager *managerProcess // the running one, if any
	cpuNow := func() cpuUsage {
		pids, names := append(c.PIDs(), os.Getpid()), map[int]string{os.Getpid(): "bench-process"}
		if manager != nil {
			pids, names[manager.cmd.Process.Pid] = append(pids, manager.cmd.Process.Pid), "pitstop"
		}
		return processesCPU(pids, names)
	}
	record := func(round int, run drainRun, deployment string) {
		b.Helper()
		runs = append(runs, run)
		b.Logf("round %d %s %s: %.3fs (%s); %d requests, API server connections %v; CPU meanwhile: %s", round, run.drainer, run.node, run.took.Seconds(), run.phases, run.requests.total(), run.connections, run.cpu)
		if err := e.emptyNamespace(ctx, deployment); err != nil {
			b.Fatalf("round %d: cleaning up: %v", round, err)
		}
	}
	variants := []string{""}
	if *processDrainVariants != "" {
		variants = strings.Split(*processDrainVariants, ";")
	}
	label := func(variant, what string) string {
		if variant == "" {
			return "pitstop, " + what
		}
		return "pitstop " + variant + ", " + what
	}
	for range b.N {
		for round := 1; round <= *processDrainRounds; round++ {
			for _, variant := range variants {
				pods, target, deployment := fill(round, "first")
				m := runManagerProcess(b, binary, c.KubeconfigPath, userManagerRun(b, strings.Fields(variant)))
				manager = m
				ready = append(ready, m.readyAfter)
				time.Sleep(*processDrainSettle)
				counted := func() requestCounts {
					n, err := m.requests()
					if err != nil {
						b.Fatalf("reading the manager's metrics: %v", err)
					}
					return requestCounts{"all": int(n)}
				}
				for i, what := range []string{"first", "again"} {
					if i > 0 {
						pods, target, deployment = fill(round, "again")
					}
					name := fmt.Sprintf("drain-%d-%d", round, i)
					cpuBefore := cpuNow()
					profiled := func() {}
					if *processDrainCPU != "" {
						profiled = m.cpuProfile(b, fmt.Sprintf("%s.%d-%d", *processDrainCPU, round, i), 3*time.Second)
					}
					connsBefore := apiConnections(m.cmd.Process.Pid, c.Config.Host)
					faultsBefore := pageFaults(m.cmd.Process.Pid)
					run, err := e.drainWithPitstop(ctx, target, pods, name, counted)
					profiled()
					faults := pageFaults(m.cmd.Process.Pid)
					b.Logf("round %d %s: the manager's page faults during the drain: %d minor, %d major", round, label(variant, what), faults[0]-faultsBefore[0], faults[1]-faultsBefore[1])
					if err != nil {
						b.Fatalf("round %d (%s): %v", round, label(variant, what), err)
					}
					run.cpu = cpuNow().since(cpuBefore)
					run.drainer = label(variant, what)
					run.connections = [2]int{connsBefore, apiConnections(m.cmd.Process.Pid, c.Config.Host)}
					record(round, run, deployment)
					if err := e.deleteNodeMaintenance(ctx, name); err != nil {
						b.Fatalf("round %d: restoring %s: %v", round, target.Name, err)
					}
				}
				m.stop()
				manager = nil
			}

			pods, target, deployment := fill(round, "library")
			cpuBefore := cpuNow()
			run, err := e.drainWithLibrary(ctx, helper, libRequests, target, pods)
			if err != nil {
				b.Fatalf("round %d (library): %v", round, err)
			}
			run.cpu = cpuNow().since(cpuBefore)
			record(round, run, deployment)
			if err := e.uncordon(ctx, helper, target.Name); err != nil {
				b.Fatalf("round %d: uncordoning %s: %v", round, target.Name, err)
			}

			pods, target, deployment = fill(round, "floor")
			cpuBefore = cpuNow()
			run, err = e.drainWithFloor(ctx, floorClient, floorRequests, target, pods)
			if err != nil {
				b.Fatalf("round %d (floor): %v", round, err)
			}
			run.cpu = cpuNow().since(cpuBefore)
			record(round, run, deployment)
			b.Logf("round %d floor requests: %s", round, run.requests)
			if err := e.setUnschedulable(ctx, target.Name, false); err != nil {
				b.Fatalf("round %d: uncordoning %s: %v", round, target.Name, err)
			}
			next++ // 4 drains a round on 4 workers: shift, so that no drainer keeps one worker
		}
	}

	took := map[string][]time.Duration{}
	for _, r := range runs {
		took[r.drainer] = append(took[r.drainer], r.took)
	}
	library, floor := median(took["library"]), median(took["floor"])
	b.ReportMetric(library.Seconds(), "library-s")
	b.ReportMetric(floor.Seconds(), "floor-s")
	b.ReportMetric(library.Seconds()/floor.Seconds(), "library/floor")
	b.ReportMetric(0, "ns/op")
	b.Logf("pitstop ready after start: %s (median %.2fs)", formatRuns(ready), median(ready).Seconds())
	for _, variant := range variants {
		first, again := median(took[label(variant, "first")]), median(took[label(variant, "again")])
		if variant == "" { // the figures make bench reports
			b.ReportMetric(first.Seconds(), "first-s")
			b.ReportMetric(again.Seconds(), "again-s")
			b.ReportMetric(first.Seconds()/library.Seconds(), "first/library")
			b.ReportMetric(again.Seconds()/library.Seconds(), "again/library")
			b.ReportMetric(first.Seconds()/floor.Seconds(), "pitstop-first/floor")
			b.ReportMetric(again.Seconds()/floor.Seconds(), "pitstop-again/floor")
		}
		for _, what := range []string{"first", "again"} {
			drainer := label(variant, what)
			b.Logf("%s runs: %s (median %.3fs); median phases: %s", drainer, formatRuns(took[drainer]), median(took[drainer]).Seconds(), medianPhases(runs, drainer))
		}
		pitstop := label(variant, "")[:len(label(variant, ""))-2]
		b.Logf("%s/library: first drain after a start %.2f, again %.2f (target ≤ 0.5)", pitstop, first.Seconds()/library.Seconds(), again.Seconds()/library.Seconds())
		b.Logf("%s/floor: first drain after a start %.2f, again %.2f", pitstop, first.Seconds()/floor.Seconds(), again.Seconds()/floor.Seconds())
	}
	b.Logf("library runs: %s (median %.3fs); median phases: %s", formatRuns(took["library"]), library.Seconds(), medianPhases(runs, "library"))
	b.Logf("floor runs: %s (median %.3fs); median phases: %s", formatRuns(took["floor"]), floor.Seconds(), medianPhases(runs, "floor"))
	b.Logf("library/floor: %.2f", library.Seconds()/floor.Seconds())
}

// userManagerRun runs the manager as docs/manager.md says to run it
// outside a cluster: leader election off, its admission webhook served on
// a port of this machine that the API server reaches by URL; -manager-flags
// and the variant's flags are added.
func userManagerRun(b *testing.B, variant []string) managerRun {
	port := testutil.FreePort(b)
	return managerRun{flags: append([]string{
		"--webhook-port=" + strconv.Itoa(port),
		"--webhook-url=https://127.0.0.1:" + strconv.Itoa(port),
		"--webhook-cert-dir=" + b.TempDir(),
		"--log-level=info",
	}, append(strings.Fields(*managerFlags), variant...)...)}
}

// apiConnections counts the TCP connections process pid holds to the API
// server at host (https://127.0.0.1:port), as ss shows them; -1 when ss
// cannot tell.
func apiConnections(pid int, host string) int {
	u, err := url.Parse(host)
	if err != nil {
		return -1
	}
	out, err := exec.Command("ss", "-tnpH", "state", "established", "dst", u.Host).Output()
	if err != nil {
		return -1
	}
	n := 0
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, fmt.Sprintf("pid=%d,", pid)) {
			n++
		}
	}
	return n
}

// pageFaults are the minor and major page faults of process pid so far,
// from /proc; zero where it cannot tell.
func pageFaults(pid int) [2]int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return [2]int64{}
	}
	// The fields after the command's closing parenthesis: state is 3rd,
	// minflt 10th and majflt 12th of the whole line.
	fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	if len(fields) < 10 {
		return [2]int64{}
	}
	minor, _ := strconv.ParseInt(fields[7], 10, 64)
	major, _ := strconv.ParseInt(fields[9], 10, 64)
	return [2]int64{minor, major}
}
