package esx

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	vimtypes "github.com/vmware/govmomi/vim25/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/cloud/vsphere"
	"github.com/pitstop-dev/pitstop/internal/maintenance"
	"github.com/pitstop-dev/pitstop/internal/nodepatch"
)

// act moves the node's maintenance on by one step: drain, shut the guest
// down, power it off after the timeout; and once the host is back, power
// it on and restore the node. nm is the node's ESX NodeMaintenance (nil:
// none yet), vms the VMs on its host. busy says it waits for something
// that changes soon.
func (c *Controller) act(ctx context.Context, vc *vsphere.Client, cfg *Config, n *corev1.Node, st vsphere.HostState, nm *pitstopv1alpha1.NodeMaintenance, vms []vsphere.VM) (busy bool, err error) {
	host := n.Labels[LabelHost]
	if st.Maintenance == vsphere.InMaintenanceFalse {
		return false, c.restore(ctx, vc, n, nm, vms)
	}
	m, vmErr := vmOf(n, host, vms)
	if nm == nil {
		return c.admit(ctx, cfg, n, st, vmErr)
	}
	if !nm.DeletionTimestamp.IsZero() {
		return true, nil // the last maintenance's, going
	}
	done, status, err := maintenance.Progress(nm)
	if err != nil {
		c.recorder.Eventf(n, nil, corev1.EventTypeWarning, EventDrainFailed, "Drain", "the VM stays on until the drain is done: %v", err)
		return false, err
	}
	if !done {
		c.log.V(1).Info(status, "node", n.Name)
		return true, nil
	}
	if vmErr != nil {
		// Checked again: the VM may have moved since the drain began.
		c.recorder.Eventf(n, nil, corev1.EventTypeWarning, EventVMRefused, "Shutdown", "the VM stays on: %v", vmErr)
		return false, vmErr
	}
	started, asked := shutdownStarted(nm, c.clock.Now())
	if m.Power == vimtypes.VirtualMachinePowerStatePoweredOff {
		return false, nil // off: by pitstop (recorded) or by someone else (left off)
	}
	if !asked {
		// Recorded before it is asked, so that pitstop powers on only the
		// VM it shut down, even if it stops in between.
		if err := c.record(ctx, nm, map[string]any{AnnotationVM: m.Ref.Value, AnnotationShutdownStarted: c.clock.Now().UTC().Format(time.RFC3339)}); err != nil {
			return false, err
		}
		if err := vc.ShutdownGuest(ctx, m); err != nil {
			c.recorder.Eventf(n, nil, corev1.EventTypeWarning, EventGuestShutdownFailed, "PowerOff", "the guest of VM %s cannot shut down (%v): powering it off", n.Name, err)
			return false, c.powerOff(ctx, vc, n, m)
		}
		c.recorder.Eventf(n, nil, corev1.EventTypeNormal, EventGuestShutdown, "Shutdown", "drained: the guest of VM %s is shutting down (powered off after %s)", n.Name, cfg.Intervals.VMShutdown.Timeout.Duration)
		return true, nil
	}
	if nm.Annotations[AnnotationVM] != m.Ref.Value {
		c.recorder.Eventf(n, nil, corev1.EventTypeWarning, EventVMRefused, "PowerOff", "VM %s (%s) is not the VM pitstop asked to shut down (%s): left as it is", n.Name, m.Ref.Value, nm.Annotations[AnnotationVM])
		return false, fmt.Errorf("VM %s of node %s is not %s, recorded on NodeMaintenance %s", m.Ref.Value, n.Name, nm.Annotations[AnnotationVM], nm.Name)
	}
	if wait := cfg.Intervals.VMShutdown.Timeout.Duration - c.clock.Since(started); wait > 0 {
		return true, nil
	}
	c.recorder.Eventf(n, nil, corev1.EventTypeWarning, EventGuestShutdownTimedOut, "PowerOff", "the guest of VM %s did not shut down within %s: powering it off", n.Name, cfg.Intervals.VMShutdown.Timeout.Duration)
	return false, c.powerOff(ctx, vc, n, m)
}

// admit starts the node's maintenance for its host: only when its VM is
// found through links the node cannot forge (refused before any pod is
// evicted otherwise), and once it holds a slot of the integration's
// budget. The NodeMaintenance is written first, the annotation that shows
// it after.
func (c *Controller) admit(ctx context.Context, cfg *Config, n *corev1.Node, st vsphere.HostState, vmErr error) (bool, error) {
	host := n.Labels[LabelHost]
	if vmErr != nil {
		c.recorder.Eventf(n, nil, corev1.EventTypeWarning, EventVMRefused, "Drain", "the node is not drained for ESX host %s: %v", host, vmErr)
		return false, vmErr
	}
	got, err := c.acquire(ctx, cfg, n)
	if err != nil || !got {
		return false, err
	}
	if _, err := c.drain(ctx, cfg, n, st); err != nil {
		return false, err
	}
	if n.Annotations[AnnotationRebootInitiated] != "true" {
		if err := nodepatch.Meta(ctx, c.client, n, "annotations", map[string]any{AnnotationRebootInitiated: "true"}); err != nil {
			return false, err
		}
	}
	why := "in maintenance"
	if st.Maintenance == vsphere.InMaintenanceAlarm {
		why = "alarmed (" + st.Alarm + ")"
	}
	c.recorder.Eventf(n, nil, corev1.EventTypeNormal, EventHostMaintenance, "Drain", "ESX host %s is %s: draining the node, then shutting its VM down", host, why)
	return true, nil
}

