//go:build fault && linux

package fault

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/config"
	"github.com/pitstop-dev/pitstop/internal/drain"
	"github.com/pitstop-dev/pitstop/internal/install"
	"github.com/pitstop-dev/pitstop/internal/localcluster"
	"github.com/pitstop-dev/pitstop/internal/scheme"
	"github.com/pitstop-dev/pitstop/internal/testutil"
	"github.com/pitstop-dev/pitstop/internal/testutil/faultproxy"
)

// form is the campaign's form: brief; ci, the strikes make test runs
// (make fault-ci); short; or long (make fault): longer outages, more
// kills, more nodes.
var form = flag.String("form", "brief", "the campaign's form: brief, ci (make test's), short or long (make fault's default)")

// prebuilt is a pitstop binary to strike instead of building this tree's
// (to run the campaign against a release, or a build with a check taken
// out to see the campaign catch it).
var prebuilt = flag.String("pitstop", "", "a pitstop binary to run instead of building ./cmd/pitstop")

// The rig's fixed parts.
const (
	namespace  = "pitstop-system"
	leaderID   = "pitstop-fault"
	annotation = "fault.example.com/reboot"
	budget     = 2
	profile    = "rolling"
)

var (
	cluster *localcluster.Cluster
	admin   client.WithWatch
	binary  string // pitstop, built for the campaign
)

// TestMain builds pitstop and starts one local cluster for every fault
// test: its workers carry the sample workloads, each Deployment behind a
// PodDisruptionBudget.
func TestMain(m *testing.M) {
	flag.Parse()
	if !slices.Contains([]string{"brief", "ci", "short", "long"}, *form) {
		fmt.Fprintf(os.Stderr, "-form=%s: want brief, ci, short or long\n", *form)
		os.Exit(2)
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "pitstop-fault-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	root, ok := localcluster.RepoRoot()
	if !ok {
		fmt.Fprintln(os.Stderr, "the fault tests run from pitstop's repository")
		return 1
	}
	binary = filepath.Join(dir, "pitstop")
	if *prebuilt != "" {
		binary = *prebuilt
	} else {
		build := exec.Command("go", "build", "-o", binary, "./cmd/pitstop")
		build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building pitstop:", err)
			return 1
		}
	}
	ctx := context.Background()
	opts := localcluster.DefaultOptions()
	// Three control-plane nodes (tainted, so only the workloads that
	// tolerate it run there), for the strikes on invariant 4; their zones
	// are the workers' (zone-a, zone-b, zone-c, round-robin).
	opts.ControlPlaneNodes = 3
	opts.Workers = workers()
	// The node lifecycle controller must not take the outages the tests
	// cause (the API server stopped for a minute) for dead kubelets: it
	// would mark every pod not ready, which no drain did.
	opts.NodeMonitorGracePeriod = 10 * time.Minute
	opts.KeepDir = os.Getenv("PITSTOP_FAULT_KEEP_LOGS") != ""
	// A control-plane component that exits on its own in an outage is
	// started again, as the kubelet restarts a static pod; each test says
	// how many were.
	opts.RestartExited = true
	// The audit log shows every pod pitstop removed, and how.
	opts.AuditPodRemovals = true
	cluster, err = localcluster.Start(ctx, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cluster.Stop()
	admin, err = client.NewWithWatch(cluster.Config, client.Options{Scheme: scheme.New()})
	if err == nil {
		err = setUp(ctx)
	}
	if err == nil {
		err = cluster.Apply(ctx, workloads())
	}
	if err == nil {
		err = cluster.AwaitWorkloads(ctx, localcluster.SampleNamespace)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// workloads are the sample workloads with budgets that allow two
// disruptions at once where the samples allow one: drains still wait on
// them, but an eviction cut off by a fault (which its budget counts as a
// disruption for two minutes, see docs/safety.md) does not stop every
// drain for that long. Two more have no slack at all, each behind a
// PodDisruptionBudget that allows exactly one disruption: tightApp, one
// pod a worker (spread by the scheduler, so every drain evicts one and two
// drains at once contend for the one disruption), and controlPlaneApp, one
// pod on each control-plane node (required anti-affinity, so an evicted
// pod waits for its node to come back, and the next control-plane drain
// waits for it).
func workloads() localcluster.Workloads {
	w := localcluster.SampleWorkloads()
	one := intstr.FromInt32(1)
	tight := localcluster.Deployment(localcluster.SampleNamespace, tightApp, int32(workers()))
	tight.Spec.Template.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.ScheduleAnyway,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": tightApp}},
	}}
	cp := localcluster.Deployment(localcluster.SampleNamespace, controlPlaneApp, 3)
	cp.Spec.Template.Spec.NodeSelector = map[string]string{localcluster.LabelControlPlane: ""}
	cp.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: localcluster.LabelControlPlane, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	cp.Spec.Template.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey:   corev1.LabelHostname,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": controlPlaneApp}},
		}},
	}}
	w.Deployments = append(w.Deployments, tight, cp)
	w.PDBs = append(w.PDBs,
		localcluster.PDB(localcluster.SampleNamespace, tightApp, &one, nil),
		localcluster.PDB(localcluster.SampleNamespace, controlPlaneApp, &one, nil))
	two := intstr.FromInt32(2)
	for _, d := range w.Deployments {
		if d.Name == "web" {
			d.Spec.Replicas = ptr.To[int32](12)
		}
	}
	for _, s := range w.StatefulSets {
		s.Spec.Replicas = ptr.To[int32](4)
	}
	for _, p := range w.PDBs {
		if p.Spec.MaxUnavailable != nil && p.Name != tightApp && p.Name != controlPlaneApp {
			p.Spec.MaxUnavailable = &two
		}
	}
	return w
}

