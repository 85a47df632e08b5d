//go:build linux

package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/config"
	"github.com/pitstop-dev/pitstop/internal/install"
	"github.com/pitstop-dev/pitstop/internal/localcluster"
	"github.com/pitstop-dev/pitstop/internal/machineapi"
	"github.com/pitstop-dev/pitstop/internal/manager"
	"github.com/pitstop-dev/pitstop/internal/testutil/clustertest"
)

var (
	machineSetReplicas = flag.Int("machineset-replicas", 100, "how many machines BenchmarkMachineSetScaleUp scales its MachineSet to")
	machineSetRuns     = flag.Int("machineset-runs", 3, "how many times BenchmarkMachineSetScaleUp scales up; the median is reported")
)

const (
	// machineSetNS holds the benchmark's MachineSet and its Machines.
	machineSetNS   = "machines"
	machineSetName = "workers"
	// machineSetPhaseTimeout bounds one scale-up or scale-down.
	machineSetPhaseTimeout = 5 * time.Minute
	// machineSetProgress is how often a wait says what it still waits for.
	machineSetProgress = 30 * time.Second
)

// BenchmarkMachineSetScaleUp scales a MachineSet of kwok machines from 0 to
// -machineset-replicas, with pitstop's manager running the Machine API in
// this process, and times it until every Machine is Running and linked to
// a Ready Node that names it (nodelink), and the MachineSet counts them all
// ready. Between runs it scales the set back to 0 and waits until every
// Machine and its Node are gone. It reports the median of -machineset-runs
// scale-ups as scaleup-s, and machines per second at that median.
//
// The times are those at which the benchmark's watches (Machines, Nodes,
// the MachineSet) delivered the event that completed the condition; the
// condition is then verified once more against the API server.
func BenchmarkMachineSetScaleUp(b *testing.B) {
	n := *machineSetReplicas
	if n < 1 || *machineSetRuns < 1 {
		b.Fatalf("-machineset-replicas (%d) and -machineset-runs (%d) must be at least 1", n, *machineSetRuns)
	}
	ctx := b.Context()
	opts := localcluster.DefaultOptions()
	opts.ControlPlaneNodes, opts.Workers = 0, 1
	// On a loaded 2-core machine kwok renews the leases of a hundred new
	// nodes late, and with the default grace period the node lifecycle
	// controller keeps marking them NotReady: next to BenchmarkFleet, it
	// found most of the zone unhealthy every 45 s or so, and a scale-up
	// had not finished after 5 minutes. The benchmark measures the Machine
	// API, not the simulator keeping up.
	opts.NodeMonitorGracePeriod = 3 * time.Minute
	c, cl := startCluster(b, opts)
	machineCRDs, err := config.MachineAPICRDs()
	if err != nil {
		b.Fatal(err)
	}
	if err := install.CRDs(ctx, cl, machineCRDs); err != nil {
		b.Fatal(err)
	}
	mgrLog := &quietTB{TB: b}
	b.Cleanup(mgrLog.summary) // after the manager has stopped: cleanups run last first
	clustertest.StartManager(mgrLog, c.Config, cl, clustertest.Options{Tune: func(o *manager.Options) {
		o.MachineAPI, o.MachineProviders = true, []string{"kwok"}
	}})
	if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: machineSetNS}}); err != nil {
		b.Fatal(err)
	}
	if err := cl.Create(ctx, kwokWorkerSet(0)); err != nil {
		b.Fatal(err)
	}

	// The first Machine and NodeMaintenance the API server stores wait on
	// Retry-After while it sets up the new CRDs' storage, and the
	// manager's controllers may not have started yet: one machine up and
	// down first, not counted.
	warm, err := scaleUp(ctx, b, cl, 1)
	if err != nil {
		b.Fatalf("warm-up: %v", err)
	}
	if _, err := scaleDown(ctx, b, cl); err != nil {
		b.Fatalf("warm-up: %v", err)
	}
	b.Logf("warm-up: 1 machine up in %.2fs (not counted)", warm.took.Seconds())

	var runs, downs, toRunning []time.Duration
	for range b.N {
		for i := range *machineSetRuns {
			up, err := scaleUp(ctx, b, cl, n)
			if err != nil {
				b.Fatalf("run %d: %v", i+1, err)
			}
			down, err := scaleDown(ctx, b, cl)
			if err != nil {
				b.Fatalf("run %d: %v", i+1, err)
			}
			runs, downs = append(runs, up.took), append(downs, down)
			toRunning = append(toRunning, up.toRunning...)
			b.Logf("run %d: %d machines up in %.2fs (%.1f machines/s); last Machine created after %.2fs; machines and Nodes all ready after %.2fs, MachineSet status caught up %.0fms later; creation → Running median %.2fs, max %.2fs; down to 0, every Machine and Node gone, in %.2fs",
				i+1, n, up.took.Seconds(), float64(n)/up.took.Seconds(), up.lastCreated.Seconds(), up.machinesReady.Seconds(),
				ms(up.took-up.machinesReady), median(up.toRunning).Seconds(), percentile(up.toRunning, 1).Seconds(), down.Seconds())
		}
	}
	med := median(runs)
	b.Logf("%d machines: scale-up runs %s; median %.2fs, %.1f machines/s", n, formatRuns(runs), med.Seconds(), float64(n)/med.Seconds())
	b.Logf("%d machines: Machine creation → Running (watch events' arrival), median over all runs %.2fs, 90th percentile %.2fs; scale-downs %s",
		n, median(toRunning).Seconds(), percentile(toRunning, 0.9).Seconds(), formatRuns(downs))
	b.ReportMetric(med.Seconds(), "scaleup-s")
	b.ReportMetric(float64(n)/med.Seconds(), "machines/s")
	b.ReportMetric(0, "ns/op") // the wall time of the loop says nothing
}

