package profile

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
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

	checkDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "pitstop_check_duration_seconds",
		Help:    "Time one check evaluation took, by plugin (hasLabel, maxMaintenance, prometheusInstant, ...).",
		Buckets: prometheus.ExponentialBuckets(0.00005, 4, 10), // 50 µs to about 13 s
	}, []string{"plugin"})
)

func init() {
	metrics.Registry.MustRegister(transitionsTotal, transitionFailures, checkDuration)
}

// nodesCollector reports nodes by profile and state, computed at scrape
// time from the cache and the nodes' records.
type nodesCollector struct {
	reader  client.Reader
	records *recordCache
	desc    *prometheus.Desc
}

func newNodesCollector(reader client.Reader, records *recordCache) *nodesCollector {
	return &nodesCollector{reader: reader, records: records, desc: prometheus.NewDesc(
		"pitstop_nodes",
		"Nodes by maintenance profile and state (operational, maintenance-required, in-maintenance).",
		[]string{"profile", "state"}, nil)}
}

func (c *nodesCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *nodesCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	profiles := &pitstopv1alpha1.MaintenanceProfileList{}
	nodes := &corev1.NodeList{}
	if err := c.reader.List(ctx, profiles); err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	if err := c.reader.List(ctx, nodes, client.UnsafeDisableDeepCopy); err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	counts := map[string]map[pitstopv1alpha1.MaintenanceState]float64{}
	for _, p := range profiles.Items {
		counts[p.Name] = map[pitstopv1alpha1.MaintenanceState]float64{
			pitstopv1alpha1.StateOperational: 0, pitstopv1alpha1.StateMaintenanceRequired: 0, pitstopv1alpha1.StateInMaintenance: 0,
		}
	}
	for i := range nodes.Items {
		rec, err := c.records.read(&nodes.Items[i])
		if err != nil {
			continue
		}
		for name, pr := range rec.Profiles {
			if counts[name] == nil {
				counts[name] = map[pitstopv1alpha1.MaintenanceState]float64{} // deleted, still holding a node
			}
			counts[name][pr.Current]++
		}
	}
	for profile, states := range counts {
		for state, n := range states {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, n, profile, string(state))
		}
	}
}