// The workloads whose PodDisruptionBudgets allow exactly one disruption.
const (
	tightApp        = "tight"
	controlPlaneApp = "control-plane-agent"
)

// maintenanceTime is how long a node of a rolling run stays in
// maintenance: 2 s, 30 s in the long form, whose 20 leader kills must land
// while nodes are still to go.
func maintenanceTime() time.Duration { return pick(2*time.Second, 2*time.Second, 30*time.Second) }

// workers is how many nodes a rolling run maintains.
func workers() int {
	return pick(4, 4, 8)
}

// setUp installs the CRDs (pitstop's, and the Machine API's for the
// MachineSet TestFaultSurgeWorldChanges surges) and pitstop's namespace.
func setUp(ctx context.Context) error {
	crds, err := config.CRDs()
	if err != nil {
		return err
	}
	machineCRDs, err := config.MachineAPICRDs()
	if err != nil {
		return err
	}
	if err := install.CRDs(ctx, admin, append(crds, machineCRDs...)); err != nil {
		return err
	}
	return admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})
}

// rig is one fault test: two pitstop processes with leader election, each
// reaching the API server through its own proxy and serving pitstop's
// validating webhook, which the API server calls; a receiver of their
// notifications; and the invariant watcher.
type rig struct {
	t        *testing.T
	opts     rigOptions
	managers []*pitstop
	// cordonedByAdmin are the nodes an administrator cordoned during the
	// test: they must end cordoned (invariant 3).
	cordonedByAdmin []string
	notes           *receiver
	watch           *watcher
	started         time.Time
	// restartsBefore is cluster.Restarts() when the test began.
	restartsBefore map[string]int
	// stopKeeping ends keepRunning.
	stopKeeping context.CancelFunc
	cleaned     bool
}

// rigOptions change the rig for one strike; the zero value is the rolling
// maintenance of every worker by one profile.
//
// A `pitstop run` process's clock cannot be skewed: it has no flag or
// environment variable for a clock offset. TestFaultClockAhead and
// TestFaultSkewedSlotClocks run their managers in this process instead
// (startInProcess), with the clock every controller judges by
// (manager.Options.Clock) ahead or behind.
type rigOptions struct {
	// nodes are the nodes the test maintains (every worker by default).
	nodes []string
	// profiles are the profiles that maintain them (rollingProfile by
	// default), and bounds the budgets the watcher holds them to (at most
	// budget workers at once by default).
	profiles []*pitstopv1alpha1.MaintenanceProfile
	bounds   []bound
	// binaries are the pitstop builds each manager starts from (the
	// campaign's build by default).
	binaries []string
	// args are more flags for every manager.
	args []string
}

// newRig waits until the workloads have settled after the test before,
// then starts the watcher, the receiver and two pitstop processes.
func newRig(t *testing.T) *rig { return newRigWith(t, rigOptions{}) }

