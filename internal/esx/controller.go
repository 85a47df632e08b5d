// Package esx follows the ESX hosts under a cluster's nodes through their
// vCenters, as the maintenance-controller's ESX integration does and with
// its keys: it labels each node with its host's version and maintenance
// state, and takes a node whose host goes into maintenance, once a profile
// allowed it (cloud.sap/esx-reboot-ok=true), through a NodeMaintenance
// drain, a guest shutdown (a hard power-off after a timeout), and, when
// the host is back, a power-on and the restore of the node.
package esx

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vimtypes "github.com/vmware/govmomi/vim25/types"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/maintenance"
	"github.com/pitstop-dev/pitstop/internal/nodepatch"
)

// The maintenance-controller's keys, kept so that the profiles, alerts and
// dashboards written for it work unchanged.
const (
	// LabelHost on a node names its ESX host.
	LabelHost = "kubernetes.cloud.sap/host"
	// LabelZoneBeta holds the node's zone; its last character is the
	// availability zone whose vCenter knows the host. Without it,
	// topology.kubernetes.io/zone is read.
	LabelZoneBeta = "failure-domain.beta.kubernetes.io/zone"
	// LabelVersion is written: the host's ESX version.
	LabelVersion = "cloud.sap/esx-version"
	// LabelInMaintenance is written: true, alarm or false.
	LabelInMaintenance = "cloud.sap/esx-in-maintenance"
	// LabelRebootOK is read: true lets pitstop drain the node and shut its
	// VM down while its host is in maintenance. A profile sets it.
	LabelRebootOK = "cloud.sap/esx-reboot-ok"
	// AnnotationRebootInitiated is written while pitstop holds the node
	// for its host's maintenance; a profile may wait for it to go.
	AnnotationRebootInitiated = "cloud.sap/esx-reboot-initiated"
	// AnnotationShutdownStarted records when the guest was asked to shut
	// down (RFC 3339), so that a restart keeps the timeout.
	AnnotationShutdownStarted = "pitstop.dev/esx-shutdown-started"
)

// Options configure the ESX integration.
type Options struct {
	// ConfigPath is the esx.yaml file, read before every check.
	ConfigPath string
	// Clock is the real clock unless a test sets one.
	Clock clock.WithTicker
}

// Controller checks the hosts every intervals.check.period (more often
// while a guest shuts down), on the leader only.
type Controller struct {
	client   client.Client
	clock    clock.WithTicker
	recorder events.EventRecorder
	log      logr.Logger
	path     string
	cfg      *Config
}

