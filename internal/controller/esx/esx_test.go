package esx_test

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/alarm"
	"github.com/vmware/govmomi/event"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/controller/esx"
	"github.com/pitstop-dev/pitstop/internal/controller/nodemaintenance"
	"github.com/pitstop-dev/pitstop/internal/controller/profile"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// env is a real API server and etcd; each test runs a vCenter simulator
// (govmomi's vcsim, which answers the vSphere API) and pitstop's
// NodeMaintenance controller and ESX integration against both.
var env *testutil.Env

func TestMain(m *testing.M) {
	// The simulator's tasks let other calls read while they run, so
	// that a host can be seen entering maintenance.
	simulator.TaskDelay.MethodDelay = map[string]int{"LockHandoff": 0}
	testutil.Main(m, &env)
}

const (
	timeout  = 30 * time.Second
	interval = 50 * time.Millisecond
)

func eventually(t *testing.T, check func() error) {
	t.Helper()
	testutil.Eventually(t, timeout, interval, check)
}

// vcenter is a running vCenter simulator and a client of it.
type vcenter struct {
	model *simulator.Model
	url   *url.URL
	c     *govmomi.Client
}

func newVCenter(t *testing.T) *vcenter {
	t.Helper()
	model := simulator.VPX()
	if err := model.Create(); err != nil {
		t.Fatal(err)
	}
	// Only this user and password log in.
	model.Service.Listen = &url.URL{User: url.UserPassword("pitstop", "vc-Secret-1")}
	srv := model.Service.NewServer()
	t.Cleanup(func() { srv.Close(); model.Remove() })
	c, err := govmomi.NewClient(t.Context(), srv.URL, true)
	if err != nil {
		t.Fatal(err)
	}
	return &vcenter{model: model, url: srv.URL, c: c}
}