// newRigWith is newRig with opts.
func newRigWith(t *testing.T, opts rigOptions) *rig {
	t.Helper()
	if opts.nodes == nil {
		opts.nodes = workerNames()
	}
	if opts.profiles == nil {
		opts.profiles = []*pitstopv1alpha1.MaintenanceProfile{rollingProfile()}
	}
	if opts.bounds == nil {
		opts.bounds = []bound{{name: "profile " + profile, selects: isWorker, max: budget}}
	}
	awaitSettled(t)
	r := &rig{t: t, opts: opts, notes: newReceiver(t), started: time.Now(), restartsBefore: cluster.Restarts()}
	r.watch = watchInvariants(t, opts.nodes, opts.bounds)
	for i := range 2 {
		bin := binary
		if i < len(opts.binaries) {
			bin = opts.binaries[i]
		}
		r.managers = append(r.managers, startPitstop(t, fmt.Sprintf("pitstop-%d", i), bin, opts.args))
	}
	awaitWebhook(t)
	ctx, cancel := context.WithCancel(context.Background())
	r.stopKeeping = cancel
	r.keepRunning(ctx)
	t.Cleanup(r.cleanUp)
	return r
}

// awaitSettled waits until every pod of the sample workloads is healthy and
// no PodDisruptionBudget counts a pod as being evicted, so that a test does
// not start in the aftermath of the one before (docs/safety.md). One count
// is let pass: a StatefulSet's pod evicted and created again under its
// name, Ready, which its budget goes on counting as being evicted (so not
// healthy) for two minutes after the eviction, as it does for the pod that
// was evicted; waiting it out would cost every test two minutes.
func awaitSettled(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	testutil.Eventually(t, 3*time.Minute, 500*time.Millisecond, func() error {
		list := &policyv1.PodDisruptionBudgetList{}
		if err := admin.List(ctx, list, client.InNamespace(localcluster.SampleNamespace)); err != nil {
			return err
		}
		pods := &corev1.PodList{}
		if err := admin.List(ctx, pods, client.InNamespace(localcluster.SampleNamespace)); err != nil {
			return err
		}
		for _, p := range list.Items {
			recreated := int32(0)
			for name, at := range p.Status.DisruptedPods {
				i := slices.IndexFunc(pods.Items, func(pod corev1.Pod) bool { return pod.Name == name })
				if i < 0 || !pods.Items[i].CreationTimestamp.After(at.Time) || pods.Items[i].DeletionTimestamp != nil || !podReady(&pods.Items[i]) {
					return fmt.Errorf("the workloads have not settled after the test before: %s (pod %s counted as being evicted)", drain.PDBMessage(&p), name)
				}
				recreated++
			}
			if p.Status.ObservedGeneration < p.Generation || p.Status.CurrentHealthy+recreated < p.Status.ExpectedPods {
				return fmt.Errorf("the workloads have not settled after the test before: %s", drain.PDBMessage(&p))
			}
		}
		return nil
	})
}

func podReady(p *corev1.Pod) bool {
	return slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
	})
}

// isWorker selects the workers.
func isWorker(n *corev1.Node) bool {
	_, ok := n.Labels[localcluster.LabelWorker]
	return ok
}

// awaitWebhook waits until the API server calls pitstop's validating
// webhook: a NodeMaintenance for a node that does not exist, which the API
// server's own validation lets through, is refused.
func awaitWebhook(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	testutil.Eventually(t, time.Minute, 200*time.Millisecond, func() error {
		nm := &pitstopv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "fault-webhook-probe"},
			Spec: pitstopv1alpha1.NodeMaintenanceSpec{NodeName: "no-such-node", Reason: "is the webhook on?"}}
		err := admin.Create(ctx, nm)
		if err == nil {
			_ = admin.Delete(ctx, nm)
			return fmt.Errorf("a NodeMaintenance for a missing node was admitted: the API server does not call pitstop's webhook yet")
		}
		if !strings.Contains(err.Error(), "does not exist") {
			return err
		}
		return nil
	})
}