// Setup checks the configuration file and adds the controller to mgr; a
// file that does not parse stops pitstop from starting.
func Setup(mgr ctrl.Manager, opts Options) (*Controller, error) {
	cfg, err := LoadConfig(opts.ConfigPath)
	if err != nil {
		return nil, err
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	c := &Controller{
		client: mgr.GetClient(), clock: opts.Clock, recorder: mgr.GetEventRecorder("pitstop-esx"),
		log: mgr.GetLogger().WithName("esx"), path: opts.ConfigPath, cfg: cfg,
	}
	return c, mgr.Add(c)
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: one
// replica checks.
func (c *Controller) NeedLeaderElection() bool { return true }

// Start checks at once and then again until ctx ends.
func (c *Controller) Start(ctx context.Context) error {
	for {
		next := c.Check(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-c.clock.After(next):
		}
	}
}

// config reads the file again; a file that no longer parses is logged and
// the last good one kept.
func (c *Controller) config() *Config {
	cfg, err := LoadConfig(c.path)
	if err != nil {
		c.log.Error(err, "Keeping the last good ESX configuration")
		return c.cfg
	}
	c.cfg = cfg
	return cfg
}

// Check reads every host under the cluster's nodes, labels the nodes and
// moves each node's maintenance on by one step. It returns the time to
// the next check.
func (c *Controller) Check(ctx context.Context) time.Duration {
	cfg := c.config()
	next := wait.Jitter(cfg.Intervals.Check.Period.Duration, cfg.Intervals.Check.Jitter)
	var nodes corev1.NodeList
	if err := c.client.List(ctx, &nodes); err != nil {
		c.log.Error(err, "Listing nodes")
		return next
	}
	zones := map[string]map[string][]*corev1.Node{}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		host, az := n.Labels[LabelHost], zoneOf(n)
		if host == "" || az == "" {
			continue
		}
		if zones[az] == nil {
			zones[az] = map[string][]*corev1.Node{}
		}
		zones[az][host] = append(zones[az][host], n)
	}
	busy := false
	for _, az := range slices.Sorted(maps.Keys(zones)) {
		b, err := c.checkZone(ctx, cfg, az, zones[az])
		if err != nil {
			c.log.Error(err, "Checking ESX hosts", "availabilityZone", az)
		}
		busy = busy || b
	}
	if busy && cfg.Intervals.VMShutdown.Period.Duration < next {
		next = cfg.Intervals.VMShutdown.Period.Duration
	}
	return next
}

// zoneOf is the node's availability zone: the last character of its zone.
func zoneOf(n *corev1.Node) string {
	zone := n.Labels[LabelZoneBeta]
	if zone == "" {
		zone = n.Labels[corev1.LabelTopologyZone]
	}
	if zone == "" {
		return ""
	}
	return zone[len(zone)-1:]
}

// checkZone checks the hosts of one availability zone; busy says a node
// is waiting for something that the next check should see soon.
func (c *Controller) checkZone(ctx context.Context, cfg *Config, az string, hosts map[string][]*corev1.Node) (busy bool, err error) {
	creds, ok := cfg.VCenters.Credentials[az]
	if !ok {
		return false, fmt.Errorf("vCenters.credentials has no entry for availability zone %q (nodes on hosts %v)", az, slices.Sorted(maps.Keys(hosts)))
	}
	vc, err := dial(ctx, cfg.URL(az), cfg.VCenters.Insecure, creds)
	if err != nil {
		return false, err
	}
	defer vc.logout(context.WithoutCancel(ctx))
	names := map[string]bool{}
	for h := range hosts {
		names[h] = true
	}
	states, err := vc.hosts(ctx, names, cfg.Alarms)
	if err != nil {
		return false, err
	}
	var acting []*corev1.Node
	hostOf := map[string]HostState{}
	for _, h := range slices.Sorted(maps.Keys(hosts)) {
		st, ok := states[h]
		if !ok {
			c.log.Info("ESX host not found in its vCenter", "host", h, "availabilityZone", az, "nodes", nodeNames(hosts[h]))
			continue
		}
		for _, n := range hosts[h] {
			if err := c.label(ctx, n, st); err != nil {
				c.log.Error(err, "Labelling node", "node", n.Name)
				continue
			}
			if n.Annotations[AnnotationRebootInitiated] == "true" || (st.Maintenance != InMaintenanceFalse && n.Labels[LabelRebootOK] == "true") {
				acting = append(acting, n)
				hostOf[n.Name] = st
			}
		}
	}
	if len(acting) == 0 {
		return false, nil
	}
	vmNames := map[string]bool{}
	for _, n := range acting {
		vmNames[n.Name] = true
	}
	vms, err := vc.vms(ctx, vmNames)
	if err != nil {
		return false, err
	}
	for _, n := range acting {
		m, found := vms[n.Name]
		b, err := c.act(ctx, vc, cfg, n, hostOf[n.Name], m, found)
		if err != nil {
			c.log.Error(err, "ESX maintenance of node", "node", n.Name, "host", n.Labels[LabelHost])
		}
		busy = busy || b
	}
	return busy, nil
}

// label writes the host's version and maintenance state on the node.
func (c *Controller) label(ctx context.Context, n *corev1.Node, st HostState) error {
	want := map[string]string{LabelInMaintenance: st.Maintenance}
	if st.Version != "" {
		want[LabelVersion] = st.Version
	}
	changed := map[string]any{}
	for k, v := range want {
		if n.Labels[k] != v {
			changed[k] = v
		}
	}
	if len(changed) == 0 {
		return nil
	}
	if err := nodepatch.Meta(ctx, c.client, n, "labels", changed); err != nil {
		return err
	}
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	for k, v := range want {
		n.Labels[k] = v
	}
	return nil
}

// act moves the node's maintenance on by one step: drain, shut the guest
// down, power it off after the timeout; and once the host is back, power
// it on and restore the node. busy says it waits for something that
// changes soon.
func (c *Controller) act(ctx context.Context, vc *vcenter, cfg *Config, n *corev1.Node, st HostState, m vm, found bool) (busy bool, err error) {
	down := st.Maintenance != InMaintenanceFalse
	host := n.Labels[LabelHost]
	if !down {
		return false, c.restore(ctx, vc, n, m, found)
	}
	if n.Annotations[AnnotationRebootInitiated] != "true" {
		if err := nodepatch.Meta(ctx, c.client, n, "annotations", map[string]any{AnnotationRebootInitiated: "true"}); err != nil {
			return false, err
		}
		why := "in maintenance"
		if st.Maintenance == InMaintenanceAlarm {
			why = "alarmed (" + st.Alarm + ")"
		}
		c.recorder.Eventf(n, nil, corev1.EventTypeNormal, EventHostMaintenance, "Drain", "ESX host %s is %s: draining the node, then shutting its VM down", host, why)
	}
	nm, err := c.drain(ctx, cfg, n, st)
	if err != nil || nm == nil {
		return nm == nil && err == nil, err
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
	if !found {
		c.recorder.Eventf(n, nil, corev1.EventTypeWarning, EventVMNotFound, "Shutdown", "no VM named %s in the vCenter of ESX host %s: nothing to shut down", n.Name, host)
		return false, fmt.Errorf("no VM named %s in the vCenter", n.Name)
	}
	if m.power == vimtypes.VirtualMachinePowerStatePoweredOff {
		return false, nil
	}
	started, asked := shutdownStarted(n, c.clock.Now())
	if !asked {
		if err := vc.shutdownGuest(ctx, m); err != nil {
			c.recorder.Eventf(n, nil, corev1.EventTypeWarning, EventGuestShutdownFailed, "PowerOff", "the guest of VM %s cannot shut down (%v): powering it off", n.Name, err)
			return false, c.powerOff(ctx, vc, n, m)
		}
		c.recorder.Eventf(n, nil, corev1.EventTypeNormal, EventGuestShutdown, "Shutdown", "drained: the guest of VM %s is shutting down (powered off after %s)", n.Name, cfg.Intervals.VMShutdown.Timeout.Duration)
		return true, nodepatch.Meta(ctx, c.client, n, "annotations", map[string]any{AnnotationShutdownStarted: c.clock.Now().UTC().Format(time.RFC3339)})
	}
	if wait := cfg.Intervals.VMShutdown.Timeout.Duration - c.clock.Since(started); wait > 0 {
		return true, nil
	}
	c.recorder.Eventf(n, nil, corev1.EventTypeWarning, EventGuestShutdownTimedOut, "PowerOff", "the guest of VM %s did not shut down within %s: powering it off", n.Name, cfg.Intervals.VMShutdown.Timeout.Duration)
	return false, c.powerOff(ctx, vc, n, m)
}

func (c *Controller) powerOff(ctx context.Context, vc *vcenter, n *corev1.Node, m vm) error {
	if err := vc.powerOff(ctx, m); err != nil {
		return fmt.Errorf("powering off VM %s: %w", n.Name, err)
	}
	return nil
}

// shutdownStarted is when the guest was asked to shut down; an unreadable
// record counts from now.
func shutdownStarted(n *corev1.Node, now time.Time) (time.Time, bool) {
	v, ok := n.Annotations[AnnotationShutdownStarted]
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
func (c *Controller) drain(ctx context.Context, cfg *Config, n *corev1.Node, st HostState) (*pitstopv1alpha1.NodeMaintenance, error) {
	spec := cfg.Intervals.PodEviction.Drain()
	reason := fmt.Sprintf("ESX host %s in maintenance", n.Labels[LabelHost])
	if st.Maintenance == InMaintenanceAlarm {
		// The host is failing: the pods get the shortest grace pitstop gives.
		spec.GracePeriodSeconds = ptr.To[int64](1)
		reason = fmt.Sprintf("ESX host %s alarmed: %s", n.Labels[LabelHost], st.Alarm)
	}
	nm, _, err := maintenance.Ensure(ctx, c.client, &pitstopv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: maintenance.Name(maintenance.PrefixESX, n.Name), Labels: map[string]string{pitstopv1alpha1.LabelSource: pitstopv1alpha1.SourceESX}},
		Spec:       pitstopv1alpha1.NodeMaintenanceSpec{NodeName: n.Name, Reason: reason, Drain: spec},
	})
	return nm, err
}

// restore ends the node's ESX maintenance once its host is back: the VM
// powered on, the NodeMaintenance deleted (which uncordons the node), the
// annotations removed.
func (c *Controller) restore(ctx context.Context, vc *vcenter, n *corev1.Node, m vm, found bool) error {
	if found && m.power != vimtypes.VirtualMachinePowerStatePoweredOn {
		if err := vc.powerOn(ctx, m); err != nil {
			return fmt.Errorf("powering on VM %s: %w", n.Name, err)
		}
		c.recorder.Eventf(n, nil, corev1.EventTypeNormal, EventPoweredOn, "PowerOn", "ESX host %s is back: VM %s powered on", n.Labels[LabelHost], n.Name)
	}
	nm := &pitstopv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: maintenance.Name(maintenance.PrefixESX, n.Name)}}
	if err := c.client.Delete(ctx, nm); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting NodeMaintenance %s: %w", nm.Name, err)
	}
	if err := nodepatch.Meta(ctx, c.client, n, "annotations", map[string]any{AnnotationRebootInitiated: nil, AnnotationShutdownStarted: nil}); err != nil {
		return err
	}
	c.recorder.Eventf(n, nil, corev1.EventTypeNormal, EventHostBack, "Restore", "ESX host %s is out of maintenance: node restored", n.Labels[LabelHost])
	return nil
}

func nodeNames(nodes []*corev1.Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.Name
	}
	return out
}
