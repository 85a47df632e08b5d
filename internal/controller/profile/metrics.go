package profile

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/admission"
	"github.com/pitstop-dev/pitstop/internal/budget"
	"github.com/pitstop-dev/pitstop/internal/engine"
	"github.com/pitstop-dev/pitstop/internal/fleet"
)

var (
	transitionsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pitstop_transitions_total",
		Help: "State changes of nodes, by profile, state left and state entered.",
	}, []string{"profile", "from", "to"})

	transitionFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pitstop_transition_failures_total",
		Help: "Transitions that passed their check but could not be taken because a trigger or a budget slot failed, by profile and the part that failed.",
	}, []string{"profile", "part"})
)

func init() {
	metrics.Registry.MustRegister(transitionsTotal, transitionFailures)
}

// fleetCollector reports, computed at scrape time from the cache, the
// nodes' records and the budget slots: nodes by profile and state, how
// long each profile's longest-waiting node has waited, and how full each
// profile's budgets are.
type fleetCollector struct {
	reader   client.Reader
	records  *fleet.Records
	profiles *fleet.Registry
	slots    *budget.Slots
	clock    clock.PassiveClock

	nodesDesc, waitingDesc, slotsDesc *prometheus.Desc
}

func newFleetCollector(reader client.Reader, records *fleet.Records, profiles *fleet.Registry, slots *budget.Slots, clk clock.PassiveClock) *fleetCollector {
	return &fleetCollector{
		reader: reader, records: records, profiles: profiles, slots: slots, clock: clk,
		nodesDesc: prometheus.NewDesc(
			"pitstop_nodes",
			"Nodes by maintenance profile and state (operational, maintenance-required, in-maintenance).",
			[]string{"profile", "state"}, nil),
		waitingDesc: prometheus.NewDesc(
			"pitstop_nodes_waiting_longest_seconds",
			"Seconds the profile's longest-waiting node has been in its state, among the nodes not operational whose check results, as their last evaluation recorded them, pass none of their state's transitions (waiting for a check or a budget slot, not for a trigger such as a drain); 0 when none waits.",
			[]string{"profile"}, nil),
		slotsDesc: prometheus.NewDesc(
			"pitstop_budget_slots",
			"Slots of each budget check of a profile (maxMaintenance, stagger), by kind: used (slot Leases held and not expired, as the cache shows them) and size. A budget per group (groupBy) reports its fullest group; a maxMaintenance budget that is not profileScoped is shared by every profile and counts their slots together.",
			[]string{"profile", "budget", "kind"}, nil),
	}
}

func (c *fleetCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.nodesDesc
	ch <- c.waitingDesc
	ch <- c.slotsDesc
}

func (c *fleetCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	now := c.clock.Now()
	profiles := &pitstopv1alpha1.MaintenanceProfileList{}
	nodes := &corev1.NodeList{}
	err := c.reader.List(ctx, profiles)
	if err == nil {
		err = c.reader.List(ctx, nodes, client.UnsafeDisableDeepCopy)
	}
	if err != nil {
		for _, desc := range []*prometheus.Desc{c.nodesDesc, c.waitingDesc, c.slotsDesc} {
			ch <- prometheus.NewInvalidMetric(desc, err)
		}
		return
	}
	running := map[string]*fleet.Compiled{}
	counts := map[string]map[pitstopv1alpha1.MaintenanceState]float64{}
	for i := range profiles.Items {
		p := &profiles.Items[i]
		if compiled, _ := c.profiles.Get(p); compiled != nil {
			running[p.Name] = compiled // the generation the engine runs
		}
		counts[p.Name] = map[pitstopv1alpha1.MaintenanceState]float64{
			pitstopv1alpha1.StateOperational: 0, pitstopv1alpha1.StateMaintenanceRequired: 0, pitstopv1alpha1.StateInMaintenance: 0,
		}
	}
	waited := map[string]time.Duration{}
	for i := range nodes.Items {
		rec, err := c.records.Read(&nodes.Items[i])
		if err != nil {
			continue
		}
		for name, pr := range rec.Profiles {
			if counts[name] == nil {
				counts[name] = map[pitstopv1alpha1.MaintenanceState]float64{} // deleted, still holding a node
			}
			counts[name][pr.Current]++
			compiled := running[name]
			if compiled == nil {
				compiled = c.profiles.Last(name)
			}
			if w, ok := waitingFor(compiled, pr, now); ok {
				waited[name] = max(waited[name], w)
			}
		}
	}
	for profile, states := range counts {
		for state, n := range states {
			ch <- prometheus.MustNewConstMetric(c.nodesDesc, prometheus.GaugeValue, n, profile, string(state))
		}
		ch <- prometheus.MustNewConstMetric(c.waitingDesc, prometheus.GaugeValue, waited[profile].Seconds(), profile)
	}
	c.collectBudgets(ctx, ch, running, now)
}

// collectBudgets reports the budgets of the profiles that exist.
func (c *fleetCollector) collectBudgets(ctx context.Context, ch chan<- prometheus.Metric, running map[string]*fleet.Compiled, now time.Time) {
	keys, err := c.slots.CachedKeys(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.slotsDesc, err)
		return
	}
	for profile, compiled := range running {
		uses, err := admission.Used(ctx, c.slots, compiled.Admission(), keys, now)
		if err != nil {
			ch <- prometheus.NewInvalidMetric(c.slotsDesc, err)
			return
		}
		for _, u := range uses {
			ch <- prometheus.MustNewConstMetric(c.slotsDesc, prometheus.GaugeValue, float64(u.Used), profile, u.Check, "used")
			ch <- prometheus.MustNewConstMetric(c.slotsDesc, prometheus.GaugeValue, float64(u.Size), profile, u.Check, "size")
		}
	}
}

// waitingFor says how long a node has waited in its state of profile c,
// if it waits: it is not operational (where a failing check is the normal
// course) and its check results, as its last evaluation recorded them,
// pass none of its state's transitions. How long is counted from when it
// entered the state; the record does not say since when its checks fail.
func waitingFor(c *fleet.Compiled, pr engine.ProfileRecord, now time.Time) (time.Duration, bool) {
	if c == nil || pr.Current == pitstopv1alpha1.StateOperational || c.Engine.Passes(pr) {
		return 0, false
	}
	return max(now.Sub(pr.Since.Time), 0), true
}