// pitstop is one `pitstop run` process, started again after it is killed
// or exits, as its pod's container would be. It serves the validating
// webhook at a port of this machine, which it registers with the API
// server itself (--webhook-url: a ValidatingWebhookConfiguration of its
// own, failing open, with the serving certificate pitstop manages in a
// Secret both managers share).
type pitstop struct {
	t      *testing.T
	name   string
	proxy  *faultproxy.Proxy
	binary string
	args   []string
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	log    *os.File
	starts int
	// led is when the running process last said it acquired the leader
	// Lease; zero while it has not.
	led time.Time
}

func startPitstop(t *testing.T, name, bin string, extra []string) *pitstop {
	t.Helper()
	target := strings.TrimPrefix(cluster.Config.Host, "https://")
	proxy, err := faultproxy.Start(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := faultproxy.RewriteKubeconfig(cluster.KubeconfigPath, kubeconfig, proxy.Addr()); err != nil {
		t.Fatal(err)
	}
	logDir, err := os.MkdirTemp("", "pitstop-fault-"+name+"-")
	if err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(logDir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	port := testutil.FreePort(t)
	p := &pitstop{t: t, name: name, proxy: proxy, log: log, binary: bin, args: []string{
		"run",
		"--kubeconfig=" + kubeconfig,
		"--metrics-bind-address=0",
		"--health-probe-bind-address=0",
		"--dashboard-addr=0",
		fmt.Sprintf("--webhook-port=%d", port),
		fmt.Sprintf("--webhook-url=https://127.0.0.1:%d", port),
		"--webhook-cert-dir=" + t.TempDir(),
		"--webhook-configuration=" + name,
		"--leader-elect=true",
		"--leader-election-namespace=" + namespace,
		"--leader-election-id=" + leaderID,
		"--leader-election-lease-duration=4s",
		"--leader-election-renew-deadline=3s",
		"--leader-election-retry-period=500ms",
	}}
	p.args = append(p.args, extra...)
	p.start()
	t.Cleanup(func() {
		p.signal(syscall.SIGTERM)
		if t.Failed() || os.Getenv("PITSTOP_FAULT_KEEP_LOGS") != "" {
			t.Logf("%s's log is kept in %s", name, log.Name())
			return
		}
		_ = os.RemoveAll(logDir)
	})
	return p
}

// start runs the process, its output in its log, watching it for the
// leader election's "successfully acquired lease".
func (p *pitstop) start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.startLocked()
}

func (p *pitstop) startLocked() {
	cmd := exec.Command(p.binary, p.args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		p.t.Errorf("starting %s: %v", p.name, err)
		return
	}
	cmd.Stderr = cmd.Stdout
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		p.t.Errorf("starting %s: %v", p.name, err)
		return
	}
	p.starts++
	p.led = time.Time{}
	exited := make(chan struct{})
	p.cmd, p.exited = cmd, exited
	go func() {
		s := bufio.NewScanner(out)
		s.Buffer(make([]byte, 1<<20), 1<<20)
		for s.Scan() {
			line := s.Text()
			fmt.Fprintln(p.log, line)
			if strings.Contains(strings.ToLower(line), "successfully acquired lease") {
				p.mu.Lock()
				if p.cmd == cmd {
					p.led = time.Now()
				}
				p.mu.Unlock()
			}
		}
		_ = cmd.Wait()
		close(exited)
	}()
}

// kill sends SIGKILL, waits for the process to go and starts it again.
func (p *pitstop) kill() {
	p.signal(syscall.SIGKILL)
	p.restartIfExited()
}

// replace stops the process as its pod would be stopped in a rolling
// update (SIGTERM) and starts bin in its place.
func (p *pitstop) replace(bin string) {
	p.mu.Lock()
	p.binary = bin
	p.mu.Unlock()
	p.signal(syscall.SIGTERM)
	p.restartIfExited()
}

// restartIfExited starts the process again if it has exited.
func (p *pitstop) restartIfExited() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.exited:
		p.startLocked()
		return true
	default:
		return false
	}
}