// host is the host system named name.
func (v *vcenter) host(t *testing.T, name string) *object.HostSystem {
	t.Helper()
	f := find.NewFinder(v.c.Client, true)
	dc, err := f.DefaultDatacenter(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	f.SetDatacenter(dc)
	h, err := f.HostSystem(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// vmOn renames the first VM of host to name (a node's name) and returns it.
func (v *vcenter) vmOn(t *testing.T, host *object.HostSystem, name string) *object.VirtualMachine {
	t.Helper()
	var h mo.HostSystem
	if err := host.Properties(t.Context(), host.Reference(), []string{"vm"}, &h); err != nil || len(h.Vm) == 0 {
		t.Fatalf("host %s has no VM: %v", host.Name(), err)
	}
	m := object.NewVirtualMachine(v.c.Client, h.Vm[0])
	task, err := m.Rename(t.Context(), name)
	if err == nil {
		err = task.Wait(t.Context())
	}
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func power(t *testing.T, m *object.VirtualMachine) types.VirtualMachinePowerState {
	t.Helper()
	s, err := m.PowerState(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func version(t *testing.T, h *object.HostSystem) string {
	t.Helper()
	var mh mo.HostSystem
	if err := h.Properties(t.Context(), h.Reference(), []string{"config.product.version"}, &mh); err != nil {
		t.Fatal(err)
	}
	return mh.Config.Product.Version
}

// writeConfig writes an esx.yaml whose template leads to v for
// availability zone a, with extra (YAML) added at the end.
func (v *vcenter) writeConfig(t *testing.T, password, extra string) string {
	t.Helper()
	u := *v.url
	u.User = nil
	u.RawQuery = "az=$AZ"
	cfg := fmt.Sprintf(`intervals:
  check:
    jitter: 0.1
    period: 1s
  vmShutdown:
    period: 200ms
    timeout: 2s
  podEviction:
    period: 1s
vCenters:
  templateUrl: %s
  insecure: true
  credentials:
    a:
      username: %s
      password: %s
%s`, strings.Replace(u.String(), "%24AZ", "$AZ", 1), v.url.User.Username(), password, extra)
	path := filepath.Join(t.TempDir(), "esx.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func password(v *vcenter) string {
	p, _ := v.url.User.Password()
	return p
}

// logs collects what the controllers log.
type logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// start runs the NodeMaintenance controller and the ESX integration on
// the configuration at path, logging into the returned logs.
func start(t *testing.T, path string, more ...func(ctrl.Manager) error) *logs {
	t.Helper()
	l := &logs{}
	opts := ctrl.Options{Logger: funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		fmt.Fprintln(&l.buf, prefix, args)
	}, funcr.Options{Verbosity: 1})}
	ns := leaseNamespace(t)
	testutil.StartControllers(t, env.Config, opts, func(mgr ctrl.Manager) error {
		nmOpts := nodemaintenance.DefaultOptions()
		nmOpts.LeaseNamespace = ns
		if err := nodemaintenance.Setup(t.Context(), mgr, nmOpts); err != nil {
			return err
		}
		if _, err := esx.Setup(mgr, esx.Options{ConfigPath: path, LeaseNamespace: ns}); err != nil {
			return err
		}
		for _, setup := range more {
			if err := setup(mgr); err != nil {
				return err
			}
		}
		return nil
	})
	return l
}

// leaseNamespace creates a namespace, named after the test, for the
// budgets' slot Leases.
func leaseNamespace(t *testing.T) string {
	t.Helper()
	name := strings.Map(func(r rune) rune {
		if ('a' <= r && r <= 'z') || ('0' <= r && r <= '9') {
			return r
		}
		return '-'
	}, strings.ToLower(t.Name()))
	name = "esx-" + name[:min(len(name), 50)]
	if env.Client.Get(t.Context(), client.ObjectKey{Name: name}, &corev1.Namespace{}) == nil {
		return name
	}
	return testutil.Namespace(t, env.Client, name)
}

// node creates a node on ESX host host in zone eu-de-1a (availability
// zone a).
func node(t *testing.T, name, host string) {
	t.Helper()
	testutil.CreateNode(t, env.Client, testutil.Node(name, testutil.WithLabels(map[string]string{
		esx.LabelHost: host, esx.LabelZoneBeta: "eu-de-1a",
	})))
}

func getNode(t *testing.T, name string) *corev1.Node { return testutil.GetNode(t, env.Client, name) }

func setLabel(t *testing.T, name, key, value string) {
	t.Helper()
	testutil.SetNodeLabel(t, env.Client, name, key, &value)
}

func wantLabel(t *testing.T, name, key, value string) {
	t.Helper()
	testutil.AwaitNodeLabel(t, env.Client, name, key, value)
}

func nodeMaintenance(t *testing.T, name string) (*pitstopv1alpha1.NodeMaintenance, error) {
	t.Helper()
	nm := &pitstopv1alpha1.NodeMaintenance{}
	err := env.Client.Get(t.Context(), client.ObjectKey{Name: "esx-" + name}, nm)
	return nm, err
}

// eventReasons are the reasons of the ESX Events about node name.
func eventReasons(t *testing.T, name string) []string {
	t.Helper()
	return testutil.NodeEventReasons(t, env.Client, name, "ESX")
}

func wantEvent(t *testing.T, name, reason string) {
	t.Helper()
	eventually(t, func() error {
		for _, r := range eventReasons(t, name) {
			if r == reason {
				return nil
			}
		}
		return fmt.Errorf("node %s has no Event %s: %v", name, reason, eventReasons(t, name))
	})
}

// TestAHostInMaintenanceTakesItsNodeThroughDrainShutdownAndBack walks the
// maintenance-controller's ESX flow on a simulated vCenter: the labels
// follow the host (entering maintenance counts), nothing is done to a node
// until a profile allows it (esx-reboot-ok), then the node is drained
// through a NodeMaintenance, its guest shut down, and once the host is
// back its VM is powered on and the node restored.
func TestAHostInMaintenanceTakesItsNodeThroughDrainShutdownAndBack(t *testing.T) {
	vc := newVCenter(t)
	host := vc.host(t, "DC0_H0")
	vm := vc.vmOn(t, host, "esx-walk-a")
	node(t, "esx-walk-a", "DC0_H0")
	node(t, "esx-walk-b", "DC0_C0_H0")
	ns := testutil.Namespace(t, env.Client, "esx-walk")
	testutil.Kubelet(t, env.Clientset)
	pods := testutil.ManagedPods(t, env.Client, ns, "esx-walk-a", "app", 2)
	logs := start(t, vc.writeConfig(t, password(vc), ""))

	wantLabel(t, "esx-walk-a", esx.LabelInMaintenance, "false")
	wantLabel(t, "esx-walk-a", esx.LabelVersion, version(t, host))
	wantLabel(t, "esx-walk-b", esx.LabelInMaintenance, "false")

	// The host is entering maintenance (its task still running): true.
	simulator.TaskDelay.MethodDelay["EnterMaintenanceMode"] = 3000
	t.Cleanup(func() { delete(simulator.TaskDelay.MethodDelay, "EnterMaintenanceMode") })
	task, err := host.EnterMaintenanceMode(t.Context(), 0, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantLabel(t, "esx-walk-a", esx.LabelInMaintenance, "true")
	var mh mo.HostSystem
	if err := host.Properties(t.Context(), host.Reference(), []string{"runtime.inMaintenanceMode"}, &mh); err != nil {
		t.Fatal(err)
	}
	if mh.Runtime.InMaintenanceMode {
		t.Fatal("the host is already in maintenance mode: the test does not see its entering")
	}
	if err := task.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	delete(simulator.TaskDelay.MethodDelay, "EnterMaintenanceMode")

	// Not allowed to reboot: nothing happens to the node for a few checks.
	time.Sleep(2500 * time.Millisecond)
	if _, err := nodeMaintenance(t, "esx-walk-a"); !apierrors.IsNotFound(err) {
		t.Fatalf("without %s the node must be left alone; NodeMaintenance: %v", esx.LabelRebootOK, err)
	}
	if p := power(t, vm); p != types.VirtualMachinePowerStatePoweredOn {
		t.Fatalf("VM is %s without %s", p, esx.LabelRebootOK)
	}
	if getNode(t, "esx-walk-b").Labels[esx.LabelInMaintenance] != "false" {
		t.Fatal("the node of the other host is labelled in maintenance")
	}

	// A profile allows it: drained, then the guest shuts down.
	setLabel(t, "esx-walk-a", esx.LabelRebootOK, "true")
	eventually(t, func() error {
		if p := power(t, vm); p != types.VirtualMachinePowerStatePoweredOff {
			return fmt.Errorf("VM is %s", p)
		}
		return nil
	})
	n := getNode(t, "esx-walk-a")
	if n.Annotations[esx.AnnotationRebootInitiated] != "true" || !n.Spec.Unschedulable {
		t.Fatalf("node while its VM is off: annotations %v, unschedulable %v", n.Annotations, n.Spec.Unschedulable)
	}
	if left := testutil.PodsOn(t, env.Client, ns, "esx-walk-a"); len(left) != 0 {
		t.Fatalf("the VM was shut down with pods on the node: %v (of %v)", left, testutil.PodNames(pods))
	}
	nm, err := nodeMaintenance(t, "esx-walk-a")
	if err != nil {
		t.Fatal(err)
	}
	if nm.Labels[pitstopv1alpha1.LabelSource] != pitstopv1alpha1.SourceESX || nm.Spec.Drain.GracePeriodSeconds != nil {
		t.Fatalf("NodeMaintenance of a host in maintenance: labels %v, drain %+v", nm.Labels, nm.Spec.Drain)
	}
	wantEvent(t, "esx-walk-a", "ESXGuestShutdown")

	// The host is back: powered on, restored.
	task, err = host.ExitMaintenanceMode(t.Context(), 0)
	if err == nil {
		err = task.Wait(t.Context())
	}
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, func() error {
		if p := power(t, vm); p != types.VirtualMachinePowerStatePoweredOn {
			return fmt.Errorf("VM is %s", p)
		}
		n := getNode(t, "esx-walk-a")
		if _, held := n.Annotations[esx.AnnotationRebootInitiated]; held || n.Spec.Unschedulable || n.Labels[esx.LabelInMaintenance] != "false" {
			return fmt.Errorf("node not restored: annotations %v, unschedulable %v, labels %v", n.Annotations, n.Spec.Unschedulable, n.Labels)
		}
		if _, err := nodeMaintenance(t, "esx-walk-a"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("NodeMaintenance still there: %v", err)
		}
		return nil
	})
	wantEvent(t, "esx-walk-a", "ESXPoweredOn")
	wantEvent(t, "esx-walk-a", "ESXHostBack")
	if p := password(vc); strings.Contains(logs.String(), p) {
		t.Fatal("the vCenter password is in the logs")
	}
}

// stubbornVM is a VM whose guest ignores a shutdown request.
type stubbornVM struct {
	*simulator.VirtualMachine
}

func (vm *stubbornVM) ShutdownGuest(*simulator.Context, *types.ShutdownGuest) soap.HasFault {
	return &methods.ShutdownGuestBody{Res: new(types.ShutdownGuestResponse)}
}

// TestAnAlarmedHostDrainsAndPowersOffAStubbornGuest: an alarm named in
// the configuration marks the host alarm; its node drains (each pod with
// its own grace period), and a guest that does not shut down within
// vmShutdown.timeout is powered off. The alarm cleared, the node is back.
func TestAnAlarmedHostDrainsAndPowersOffAStubbornGuest(t *testing.T) {
	vc := newVCenter(t)
	host := vc.host(t, "DC0_H0")
	vm := vc.vmOn(t, host, "esx-alarm-a")
	sim := vc.model.Map().Get(vm.Reference()).(*simulator.VirtualMachine)
	vc.model.Map().Put(&stubbornVM{sim})
	node(t, "esx-alarm-a", "DC0_H0")
	setLabel(t, "esx-alarm-a", esx.LabelRebootOK, "true")

	post := vc.alarm(t, host)
	post("pitstop.test.failure")
	start(t, vc.writeConfig(t, password(vc), "alarms:\n- Host hardware failure\n"))

	wantLabel(t, "esx-alarm-a", esx.LabelInMaintenance, "alarm")
	eventually(t, func() error {
		if p := power(t, vm); p != types.VirtualMachinePowerStatePoweredOff {
			return fmt.Errorf("VM is %s", p)
		}
		return nil
	})
	nm, err := nodeMaintenance(t, "esx-alarm-a")
	if err != nil {
		t.Fatal(err)
	}
	if g := nm.Spec.Drain.GracePeriodSeconds; g != nil || !strings.Contains(nm.Spec.Reason, "Host hardware failure") {
		t.Fatalf("NodeMaintenance of an alarmed host: reason %q, grace %v", nm.Spec.Reason, g)
	}
	reasons := eventReasons(t, "esx-alarm-a")
	if !contains(reasons, "ESXGuestShutdown") || !contains(reasons, "ESXGuestShutdownTimedOut") {
		t.Fatalf("Events: %v, want a shutdown asked and then timed out", reasons)
	}

	post("pitstop.test.repaired")
	wantLabel(t, "esx-alarm-a", esx.LabelInMaintenance, "false")
	eventually(t, func() error {
		if p := power(t, vm); p != types.VirtualMachinePowerStatePoweredOn {
			return fmt.Errorf("VM is %s", p)
		}
		if n := getNode(t, "esx-alarm-a"); n.Spec.Unschedulable {
			return fmt.Errorf("node %s still cordoned", n.Name)
		}
		return nil
	})
}

// alarm creates the alarm "Host hardware failure" on host, which the
// event pitstop.test.failure triggers and pitstop.test.repaired clears, and
// returns the function that posts those events.
func (v *vcenter) alarm(t *testing.T, host *object.HostSystem) func(id string) {
	t.Helper()
	spec := &types.AlarmSpec{
		Name: "Host hardware failure", Enabled: true,
		Expression: &types.OrAlarmExpression{Expression: []types.BaseAlarmExpression{
			&types.EventAlarmExpression{EventTypeId: "pitstop.test.failure", ObjectType: "HostSystem", Status: types.ManagedEntityStatusRed},
			&types.EventAlarmExpression{EventTypeId: "pitstop.test.repaired", ObjectType: "HostSystem", Status: types.ManagedEntityStatusGreen},
		}},
	}
	if _, err := alarm.NewManager(v.c.Client).CreateAlarm(t.Context(), host, spec); err != nil {
		t.Fatal(err)
	}
	return func(id string) {
		t.Helper()
		ev := &types.EventEx{EventTypeId: id, ObjectType: "HostSystem", ObjectId: host.Reference().Value, Severity: "error"}
		if err := event.NewManager(v.c.Client).PostEvent(t.Context(), ev); err != nil {
			t.Fatal(err)
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestAWrongPasswordIsReportedWithoutIt: a vCenter that refuses the login
// is logged with its URL and user, never the password, and nodes are left
// alone.
func TestAWrongPasswordIsReportedWithoutIt(t *testing.T) {
	vc := newVCenter(t)
	node(t, "esx-login-a", "DC0_H0")
	const wrong = "n0t-the-Passw0rd"
	logs := start(t, vc.writeConfig(t, wrong, ""))
	eventually(t, func() error {
		if !strings.Contains(logs.String(), "logging in to vCenter") {
			return fmt.Errorf("no login error logged yet")
		}
		return nil
	})
	if strings.Contains(logs.String(), wrong) {
		t.Fatalf("the password is in the logs:\n%s", logs.String())
	}
	if _, ok := getNode(t, "esx-login-a").Labels[esx.LabelInMaintenance]; ok {
		t.Fatal("node labelled without a vCenter")
	}
}

// TestTheSampleProfileSpendsTheBudget runs config/samples/esx.yaml (its
// budget cut to one node) with the profile engine: of the two nodes of a
// host in maintenance, one is let go (drained, VM off) and the other waits
// for the budget; once the host is back, both are operational and running.
func TestTheSampleProfileSpendsTheBudget(t *testing.T) {
	vc := newVCenter(t)
	host := vc.host(t, "DC0_H0")
	vms := map[string]*object.VirtualMachine{"esx-budget-a": vc.vmOn(t, host, "esx-budget-a")}
	var mh mo.HostSystem
	if err := host.Properties(t.Context(), host.Reference(), []string{"vm"}, &mh); err != nil || len(mh.Vm) < 2 {
		t.Fatalf("host DC0_H0 has %d VMs, want 2: %v", len(mh.Vm), err)
	}
	second := object.NewVirtualMachine(vc.c.Client, mh.Vm[1])
	if task, err := second.Rename(t.Context(), "esx-budget-b"); err != nil || task.Wait(t.Context()) != nil {
		t.Fatalf("renaming the second VM: %v", err)
	}
	vms["esx-budget-b"] = second
	node(t, "esx-budget-a", "DC0_H0")
	node(t, "esx-budget-b", "DC0_H0")

	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "config", "samples", "esx.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	mp := &pitstopv1alpha1.MaintenanceProfile{}
	if err := yaml.UnmarshalStrict(raw, mp); err != nil {
		t.Fatal(err)
	}
	for i := range mp.Spec.Checks {
		if mm := mp.Spec.Checks[i].MaxMaintenance; mm != nil {
			mm.Max = 1
		}
	}
	mp.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{esx.LabelHost: "DC0_H0"}}
	testutil.Create(t, env.Client, mp)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), mp) })
	ns := testutil.Namespace(t, env.Client, "esx-budget")
	start(t, vc.writeConfig(t, password(vc), ""), func(mgr ctrl.Manager) error {
		_, err := profile.Setup(mgr, profile.Options{LeaseNamespace: ns})
		return err
	})
	for name := range vms {
		wantLabel(t, name, pitstopv1alpha1.LabelState, string(pitstopv1alpha1.StateOperational))
	}

	task, err := host.EnterMaintenanceMode(t.Context(), 0, false, nil)
	if err == nil {
		err = task.Wait(t.Context())
	}
	if err != nil {
		t.Fatal(err)
	}
	// One VM goes off; the other node waits for the budget.
	var off string
	eventually(t, func() error {
		for name, m := range vms {
			if power(t, m) == types.VirtualMachinePowerStatePoweredOff {
				off = name
				return nil
			}
		}
		return fmt.Errorf("no VM is off yet")
	})
	waiting := "esx-budget-a"
	if off == waiting {
		waiting = "esx-budget-b"
	}
	time.Sleep(2500 * time.Millisecond)
	if p := power(t, vms[waiting]); p != types.VirtualMachinePowerStatePoweredOn {
		t.Fatalf("both VMs went off with a budget of one: %s is %s", waiting, p)
	}
	if n := getNode(t, waiting); n.Labels[esx.LabelRebootOK] != "" || n.Labels[pitstopv1alpha1.LabelState] != string(pitstopv1alpha1.StateMaintenanceRequired) {
		t.Fatalf("node %s past the budget: labels %v", waiting, n.Labels)
	}

	task, err = host.ExitMaintenanceMode(t.Context(), 0)
	if err == nil {
		err = task.Wait(t.Context())
	}
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range vms {
		wantLabel(t, name, pitstopv1alpha1.LabelState, string(pitstopv1alpha1.StateOperational))
		eventually(t, func() error {
			n := getNode(t, name)
			if p := power(t, m); p != types.VirtualMachinePowerStatePoweredOn || n.Spec.Unschedulable || n.Labels[esx.LabelRebootOK] != "" {
				return fmt.Errorf("node %s: VM %s, unschedulable %v, labels %v", name, p, n.Spec.Unschedulable, n.Labels)
			}
			return nil
		})
	}
}