// record writes annotations on the node's NodeMaintenance.
func (c *Controller) record(ctx context.Context, nm *pitstopv1alpha1.NodeMaintenance, annotations map[string]any) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		return err
	}
	if err := c.client.Patch(ctx, nm, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("recording on NodeMaintenance %s: %w", nm.Name, err)
	}
	return nil
}

func (c *Controller) powerOff(ctx context.Context, vc *vsphere.Client, n *corev1.Node, m vsphere.VM) error {
	if err := vc.PowerOff(ctx, m); err != nil {
		return fmt.Errorf("powering off VM %s: %w", n.Name, err)
	}
	return nil
}

// shutdownStarted is when the guest was asked to shut down, as the
// NodeMaintenance records it; an unreadable record counts from now.
func shutdownStarted(nm *pitstopv1alpha1.NodeMaintenance, now time.Time) (time.Time, bool) {
	v, ok := nm.Annotations[AnnotationShutdownStarted]
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		// Unreadable: count from now rather than power off at once.
		return now, true
	}
	return t, true
}

// drain returns the node's ESX NodeMaintenance, created on the first call;
// nil while the one of an earlier maintenance is still going.
func (c *Controller) drain(ctx context.Context, cfg *Config, n *corev1.Node, st vsphere.HostState) (*pitstopv1alpha1.NodeMaintenance, error) {
	spec := cfg.Intervals.PodEviction.Drain()
	reason := fmt.Sprintf("ESX host %s in maintenance", n.Labels[LabelHost])
	if st.Maintenance == vsphere.InMaintenanceAlarm {
		// The host is failing, but each pod still gets its own grace
		// period: a stateful pod cut short loses data.
		reason = fmt.Sprintf("ESX host %s alarmed: %s", n.Labels[LabelHost], st.Alarm)
	}
	nm, _, err := maintenance.Ensure(ctx, c.client, &pitstopv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: maintenance.Name(maintenance.PrefixESX, n.Name), Labels: map[string]string{pitstopv1alpha1.LabelSource: pitstopv1alpha1.SourceESX}},
		Spec:       pitstopv1alpha1.NodeMaintenanceSpec{NodeName: n.Name, Reason: reason, Drain: spec},
	})
	return nm, err
}

// restore ends the node's ESX maintenance once its host is back: the VM
// pitstop shut down (as its NodeMaintenance records) powered on, the
// NodeMaintenance deleted (which uncordons the node), the slot given back,
// the annotations removed. A VM pitstop did not shut down is left as it is.
func (c *Controller) restore(ctx context.Context, vc *vsphere.Client, n *corev1.Node, nm *pitstopv1alpha1.NodeMaintenance, vms []vsphere.VM) error {
	if nm == nil {
		return nil
	}
	host := n.Labels[LabelHost]
	if want := nm.Annotations[AnnotationVM]; want != "" && nm.DeletionTimestamp.IsZero() {
		m, err := vmOf(n, host, vms)
		if err == nil && m.Ref.Value != want {
			err = fmt.Errorf("VM %s (%s) on ESX host %s is not the VM pitstop shut down (%s)", n.Name, m.Ref.Value, host, want)
		}
		if err != nil {
			c.recorder.Eventf(n, nil, corev1.EventTypeWarning, EventVMRefused, "PowerOn", "the node stays in maintenance, no VM is powered on: %v", err)
			return err
		}
		if m.Power != vimtypes.VirtualMachinePowerStatePoweredOn {
			if err := vc.PowerOn(ctx, m); err != nil {
				return fmt.Errorf("powering on VM %s: %w", n.Name, err)
			}
			c.recorder.Eventf(n, nil, corev1.EventTypeNormal, EventPoweredOn, "PowerOn", "ESX host %s is back: VM %s powered on", host, n.Name)
		}
	}
	if err := c.client.Delete(ctx, nm); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting NodeMaintenance %s: %w", nm.Name, err)
	}
	if err := c.slots.Release(ctx, budgetKey, n.Name); err != nil {
		return fmt.Errorf("giving back the ESX budget slot of node %s: %w", n.Name, err)
	}
	if err := nodepatch.Meta(ctx, c.client, n, "annotations", map[string]any{AnnotationRebootInitiated: nil, AnnotationShutdownStarted: nil}); err != nil {
		return err
	}
	c.recorder.Eventf(n, nil, corev1.EventTypeNormal, EventHostBack, "Restore", "ESX host %s is out of maintenance: node restored", host)
	return nil
}