func (p *pitstop) signal(sig syscall.Signal) {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// leader is the running process that acquired the leader Lease last, or
// nil.
func (r *rig) leader() *pitstop {
	var leader *pitstop
	var latest time.Time
	for _, p := range r.managers {
		p.mu.Lock()
		led, exited := p.led, p.exited
		p.mu.Unlock()
		select {
		case <-exited:
			continue
		default:
		}
		if !led.IsZero() && led.After(latest) {
			leader, latest = p, led
		}
	}
	return leader
}

// awaitLeader waits until a process leads.
func (r *rig) awaitLeader() *pitstop {
	r.t.Helper()
	var leader *pitstop
	testutil.Eventually(r.t, time.Minute, 100*time.Millisecond, func() error {
		if leader = r.leader(); leader == nil {
			return fmt.Errorf("no pitstop process leads")
		}
		return nil
	})
	return leader
}

// keepRunning restarts every process that exited (one that lost its lease
// exits, as its container would be restarted) until ctx ends.
func (r *rig) keepRunning(ctx context.Context) {
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(500 * time.Millisecond):
			}
			for _, p := range r.managers {
				if p.restartIfExited() {
					r.t.Logf("%s exited and was started again", p.name)
				}
			}
		}
	}()
}

// maintainAll creates the test's profiles and asks for maintenance of
// every node it maintains.
func (r *rig) maintainAll() {
	r.t.Helper()
	ctx := context.Background()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "fault-notify", Labels: map[string]string{pitstopv1alpha1.LabelUsableByProfiles: "true"}},
		StringData: map[string]string{"url": r.notes.url},
	}
	_ = admin.Delete(ctx, secret)
	testutil.Eventually(r.t, 10*time.Second, 100*time.Millisecond, func() error { return admin.Create(ctx, secret.DeepCopy()) })
	for _, p := range r.opts.profiles {
		_ = admin.Delete(ctx, p.DeepCopy())
		testutil.Eventually(r.t, 30*time.Second, 200*time.Millisecond, func() error { return admin.Create(ctx, p.DeepCopy()) })
	}
	for _, n := range r.opts.nodes {
		patch := []byte(`{"metadata":{"annotations":{"` + annotation + `":"true"}}}`)
		if err := admin.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
			r.t.Fatal(err)
		}
	}
}

// rollingProfile maintains every worker that carries the annotation, at
// most budget at once: drain, wait, restore. Entering maintenance sends a
// "started" notification.
func rollingProfile() *pitstopv1alpha1.MaintenanceProfile {
	return profileFor(profile, map[string]string{localcluster.LabelWorker: ""}, pitstopv1alpha1.MaxMaintenanceCheck{Max: budget})
}

// profileFor is rollingProfile's maintenance, named name, of the nodes
// labelled selector, with the budget limit.
func profileFor(name string, selector map[string]string, limit pitstopv1alpha1.MaxMaintenanceCheck) *pitstopv1alpha1.MaintenanceProfile {
	return &pitstopv1alpha1.MaintenanceProfile{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: pitstopv1alpha1.MaintenanceProfileSpec{
			NodeSelector: &metav1.LabelSelector{MatchLabels: selector},
			Checks: []pitstopv1alpha1.CheckInstance{
				{Name: "wanted", HasAnnotation: &pitstopv1alpha1.KeyValueCheck{Key: annotation}},
				{Name: "budget", MaxMaintenance: &limit},
				{Name: "done", Wait: &pitstopv1alpha1.WaitCheck{Duration: pitstopv1alpha1.Duration{Duration: maintenanceTime()}}},
			},
			Triggers: []pitstopv1alpha1.TriggerInstance{
				{Name: "drain", Drain: &pitstopv1alpha1.DrainTrigger{Drain: pitstopv1alpha1.DrainSpec{
					UnmanagedPods:            pitstopv1alpha1.UnmanagedPodsDelete,
					PodEvictionRetryInterval: &pitstopv1alpha1.Duration{Duration: time.Second},
				}}},
				{Name: "restore", Restore: &pitstopv1alpha1.RestoreTrigger{}},
				{Name: "clear", AlterAnnotation: &pitstopv1alpha1.AlterTrigger{Key: annotation, Remove: true}},
			},
			Notifications: []pitstopv1alpha1.NotificationInstance{{
				Name:     "started",
				Schedule: pitstopv1alpha1.NotificationSchedule{Oneshot: &pitstopv1alpha1.OneshotSchedule{}},
				Webhook: &pitstopv1alpha1.WebhookNotification{
					URL:     pitstopv1alpha1.SecretKeyRef{Name: "fault-notify", Key: "url"},
					Message: "maintenance of {{ .Node.Name }} started",
				},
			}},
			States: pitstopv1alpha1.StatesSpec{
				Operational: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{
					{Check: "wanted", Next: pitstopv1alpha1.StateMaintenanceRequired},
				}},
				MaintenanceRequired: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{
					{Check: "budget", Triggers: []string{"drain"}, Next: pitstopv1alpha1.StateInMaintenance},
				}},
				InMaintenance: pitstopv1alpha1.StateSpec{
					Notify: []string{"started"},
					Transitions: []pitstopv1alpha1.Transition{
						{Check: "done", Triggers: []string{"restore", "clear"}, Next: pitstopv1alpha1.StateOperational},
					},
				},
			},
		},
	}
}

