package esx_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/controller/esx"
	"github.com/pitstop-dev/pitstop/internal/controller/profile"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// uuid is the VM's BIOS UUID, which a vsphere:// providerID holds.
func uuid(t *testing.T, m *object.VirtualMachine) string {
	t.Helper()
	var mvm mo.VirtualMachine
	if err := m.Properties(t.Context(), m.Reference(), []string{"config.uuid"}, &mvm); err != nil {
		t.Fatal(err)
	}
	return mvm.Config.Uuid
}

// rename gives the VM m the name name.
func rename(t *testing.T, m *object.VirtualMachine, name string) {
	t.Helper()
	task, err := m.Rename(t.Context(), name)
	if err == nil {
		err = task.Wait(t.Context())
	}
	if err != nil {
		t.Fatal(err)
	}
}

// vmsOf are the VMs registered on host.
func (v *vcenter) vmsOf(t *testing.T, host *object.HostSystem) []*object.VirtualMachine {
	t.Helper()
	var h mo.HostSystem
	if err := host.Properties(t.Context(), host.Reference(), []string{"vm"}, &h); err != nil {
		t.Fatal(err)
	}
	var out []*object.VirtualMachine
	for _, ref := range h.Vm {
		out = append(out, object.NewVirtualMachine(v.c.Client, ref))
	}
	return out
}