// kwokWorkerSet is a MachineSet of kwok machines (as in the e2e test).
func kwokWorkerSet(replicas int32) *machinev1beta1.MachineSet {
	labels := map[string]string{"set": machineSetName}
	return &machinev1beta1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: machineSetNS, Name: machineSetName},
		Spec: machinev1beta1.MachineSetSpec{
			Replicas: ptr.To(replicas),
			Selector: metav1.LabelSelector{MatchLabels: labels},
			Template: machinev1beta1.MachineTemplateSpec{
				ObjectMeta: machinev1beta1.ObjectMeta{Labels: labels},
				Spec: machinev1beta1.MachineSpec{
					ObjectMeta: machinev1beta1.ObjectMeta{Labels: map[string]string{"pitstop.dev/pool": machineSetName}},
					ProviderSpec: machinev1beta1.ProviderSpec{Value: &runtime.RawExtension{Raw: []byte(
						`{"apiVersion": "pitstop.dev/v1alpha1", "kind": "KwokMachineProviderConfig", "zone": "zone-a", "instanceType": "kwok.small"}`)}},
				},
			},
		},
	}
}

// scaleUpResult is what one scale-up measured, from the scale request on.
type scaleUpResult struct {
	took time.Duration
	// lastCreated is when the last Machine's creation was seen.
	lastCreated time.Duration
	// machinesReady is when every Machine was Running and linked to a
	// Ready Node, whatever the MachineSet's status said.
	machinesReady time.Duration
	// toRunning is, for each Machine, the time from its creation to its
	// Running phase, as the watch events arrived.
	toRunning []time.Duration
}

// scaleUp scales the set, at 0, to n and waits until the n Machines are
// Running, linked to Ready Nodes, and counted ready by the set.
func scaleUp(ctx context.Context, b *testing.B, cl client.WithWatch, n int) (scaleUpResult, error) {
	var res scaleUpResult
	ctx, cancel := context.WithTimeout(ctx, machineSetPhaseTimeout)
	defer cancel()
	v, err := watchMachineSet(ctx, b, fmt.Sprintf("scaling up to %d", n), cl)
	if err != nil {
		return res, err
	}
	defer v.stop()
	if len(v.machines) != 0 {
		return res, fmt.Errorf("%d machines before scaling up from 0", len(v.machines))
	}
	start := time.Now()
	gen, err := scaleMachineSet(ctx, cl, n)
	if err != nil {
		return res, err
	}
	ready, err := v.until(start, func() string { return machinesShortfall(v.machineList(), v.nodes, n) })
	if err != nil {
		return res, fmt.Errorf("scaling up to %d: %w", n, err)
	}
	done, err := v.until(ready, func() string { return setShortfall(v.set, n, gen) })
	if err != nil {
		return res, fmt.Errorf("scaling up to %d: %w", n, err)
	}
	res.took, res.machinesReady = done.Sub(start), ready.Sub(start)
	for name, added := range v.added {
		res.lastCreated = max(res.lastCreated, added.Sub(start))
		if running, ok := v.running[name]; ok {
			res.toRunning = append(res.toRunning, running.Sub(added))
		}
	}
	if len(res.toRunning) != n {
		return res, fmt.Errorf("the watch saw %d machines created and turn Running, want %d", len(res.toRunning), n)
	}
	if err := verify(ctx, cl, func(machines []*machinev1beta1.Machine, nodes map[string]*corev1.Node, set *machinev1beta1.MachineSet) string {
		if s := machinesShortfall(machines, nodes, n); s != "" {
			return s
		}
		return setShortfall(set, n, gen)
	}); err != nil {
		return res, fmt.Errorf("scaled up to %d as the watches saw it, but: %w", n, err)
	}
	return res, nil
}