func workerNames() []string {
	var out []string
	for _, n := range cluster.NodeNames() {
		if strings.HasPrefix(n, "worker-") {
			out = append(out, n)
		}
	}
	return out
}

// awaitOutageMoment waits for the moment an outage of the API server or
// etcd, or a kill of the leader, begins, and says what it is. The short and
// long forms cut in while a node drains (the ci form runs the strikes of
// awaitMidEviction instead). An eviction cut off there leaves
// its pod counted against its PodDisruptionBudget for two minutes
// (docs/safety.md), so the brief form cuts in once a
// node is in maintenance while no drain is under way, instead; with last,
// once no drain is to come either (see TestFaultAPIServerDown).
func (r *rig) awaitOutageMoment(last bool) string {
	r.t.Helper()
	if *form != "brief" && *form != "ci" {
		return r.awaitDraining() + " drains"
	}
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if node := r.watch.inMaintenanceWithNoDrain(last); node != "" {
			if last {
				return node + " is in maintenance and no node drains or has yet to"
			}
			return node + " is in maintenance and no node drains"
		}
	}
	r.t.Fatalf("no node in maintenance while no drain is under way within 2 minutes: %s", r.describe())
	return ""
}

// awaitMidEviction waits until a drain has evicted at least one pod and
// has pods left to evict (the watcher sees the pods go), and says where.
func (r *rig) awaitMidEviction() string {
	r.t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if err := r.watch.violation(); err != nil {
			r.t.Fatal(err)
		}
		if node := r.watch.midEviction(); node != "" {
			return node + "'s drain has evicted pods and has more to evict"
		}
	}
	r.t.Fatalf("no drain with evictions done and to come within 2 minutes: %s", r.describe())
	return ""
}

// awaitDraining waits until some node's drain is under way.
func (r *rig) awaitDraining() string {
	r.t.Helper()
	var node string
	testutil.Eventually(r.t, 2*time.Minute, 100*time.Millisecond, func() error {
		list := &pitstopv1alpha1.NodeMaintenanceList{}
		if err := admin.List(context.Background(), list); err != nil {
			return err
		}
		for _, nm := range list.Items {
			if nm.Status.StartTime != nil {
				node = nm.Spec.NodeName
				return nil
			}
		}
		return fmt.Errorf("no drain under way yet: %s", r.describe())
	})
	return node
}

// describe says where the profile and the workers are, for a test that
// waits too long.
func (r *rig) describe() string {
	ctx := context.Background()
	var b strings.Builder
	for _, want := range r.opts.profiles {
		p := &pitstopv1alpha1.MaintenanceProfile{}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(want), p); err != nil {
			fmt.Fprintf(&b, "profile %s: %v; ", want.Name, err)
			continue
		}
		for _, c := range p.Status.Conditions {
			fmt.Fprintf(&b, "profile %s %s=%s (%s); ", p.Name, c.Type, c.Status, c.Message)
		}
	}
	for _, n := range r.opts.nodes {
		node := &corev1.Node{}
		if err := admin.Get(ctx, client.ObjectKey{Name: n}, node); err == nil {
			fmt.Fprintf(&b, "%s: %s %s; ", n, node.Labels["pitstop.dev/state"], node.Annotations["pitstop.dev/data"])
		}
	}
	nms := &pitstopv1alpha1.NodeMaintenanceList{}
	if err := admin.List(ctx, nms); err == nil {
		for _, nm := range nms.Items {
			for _, c := range nm.Status.Conditions {
				fmt.Fprintf(&b, "NodeMaintenance %s %s=%s %s (%s); ", nm.Name, c.Type, c.Status, c.Reason, c.Message)
			}
		}
	}
	return b.String()
}