// vmNotOn returns a VM that is not registered on host.
func (v *vcenter) vmNotOn(t *testing.T, host *object.HostSystem) *object.VirtualMachine {
	t.Helper()
	f := find.NewFinder(v.c.Client, false)
	dc, err := f.DefaultDatacenter(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	f.SetDatacenter(dc)
	all, err := f.VirtualMachineList(t.Context(), "*")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range all {
		h, err := m.HostSystem(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if h.Reference() != host.Reference() {
			return m
		}
	}
	t.Fatal("every VM is on host " + host.Name())
	return nil
}

func enterMaintenance(t *testing.T, host *object.HostSystem) {
	t.Helper()
	task, err := host.EnterMaintenanceMode(t.Context(), 0, false, nil)
	if err == nil {
		err = task.Wait(t.Context())
	}
	if err != nil {
		t.Fatal(err)
	}
}

func exitMaintenance(t *testing.T, host *object.HostSystem) {
	t.Helper()
	task, err := host.ExitMaintenanceMode(t.Context(), 0)
	if err == nil {
		err = task.Wait(t.Context())
	}
	if err != nil {
		t.Fatal(err)
	}
}

// nodeWith creates a node on ESX host host in availability zone a, with
// providerID (none when "") and annotations.
func nodeWith(t *testing.T, name, host, providerID string, annotations map[string]string) {
	t.Helper()
	n := testutil.Node(name, testutil.WithLabels(map[string]string{esx.LabelHost: host, esx.LabelZoneBeta: "eu-de-1a"}))
	n.Spec.ProviderID = providerID
	n.Annotations = annotations
	testutil.CreateNode(t, env.Client, n)
}

// TestUntrustedESXMarkerPowersNoVMOn: cloud.sap/esx-reboot-initiated is a
// node annotation anyone with nodes/patch (the node's kubelet too) can
// write. Forged on the node of a VM that was stopped on purpose, with its
// host not in maintenance, it must not get the VM powered on: pitstop acts
// only on its own record, the NodeMaintenance esx-<node>.
func TestUntrustedESXMarkerPowersNoVMOn(t *testing.T) {
	vc := newVCenter(t)
	host := vc.host(t, "DC0_H0")
	vm := vc.vmOn(t, host, "esx-forged-a")
	task, err := vm.PowerOff(t.Context())
	if err == nil {
		err = task.Wait(t.Context())
	}
	if err != nil {
		t.Fatal(err)
	}
	nodeWith(t, "esx-forged-a", "DC0_H0", "vsphere://"+uuid(t, vm), map[string]string{
		esx.AnnotationRebootInitiated: "true", esx.AnnotationShutdownStarted: time.Now().UTC().Format(time.RFC3339),
	})
	start(t, vc.writeConfig(t, password(vc), ""))

	wantLabel(t, "esx-forged-a", esx.LabelInMaintenance, "false")
	time.Sleep(3 * time.Second) // three more checks
	if p := power(t, vm); p != types.VirtualMachinePowerStatePoweredOff {
		t.Fatalf("a forged %s got a stopped VM %s", esx.AnnotationRebootInitiated, p)
	}
	if r := eventReasons(t, "esx-forged-a"); contains(r, "ESXPoweredOn") {
		t.Fatalf("Events %v", r)
	}
}

// TestUntrustedESXVMsAreFoundUnderTheNodesHost: a node whose host is in
// maintenance reaches only a VM on that host, by the UUID of its
// providerID, and only when that VM has the node's name too. A node named
// after a VM on another host, or whose providerID names a VM of another
// name, is refused before any drain, and that VM stays on.
func TestUntrustedESXVMsAreFoundUnderTheNodesHost(t *testing.T) {
	vc := newVCenter(t)
	host := vc.host(t, "DC0_H0")
	onHost := vc.vmsOf(t, host)
	if len(onHost) < 2 {
		t.Fatalf("host DC0_H0 has %d VMs, want 2", len(onHost))
	}
	ours, notNamed := onHost[0], onHost[1]
	rename(t, ours, "esx-links-ok")
	rename(t, notNamed, "esx-links-db")
	elsewhere := vc.vmNotOn(t, host)
	rename(t, elsewhere, "esx-links-victim")
	ok := []string{"esx-links-ok"}
	nodeWith(t, "esx-links-ok", "DC0_H0", "vsphere://"+uuid(t, ours), nil)
	nodeWith(t, "esx-links-victim", "DC0_H0", "", nil)                             // named after a VM on another host
	nodeWith(t, "esx-links-uuid", "DC0_H0", "vsphere://"+uuid(t, notNamed), nil)   // names a VM of another name
	nodeWith(t, "esx-links-there", "DC0_H0", "vsphere://"+uuid(t, elsewhere), nil) // names a VM on another host
	refused := []string{"esx-links-victim", "esx-links-uuid", "esx-links-there"}
	for _, n := range append(ok, refused...) {
		setLabel(t, n, esx.LabelRebootOK, "true")
	}
	enterMaintenance(t, host)
	start(t, vc.writeConfig(t, password(vc), "maxMaintenance: 4\n"))

	eventually(t, func() error {
		if p := power(t, ours); p != types.VirtualMachinePowerStatePoweredOff {
			return fmt.Errorf("the VM whose links agree is %s", p)
		}
		return nil
	})
	for _, n := range refused {
		wantEvent(t, n, esx.EventVMRefused)
		if _, err := nodeMaintenance(t, n); !apierrors.IsNotFound(err) {
			t.Fatalf("node %s, refused, got a drain: %v", n, err)
		}
	}
	for _, m := range []*object.VirtualMachine{notNamed, elsewhere} {
		if p := power(t, m); p != types.VirtualMachinePowerStatePoweredOn {
			t.Fatalf("VM %s is %s: a node reached it through a link it can forge", m.Reference().Value, p)
		}
	}
}

// TestUntrustedESXHostDrainsRespectTheBudget: a host in maintenance under
// two nodes, both allowed (esx-reboot-ok, a label anyone with nodes/patch
// can set), takes down one node at a time, the integration's budget
// (maxMaintenance, default 1): the second waits, on, until the first is
// restored. The profile engine's sweep in the same namespace leaves the
// integration's slot alone.
func TestUntrustedESXHostDrainsRespectTheBudget(t *testing.T) {
	vc := newVCenter(t)
	host := vc.host(t, "DC0_H0")
	onHost := vc.vmsOf(t, host)
	names := []string{"esx-two-a", "esx-two-b"}
	vms := map[string]*object.VirtualMachine{}
	for i, name := range names {
		rename(t, onHost[i], name)
		vms[name] = onHost[i]
		nodeWith(t, name, "DC0_H0", "vsphere://"+uuid(t, onHost[i]), nil)
		setLabel(t, name, esx.LabelRebootOK, "true")
	}
	// The profile engine, which sweeps the slots of its namespace at start
	// and every 15 s, freeing those held 15 s by nodes it does not see in
	// maintenance.
	started := time.Now()
	start(t, vc.writeConfig(t, password(vc), ""), func(mgr ctrl.Manager) error {
		_, err := profile.Setup(mgr, profile.Options{LeaseNamespace: leaseNamespace(t)})
		return err
	})
	for _, name := range names {
		wantLabel(t, name, esx.LabelInMaintenance, "false")
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	var mostDrains, mostOff atomic.Int32
	wg.Go(func() {
		for ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
			var list pitstopv1alpha1.NodeMaintenanceList
			if env.Client.List(ctx, &list, client.MatchingLabels{pitstopv1alpha1.LabelSource: pitstopv1alpha1.SourceESX}) == nil {
				n := int32(0)
				for _, nm := range list.Items {
					if nm.DeletionTimestamp.IsZero() && (nm.Spec.NodeName == names[0] || nm.Spec.NodeName == names[1]) {
						n++
					}
				}
				if n > mostDrains.Load() {
					mostDrains.Store(n)
				}
			}
			off := int32(0)
			for _, m := range vms {
				if s, err := m.PowerState(ctx); err == nil && s == types.VirtualMachinePowerStatePoweredOff {
					off++
				}
			}
			if off > mostOff.Load() {
				mostOff.Store(off)
			}
		}
	})

	enterMaintenance(t, host)
	var down string
	eventually(t, func() error {
		for name, m := range vms {
			if power(t, m) == types.VirtualMachinePowerStatePoweredOff {
				down = name
				return nil
			}
		}
		return fmt.Errorf("no VM is off yet")
	})
	waiting := names[0]
	if down == waiting {
		waiting = names[1]
	}
	wantEvent(t, waiting, esx.EventWaitingForBudget)
	time.Sleep(time.Until(started.Add(33 * time.Second))) // past the sweep's grace and two sweeps
	if p := power(t, vms[waiting]); p != types.VirtualMachinePowerStatePoweredOn {
		t.Fatalf("both VMs of the host went off with a budget of one: %s is %s", waiting, p)
	}
	exitMaintenance(t, host)
	for name, m := range vms {
		eventually(t, func() error {
			n := getNode(t, name)
			if p := power(t, m); p != types.VirtualMachinePowerStatePoweredOn || n.Spec.Unschedulable {
				return fmt.Errorf("node %s: VM %s, unschedulable %v", name, p, n.Spec.Unschedulable)
			}
			return nil
		})
	}
	if m := mostDrains.Load(); m != 1 {
		t.Fatalf("%d ESX drains at once, want 1 (the budget)", m)
	}
	if m := mostOff.Load(); m != 1 {
		t.Fatalf("%d VMs off at once, want 1 (the budget)", m)
	}
}

// TestUntrustedESXAlarmDrainKeepsEachPodsGrace: an alarmed host drains its
// nodes with each pod's own termination grace period, not 1 second: a
// database pod with 30 s to flush gets its 30 s.
func TestUntrustedESXAlarmDrainKeepsEachPodsGrace(t *testing.T) {
	vc := newVCenter(t)
	host := vc.host(t, "DC0_H0")
	vm := vc.vmOn(t, host, "esx-grace-a")
	nodeWith(t, "esx-grace-a", "DC0_H0", "vsphere://"+uuid(t, vm), nil)
	setLabel(t, "esx-grace-a", esx.LabelRebootOK, "true")
	ns := testutil.Namespace(t, env.Client, "esx-grace")
	// No kubelet: an evicted pod stays terminating, with the grace period
	// it was given.
	pod := testutil.Pod(ns, "db-0", testutil.OnNode("esx-grace-a"), testutil.OwnedBy("StatefulSet", "db"))
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
	testutil.Create(t, env.Client, pod)
	post := vc.alarm(t, host)
	post("pitstop.test.failure")
	start(t, vc.writeConfig(t, password(vc), "alarms:\n- Host hardware failure\n"))

	wantLabel(t, "esx-grace-a", esx.LabelInMaintenance, "alarm")
	eventually(t, func() error {
		p := &corev1.Pod{}
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(pod), p); err != nil {
			return err
		}
		if p.DeletionTimestamp == nil {
			return fmt.Errorf("pod %s not evicted yet", p.Name)
		}
		if g := p.DeletionGracePeriodSeconds; g == nil || *g != 30 {
			return fmt.Errorf("pod %s evicted with a grace of %v s, want its own 30", p.Name, ptr.Deref(g, -1))
		}
		return nil
	})
	if p := power(t, vm); p != types.VirtualMachinePowerStatePoweredOn {
		t.Fatalf("the VM went %s with a pod still terminating", p)
	}
}
