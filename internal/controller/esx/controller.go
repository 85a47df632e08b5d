// Package esx follows the ESX hosts under a cluster's nodes through their
// vCenters, as the maintenance-controller's ESX integration does and with
// its keys: it labels each node with its host's version and maintenance
// state, and takes a node whose host goes into maintenance, once a profile
// allowed it (cloud.sap/esx-reboot-ok=true) and a slot of the integration's
// own budget is free, through a NodeMaintenance drain, a guest shutdown (a
// hard power-off after a timeout), and, when the host is back, a power-on
// and the restore of the node. The VM is found on the node's host, by the
// UUID of its providerID; what pitstop acts on is recorded on its own
// NodeMaintenance, never read from what a node's writers can forge.
package esx

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/budget"
	"github.com/pitstop-dev/pitstop/internal/cloud/vsphere"
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
	// for its host's maintenance; a profile may wait for it to go. It is
	// shown, never read: anyone with nodes/patch can write it.
	AnnotationRebootInitiated = "cloud.sap/esx-reboot-initiated"
	// AnnotationShutdownStarted, on the node's NodeMaintenance esx-<node>,
	// records when the guest was asked to shut down (RFC 3339), so that a
	// restart keeps the timeout. Older versions wrote it on the node;
	// pitstop removes it there.
	AnnotationShutdownStarted = "pitstop.dev/esx-shutdown-started"
	// AnnotationVM, on the node's NodeMaintenance, names the VM (its
	// vCenter managed object ID) pitstop shut down, written before it asks:
	// only that VM is powered on again when the host is back, so a VM that
	// someone else stopped stays stopped.
	AnnotationVM = "pitstop.dev/esx-vm"
)

// Options configure the ESX integration.
type Options struct {
	// ConfigPath is the esx.yaml file, read before every check.
	ConfigPath string
	// Clock is the real clock unless a test sets one.
	Clock clock.WithTicker
	// LeaseNamespace holds the slot Leases of the integration's budget
	// (the manager's namespace).
	LeaseNamespace string
}

// Controller checks the hosts every intervals.check.period (more often
// while a guest shuts down), on the leader only.
type Controller struct {
	client   client.Client
	reader   client.Reader
	slots    *budget.Slots
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
	if opts.LeaseNamespace == "" {
		return nil, errors.New("the ESX integration needs a namespace for its budget's slot Leases")
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	c := &Controller{
		client: mgr.GetClient(), reader: mgr.GetAPIReader(), slots: budget.NewSlots(mgr, opts.LeaseNamespace),
		clock: opts.Clock, recorder: mgr.GetEventRecorder("pitstop-esx"),
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
	held, err := c.held(ctx)
	if err != nil {
		c.log.Error(err, "Listing the ESX NodeMaintenances")
		return next
	}
	c.forgetGone(ctx, nodes.Items, held)
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
		b, err := c.checkZone(ctx, cfg, az, zones[az], held)
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

// held are pitstop's ESX NodeMaintenances, by node: the record, which
// only pitstop writes, of the nodes it has taken down for their hosts.
func (c *Controller) held(ctx context.Context) (map[string]*pitstopv1alpha1.NodeMaintenance, error) {
	var list pitstopv1alpha1.NodeMaintenanceList
	if err := c.client.List(ctx, &list, client.MatchingLabels{pitstopv1alpha1.LabelSource: pitstopv1alpha1.SourceESX}); err != nil {
		return nil, err
	}
	out := map[string]*pitstopv1alpha1.NodeMaintenance{}
	for i := range list.Items {
		nm := &list.Items[i]
		if nm.Name == maintenance.Name(maintenance.PrefixESX, nm.Spec.NodeName) {
			out[nm.Spec.NodeName] = nm
		}
	}
	return out, nil
}

// forgetGone ends the maintenance of nodes deleted while pitstop held
// them: their NodeMaintenances deleted and their slots given back, once
// the API server confirms that the node is gone.
func (c *Controller) forgetGone(ctx context.Context, nodes []corev1.Node, held map[string]*pitstopv1alpha1.NodeMaintenance) {
	listed := map[string]bool{}
	for i := range nodes {
		listed[nodes[i].Name] = true
	}
	for name, nm := range held {
		if listed[name] {
			continue
		}
		if err := c.reader.Get(ctx, client.ObjectKey{Name: name}, &corev1.Node{}); !apierrors.IsNotFound(err) {
			continue
		}
		if err := c.client.Delete(ctx, nm); client.IgnoreNotFound(err) != nil {
			c.log.Error(err, "Deleting the NodeMaintenance of a node gone", "node", name)
			continue
		}
		if err := c.slots.Release(ctx, budgetKey, name); err != nil {
			c.log.Error(err, "Giving back the ESX budget slot of a node gone", "node", name)
		}
		delete(held, name)
	}
}

// checkZone checks the hosts of one availability zone; busy says a node
// is waiting for something that the next check should see soon.
func (c *Controller) checkZone(ctx context.Context, cfg *Config, az string, hosts map[string][]*corev1.Node, held map[string]*pitstopv1alpha1.NodeMaintenance) (busy bool, err error) {
	creds, ok := cfg.VCenters.Credentials[az]
	if !ok {
		return false, fmt.Errorf("vCenters.credentials has no entry for availability zone %q (nodes on hosts %v)", az, slices.Sorted(maps.Keys(hosts)))
	}
	vc, err := vsphere.Dial(ctx, cfg.URL(az), cfg.VCenters.Insecure, creds)
	if err != nil {
		return false, err
	}
	defer vc.Logout(context.WithoutCancel(ctx))
	names := map[string]bool{}
	for h := range hosts {
		names[h] = true
	}
	states, twins, err := vc.Hosts(ctx, names, cfg.Alarms)
	if err != nil {
		return false, err
	}
	if len(twins) > 0 {
		c.log.Info("ESX host name held by two hosts in its vCenter: its nodes are left alone", "hosts", twins, "availabilityZone", az)
	}
	var acting []*corev1.Node
	actingHosts := map[string]vsphere.HostState{}
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
			// The node's own annotation is not read: a forged one must not
			// make pitstop power a VM on.
			if held[n.Name] != nil || (st.Maintenance != vsphere.InMaintenanceFalse && n.Labels[LabelRebootOK] == "true") {
				acting = append(acting, n)
				actingHosts[h] = st
			}
		}
	}
	if len(acting) == 0 {
		return false, nil
	}
	vms, err := vc.VMsOn(ctx, actingHosts)
	if err != nil {
		return false, err
	}
	for _, n := range acting {
		h := n.Labels[LabelHost]
		b, err := c.act(ctx, vc, cfg, n, actingHosts[h], held[n.Name], vms[h])
		if err != nil {
			c.log.Error(err, "ESX maintenance of node", "node", n.Name, "host", h)
		}
		busy = busy || b
	}
	return busy, nil
}

// label writes the host's version and maintenance state on the node.
func (c *Controller) label(ctx context.Context, n *corev1.Node, st vsphere.HostState) error {
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

func nodeNames(nodes []*corev1.Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.Name
	}
	return out
}