// finish waits until every node of the test has been through maintenance
// and is back, then checks what must hold after every fault: every node
// operational and uncordoned (cordoned, if an administrator cordoned it),
// no maintenance ran twice, nothing left behind, no node told twice that
// its maintenance started. The watcher checked the rest as it went.
func (r *rig) finish(timeout time.Duration) {
	r.t.Helper()
	ctx := context.Background()
	names := r.opts.nodes
	moves, movedAt, told := r.watch.moves(), time.Now(), false
	testutil.Eventually(r.t, timeout, 500*time.Millisecond, func() error {
		if err := r.watch.violation(); err != nil {
			r.t.Fatal(err)
		}
		if m := r.watch.moves(); m != moves {
			moves, movedAt, told = m, time.Now(), false
		} else if !told && time.Since(movedAt) > 20*time.Second {
			told = true
			r.t.Logf("no node moved for 20 s: %s", r.describe())
		}
		for _, n := range names {
			node := &corev1.Node{}
			if err := admin.Get(ctx, client.ObjectKey{Name: n}, node); err != nil {
				return err
			}
			cordoned := slices.Contains(r.cordonedByAdmin, n)
			if _, wanted := node.Annotations[annotation]; wanted || node.Spec.Unschedulable != cordoned || node.Labels["pitstop.dev/state"] != string(pitstopv1alpha1.StateOperational) {
				return fmt.Errorf("%s not through maintenance yet: state %q, unschedulable %v (cordoned by an administrator: %v), annotated %v (%d of %d through); %s",
					n, node.Labels["pitstop.dev/state"], node.Spec.Unschedulable, cordoned, wanted, r.watch.through(), len(names), r.describe())
			}
		}
		return nil
	})
	testutil.Eventually(r.t, 45*time.Second, 500*time.Millisecond, func() error {
		return leftBehind(ctx)
	})
	for _, n := range names {
		switch got := r.watch.entries(n); {
		case got > 1:
			r.t.Errorf("%s entered maintenance %d times, want once", n, got)
		case got == 0 && r.watch.relisted() == 0:
			r.t.Errorf("%s went through maintenance without the watcher seeing it in maintenance", n)
		case got == 0:
			r.t.Logf("%s was in maintenance only while the watcher listed again after an outage", n)
		}
		if got := r.notes.count(n); got > 1 {
			r.t.Errorf("%s was told %d times that its maintenance started", n, got)
		} else if got == 0 {
			r.t.Logf("%s's start was not told (sent at most once: a notification recorded as sent before its process died is not sent again)", n)
		}
	}
	if err := r.watch.violation(); err != nil {
		r.t.Fatal(err)
	}
	evictions := onlyEvictions(r.t, r.started, pitstopAgent)
	r.t.Logf("%d nodes through maintenance in %s; at most %d at once; pitstop started %d times; the watcher listed again %d times; %s; %s; components restarted after exiting on their own: %v; %s",
		len(names), time.Since(r.started).Round(time.Second), r.watch.mostAtOnce(), r.starts(), r.watch.relisted(), evictions,
		r.watch.checks(), r.restarts(), r.watch.story())
	if unready := r.watch.unreadyPods(); len(unready) > 0 {
		r.t.Logf("pods that went not ready without being removed (not pitstop's doing, so not counted): %s", strings.Join(unready, "; "))
	}
	r.cleanUp()
}

// restarts counts, per component, the times it exited on its own and was
// started again during this test.
func (r *rig) restarts() map[string]int {
	now := cluster.Restarts()
	for name, n := range r.restartsBefore {
		if now[name] -= n; now[name] == 0 {
			delete(now, name)
		}
	}
	return now
}

func (r *rig) starts() int {
	n := 0
	for _, p := range r.managers {
		p.mu.Lock()
		n += p.starts
		p.mu.Unlock()
	}
	return n
}

