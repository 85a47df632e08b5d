package nodemaintenance

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/drain"
)

var (
	drainDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "pitstop_drain_duration_seconds",
		Help:    "Time from the start of a drain to its end, by how it ended (Drained, DrainedByForce, DrainTimedOut).",
		Buckets: prometheus.ExponentialBuckets(0.25, 2, 15), // 0.25 s to about 68 min
	}, []string{"result"})

	evictions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pitstop_evictions_total",
		Help: "Evictions and deletions of pods by drains, by result (evicted, deleted, gone, refused, failed).",
	}, []string{"result"})

	podShuffles = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pitstop_pod_shuffles_total",
		Help: "Pods drains moved off their nodes (evicted or deleted), by the kind of workload owning them: Deployment (through its ReplicaSet), StatefulSet, DaemonSet, Job, other, none.",
	}, []string{"kind"})
)

func init() {
	metrics.Registry.MustRegister(drainDuration, evictions, podShuffles)
}

// recordResults counts evictions and deletions once they have happened.
func recordResults(results ...drain.Result) {
	for _, r := range results {
		for _, p := range r.Pods {
			evictions.WithLabelValues(string(p.Outcome)).Inc()
			if p.Outcome == drain.Evicted || p.Outcome == drain.Deleted {
				podShuffles.WithLabelValues(workloadKind(p.Pod)).Inc()
			}
		}
	}
}

// workloadKind names the kind of workload a pod belongs to, from its
// controller: a ReplicaSet's pods count as a Deployment's, as nearly all
// ReplicaSets are a Deployment's.
func workloadKind(pod *corev1.Pod) string {
	owner := metav1.GetControllerOf(pod)
	if owner == nil {
		return "none"
	}
	switch owner.Kind {
	case "ReplicaSet":
		return "Deployment"
	case "StatefulSet", "DaemonSet", "Job":
		return owner.Kind
	}
	return "other"
}

// evictionQueueCollector reports, at scrape time, how much the manager's
// eviction queue holds: the pods handed to it and not yet answered, and
// the requests holding a slot of the manager-wide bound.
type evictionQueueCollector struct {
	queue            *drain.Queue
	limiter          *drain.Limiter
	queued, inFlight *prometheus.Desc
}

func newEvictionQueueCollector(q *drain.Queue, l *drain.Limiter) *evictionQueueCollector {
	return &evictionQueueCollector{
		queue: q, limiter: l,
		queued: prometheus.NewDesc("pitstop_eviction_queue_pods",
			"Pods the drains handed to the manager's eviction queue whose eviction or deletion has not been answered yet, those on their way included.",
			nil, nil),
		inFlight: prometheus.NewDesc("pitstop_evictions_in_flight",
			"Eviction and deletion requests holding a slot of the manager-wide bound (--evictions-in-flight): sent, or waiting for --eviction-rate, and not yet answered.",
			nil, nil),
	}
}

func (c *evictionQueueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.queued
	ch <- c.inFlight
}

func (c *evictionQueueCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(c.queued, prometheus.GaugeValue, float64(c.queue.Unanswered()))
	ch <- prometheus.MustNewConstMetric(c.inFlight, prometheus.GaugeValue, float64(c.limiter.InFlight()))
}

// maintenancesCollector reports, computed at scrape time from the cache
// so the figures cannot drift from the objects: NodeMaintenances by phase,
// the drains past their timeout, and how long the oldest maintenance not
// yet drained has run.
type maintenancesCollector struct {
	reader                  client.Reader
	clock                   clock.PassiveClock
	phases, overdue, oldest *prometheus.Desc
}

func newMaintenancesCollector(reader client.Reader, clk clock.PassiveClock) *maintenancesCollector {
	return &maintenancesCollector{
		reader: reader,
		clock:  clk,
		phases: prometheus.NewDesc(
			"pitstop_node_maintenances",
			"NodeMaintenance objects by phase (Pending: not yet reconciled); objects being deleted count as Restoring.",
			[]string{"phase"}, nil),
		overdue: prometheus.NewDesc(
			"pitstop_node_maintenance_overdue",
			"NodeMaintenances not being deleted whose node is not drained and whose drain has waited spec.drain.timeout (status.drainWaited); a drain failed by its timeout (onTimeout: Fail) counts until its NodeMaintenance is deleted.",
			nil, nil),
		oldest: prometheus.NewDesc(
			"pitstop_node_maintenance_oldest_running_seconds",
			"Seconds since the oldest NodeMaintenance not being deleted whose node is not drained started (status.startTime, or its creation while its drain has not started); 0 when there is none.",
			nil, nil),
	}
}

func (c *maintenancesCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.phases
	ch <- c.overdue
	ch <- c.oldest
}

func (c *maintenancesCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	list := &pitstopv1alpha1.NodeMaintenanceList{}
	if err := c.reader.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		for _, desc := range []*prometheus.Desc{c.phases, c.overdue, c.oldest} {
			ch <- prometheus.NewInvalidMetric(desc, err)
		}
		return
	}
	counts := map[string]float64{"Pending": 0, "Running": 0, "Succeeded": 0, "Failed": 0, "Restoring": 0}
	for _, nm := range list.Items {
		switch {
		case !nm.DeletionTimestamp.IsZero():
			counts["Restoring"]++
		case nm.Status.Phase == "":
			counts["Pending"]++
		default:
			counts[string(nm.Status.Phase)]++
		}
	}
	for phase, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.phases, prometheus.GaugeValue, n, phase)
	}
	overdue, oldest := drainAges(list.Items, c.clock.Now())
	ch <- prometheus.MustNewConstMetric(c.overdue, prometheus.GaugeValue, float64(overdue))
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, oldest.Seconds())
}

// drainAges counts the maintenances whose drain is past its timeout
// (timedOut on status.drainWaited, as the drain itself last recorded it),
// and finds how long the
// oldest has run, from status.startTime or, before its drain starts (a
// cordon held back by quorum, say), its creation. Both count only the
// maintenances whose node is not drained yet and that are not being
// deleted (their restore is under way).
func drainAges(list []pitstopv1alpha1.NodeMaintenance, now time.Time) (overdue int, oldest time.Duration) {
	for i := range list {
		nm := &list[i]
		if !nm.DeletionTimestamp.IsZero() || isConditionTrue(nm, pitstopv1alpha1.ConditionDrained) {
			continue
		}
		if timedOut(nm, recordedWait(nm)) {
			overdue++
		}
		start := nm.CreationTimestamp.Time
		if nm.Status.StartTime != nil {
			start = nm.Status.StartTime.Time
		}
		oldest = max(oldest, now.Sub(start))
	}
	return overdue, oldest
}