// scaleDown scales the set to 0 and waits until every Machine and every
// machine's Node is gone and the set counts none.
func scaleDown(ctx context.Context, b *testing.B, cl client.WithWatch) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, machineSetPhaseTimeout)
	defer cancel()
	v, err := watchMachineSet(ctx, b, "scaling down to 0", cl)
	if err != nil {
		return 0, err
	}
	defer v.stop()
	start := time.Now()
	gen, err := scaleMachineSet(ctx, cl, 0)
	if err != nil {
		return 0, err
	}
	check := func(machines []*machinev1beta1.Machine, nodes map[string]*corev1.Node, set *machinev1beta1.MachineSet) string {
		if s := goneShortfall(machines, nodes); s != "" {
			return s
		}
		return setShortfall(set, 0, gen)
	}
	done, err := v.until(start, func() string { return check(v.machineList(), v.nodes, v.set) })
	if err != nil {
		return 0, fmt.Errorf("scaling down to 0: %w", err)
	}
	if err := verify(ctx, cl, check); err != nil {
		return 0, fmt.Errorf("scaled down to 0 as the watches saw it, but: %w", err)
	}
	return done.Sub(start), nil
}

// scaleMachineSet sets the set's replicas and returns the generation that
// carries them.
func scaleMachineSet(ctx context.Context, cl client.Client, n int) (int64, error) {
	set := &machinev1beta1.MachineSet{ObjectMeta: metav1.ObjectMeta{Namespace: machineSetNS, Name: machineSetName}}
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, n))
	if err := cl.Patch(ctx, set, patch); err != nil {
		return 0, fmt.Errorf("scaling MachineSet %s to %d: %w", machineSetName, n, err)
	}
	return set.Generation, nil
}

// machinesShortfall says what keeps machines from being n Machines, none
// being deleted, each Running with a nodeRef to an existing Node that
// nodelink annotated with the Machine and that is Ready and schedulable;
// "" when nothing does.
func machinesShortfall(machines []*machinev1beta1.Machine, nodes map[string]*corev1.Node, n int) string {
	if len(machines) != n {
		return fmt.Sprintf("%d machines, want %d", len(machines), n)
	}
	var deleting, notRunning, unlinked, notReady int
	for _, m := range machines {
		switch {
		case !m.DeletionTimestamp.IsZero():
			deleting++
		case ptr.Deref(m.Status.Phase, "") != machinev1beta1.PhaseRunning || m.Status.NodeRef == nil:
			notRunning++
		default:
			node := nodes[m.Status.NodeRef.Name]
			switch {
			case node == nil || node.Annotations[machineapi.AnnotationMachine] != m.Namespace+"/"+m.Name:
				unlinked++
			case !localcluster.IsNodeSchedulable(node):
				notReady++
			}
		}
	}
	if deleting+notRunning+unlinked+notReady > 0 {
		return fmt.Sprintf("of %d machines, %d being deleted, %d not Running with a nodeRef, %d whose Node is missing or not annotated with it, %d whose Node is not Ready",
			n, deleting, notRunning, unlinked, notReady)
	}
	return ""
}