// leftBehind says what a finished run left: budget slots, NodeMaintenances,
// pitstop's taint or cordon record on a node.
func leftBehind(ctx context.Context) error {
	leases := &coordinationv1.LeaseList{}
	if err := admin.List(ctx, leases, client.InNamespace(namespace)); err != nil {
		return err
	}
	for _, l := range leases.Items {
		if l.Name != leaderID && !strings.HasPrefix(l.Name, "pitstop-slack-") {
			return fmt.Errorf("Lease %s left behind (holder %q)", l.Name, ptr.Deref(l.Spec.HolderIdentity, ""))
		}
	}
	nms := &pitstopv1alpha1.NodeMaintenanceList{}
	if err := admin.List(ctx, nms); err != nil {
		return err
	}
	if len(nms.Items) > 0 {
		return fmt.Errorf("NodeMaintenance %s left behind", nms.Items[0].Name)
	}
	nodes := &corev1.NodeList{}
	if err := admin.List(ctx, nodes); err != nil {
		return err
	}
	for _, n := range nodes.Items {
		if _, ok := n.Annotations[pitstopv1alpha1.AnnotationCordonedBefore]; ok {
			return fmt.Errorf("node %s keeps pitstop's cordon record", n.Name)
		}
		for _, taint := range n.Spec.Taints {
			if taint.Key == pitstopv1alpha1.TaintDrain {
				return fmt.Errorf("node %s keeps pitstop's taint", n.Name)
			}
		}
	}
	return nil
}

// cleanUp stops the processes and deletes the profile, for the next test.
func (r *rig) cleanUp() {
	if r.cleaned {
		return
	}
	r.cleaned = true
	r.stopKeeping()
	for _, p := range r.managers {
		p.signal(syscall.SIGTERM)
	}
	ctx := context.Background()
	for _, want := range r.opts.profiles {
		p := &pitstopv1alpha1.MaintenanceProfile{}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(want), p); err == nil {
			p.Finalizers = nil
			_ = admin.Update(ctx, p)
			_ = admin.Delete(ctx, p)
		}
	}
	for _, n := range r.cordonedByAdmin {
		patch := []byte(`{"spec":{"unschedulable":null}}`)
		_ = admin.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, client.RawPatch(types.MergePatchType, patch))
	}
	_ = admin.Delete(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: leaderID}})
}

// receiver counts the "started" notifications per node.
type receiver struct {
	url    string
	mu     sync.Mutex
	byNode map[string]int
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{byNode: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var body struct {
			Node string `json:"node"`
		}
		if err := json.NewDecoder(req.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.byNode[body.Node]++
		r.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

func (r *receiver) count(node string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byNode[node]
}

// randomMoment sleeps a random while in [lo, hi).
func randomMoment(lo, hi time.Duration) {
	time.Sleep(lo + time.Duration(rand.Int64N(int64(hi-lo))))
}

// pitstopAgent is the user agent of `pitstop run`'s requests.
const pitstopAgent = "pitstop"

// onlyEvictions fails the test for each pod that a client with the user
// agent agent deleted since since (the audit log of the API server says):
// with no force-delete policy, pitstop removes pods only through the
// Eviction API. It returns how the evictions were answered.
func onlyEvictions(t *testing.T, since time.Time, agent string) string {
	t.Helper()
	removals, err := cluster.PodRemovals(since)
	if err != nil {
		t.Fatal(err)
	}
	created, refused, gone, other := 0, 0, 0, 0
	var answers []string
	for _, r := range removals {
		switch {
		case r.UserAgent != agent:
		case !r.Eviction:
			t.Errorf("%s: %s deleted pod %s/%s (HTTP %d) instead of evicting it", r.At.Format("15:04:05.000"), agent, r.Namespace, r.Pod, r.Code)
		case r.Code == http.StatusCreated:
			created++
		case r.Code == http.StatusTooManyRequests:
			refused++
		case r.Code == http.StatusNotFound || r.Code == http.StatusConflict:
			gone++
		default:
			other++
			if len(answers) < 10 {
				answers = append(answers, fmt.Sprintf("%s/%s HTTP %d at %s", r.Namespace, r.Pod, r.Code, r.At.Format("15:04:05.000")))
			}
		}
	}
	if len(answers) > 0 {
		// An eviction answered 5xx was often cut off after its budget had
		// counted the pod (docs/safety.md, the pause after a fault).
		return fmt.Sprintf("evictions: %d done, %d refused by a PodDisruptionBudget, %d of pods already gone, %d otherwise answered (%s)", created, refused, gone, other, strings.Join(answers, ", "))
	}
	return fmt.Sprintf("evictions: %d done, %d refused by a PodDisruptionBudget, %d of pods already gone, %d otherwise answered", created, refused, gone, other)
}