// goneShortfall says how many Machines and machines' Nodes are left.
func goneShortfall(machines []*machinev1beta1.Machine, nodes map[string]*corev1.Node) string {
	machineNodes := 0
	for _, node := range nodes {
		if _, ok := node.Annotations[pitstopv1alpha1.AnnotationKwokMachine]; ok {
			machineNodes++
		}
	}
	if len(machines) > 0 || machineNodes > 0 {
		return fmt.Sprintf("%d machines and %d machines' Nodes left", len(machines), machineNodes)
	}
	return ""
}

// setShortfall says what keeps the set's status from showing generation
// gen observed and n replicas, all ready.
func setShortfall(set *machinev1beta1.MachineSet, n int, gen int64) string {
	if set == nil {
		return "no MachineSet"
	}
	st := set.Status
	if st.ObservedGeneration < gen || st.Replicas != int32(n) || st.ReadyReplicas != int32(n) {
		return fmt.Sprintf("MachineSet status: generation %d observed (want %d), %d replicas, %d ready; want %d",
			st.ObservedGeneration, gen, st.Replicas, st.ReadyReplicas, n)
	}
	return ""
}

// verify reads the Machines, Nodes and the set from the API server and
// applies check to them.
func verify(ctx context.Context, cl client.Client, check func([]*machinev1beta1.Machine, map[string]*corev1.Node, *machinev1beta1.MachineSet) string) error {
	machineList := &machinev1beta1.MachineList{}
	if err := cl.List(ctx, machineList, client.InNamespace(machineSetNS)); err != nil {
		return err
	}
	nodeList := &corev1.NodeList{}
	if err := cl.List(ctx, nodeList); err != nil {
		return err
	}
	set := &machinev1beta1.MachineSet{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: machineSetNS, Name: machineSetName}, set); err != nil {
		return err
	}
	machines := make([]*machinev1beta1.Machine, len(machineList.Items))
	for i := range machineList.Items {
		machines[i] = &machineList.Items[i]
	}
	nodes := map[string]*corev1.Node{}
	for i := range nodeList.Items {
		nodes[nodeList.Items[i].Name] = &nodeList.Items[i]
	}
	if s := check(machines, nodes, set); s != "" {
		return errors.New(s)
	}
	return nil
}

// machineSetView is what the benchmark's watches have seen of the set, its
// namespace's Machines and every Node, kept up to date from a list and
// watches that resume where the API server ended them.
type machineSetView struct {
	machines map[string]*machinev1beta1.Machine
	nodes    map[string]*corev1.Node
	set      *machinev1beta1.MachineSet
	// added and running are when each Machine's creation and its first
	// Running phase were seen, for the Machines created while watching.
	added, running map[string]time.Time

	ctx                   context.Context
	b                     *testing.B
	doing                 string
	machineW, nodeW, setW *watchtools.RetryWatcher
}

// watchMachineSet lists the Machines, Nodes and the set, and watches them
// from there; doing says what for, in progress reports.
func watchMachineSet(ctx context.Context, b *testing.B, doing string, cl client.WithWatch) (*machineSetView, error) {
	v := &machineSetView{
		ctx: ctx, b: b, doing: doing, machines: map[string]*machinev1beta1.Machine{}, nodes: map[string]*corev1.Node{},
		added: map[string]time.Time{}, running: map[string]time.Time{},
	}
	machineList := &machinev1beta1.MachineList{}
	if err := cl.List(ctx, machineList, client.InNamespace(machineSetNS)); err != nil {
		return nil, err
	}
	for i := range machineList.Items {
		v.machines[machineList.Items[i].Name] = &machineList.Items[i]
	}
	nodeList := &corev1.NodeList{}
	if err := cl.List(ctx, nodeList); err != nil {
		return nil, err
	}
	for i := range nodeList.Items {
		v.nodes[nodeList.Items[i].Name] = &nodeList.Items[i]
	}
	setList := &machinev1beta1.MachineSetList{}
	if err := cl.List(ctx, setList, client.InNamespace(machineSetNS)); err != nil {
		return nil, err
	}
	for i := range setList.Items {
		if setList.Items[i].Name == machineSetName {
			v.set = &setList.Items[i]
		}
	}
	var err error
	if v.machineW, err = retryWatch(ctx, cl, &machinev1beta1.MachineList{}, machineList.ResourceVersion); err != nil {
		return nil, err
	}
	if v.nodeW, err = retryWatch(ctx, cl, &corev1.NodeList{}, nodeList.ResourceVersion); err != nil {
		v.stop()
		return nil, err
	}
	if v.setW, err = retryWatch(ctx, cl, &machinev1beta1.MachineSetList{}, setList.ResourceVersion); err != nil {
		v.stop()
		return nil, err
	}
	return v, nil
}

func (v *machineSetView) stop() {
	for _, w := range []*watchtools.RetryWatcher{v.machineW, v.nodeW, v.setW} {
		if w != nil {
			w.Stop()
		}
	}
}

func (v *machineSetView) machineList() []*machinev1beta1.Machine {
	out := make([]*machinev1beta1.Machine, 0, len(v.machines))
	for _, m := range v.machines {
		out = append(out, m)
	}
	return out
}

// until applies watch events until shortfall returns "", checking before
// the first and after each, and returns the time the last event arrived
// (since, if none was needed). Every machineSetProgress it logs what it
// still waits for; on timeout it says so in its error.
func (v *machineSetView) until(since time.Time, shortfall func() string) (time.Time, error) {
	at := since
	progress := time.NewTicker(machineSetProgress)
	defer progress.Stop()
	for {
		s := shortfall()
		if s == "" {
			return at, nil
		}
		var ev watch.Event
		var open bool
		select {
		case <-v.ctx.Done():
			return time.Time{}, fmt.Errorf("%w; still: %s", v.ctx.Err(), s)
		case <-progress.C:
			v.b.Logf("%s, %.0fs in: still %s", v.doing, time.Since(since).Seconds(), s)
			continue
		case ev, open = <-v.machineW.ResultChan():
		case ev, open = <-v.nodeW.ResultChan():
		case ev, open = <-v.setW.ResultChan():
		}
		at = time.Now()
		if !open {
			return time.Time{}, fmt.Errorf("a watch ended; still: %s", s)
		}
		if err := v.apply(ev, at); err != nil {
			return time.Time{}, err
		}
	}
}

// apply records one watch event that arrived at.
func (v *machineSetView) apply(ev watch.Event, at time.Time) error {
	switch ev.Type {
	case watch.Error:
		return fmt.Errorf("watch: %w", apierrors.FromObject(ev.Object))
	case watch.Bookmark:
		return nil
	}
	gone := ev.Type == watch.Deleted
	switch o := ev.Object.(type) {
	case *machinev1beta1.Machine:
		if o.Namespace != machineSetNS {
			return nil
		}
		if gone {
			delete(v.machines, o.Name)
			return nil
		}
		if _, seen := v.added[o.Name]; !seen && ev.Type == watch.Added {
			v.added[o.Name] = at
		}
		if _, seen := v.running[o.Name]; !seen && ptr.Deref(o.Status.Phase, "") == machinev1beta1.PhaseRunning {
			v.running[o.Name] = at
		}
		v.machines[o.Name] = o
	case *corev1.Node:
		if gone {
			delete(v.nodes, o.Name)
		} else {
			v.nodes[o.Name] = o
		}
	case *machinev1beta1.MachineSet:
		if o.Namespace != machineSetNS || o.Name != machineSetName {
			return nil
		}
		if gone {
			v.set = nil
		} else {
			v.set = o
		}
	}
	return nil
}

// quietTB hands the manager's log to the benchmark only for its errors
// (funcr writes them with an "error" key): at Info level it logs every
// Machine it creates and deletes, hundreds of lines a run. It counts the
// rest.
type quietTB struct {
	testing.TB
	mu         sync.Mutex
	errorLines int
	infoLines  atomic.Int64
}

// maxManagerErrors is how many of the manager's error lines are shown.
const maxManagerErrors = 50

func (q *quietTB) Log(args ...any) {
	line := fmt.Sprint(args...)
	if !strings.Contains(line, `"error"=`) {
		q.infoLines.Add(1)
		return
	}
	q.mu.Lock()
	q.errorLines++
	show := q.errorLines <= maxManagerErrors
	q.mu.Unlock()
	if show {
		q.TB.Log(append([]any{"manager:"}, args...)...)
	}
}

func (q *quietTB) summary() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.TB.Logf("manager log: %d error lines (the first %d shown), %d other lines not shown", q.errorLines, min(q.errorLines, maxManagerErrors), q.infoLines.Load())
}
