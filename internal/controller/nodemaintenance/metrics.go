package nodemaintenance

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// activeCollector reports NodeMaintenances by phase, computed at scrape
// time from the cache, so the figure cannot drift from the objects.
type activeCollector struct {
	reader client.Reader
	desc   *prometheus.Desc
}

func newActiveCollector(reader client.Reader) *activeCollector {
	return &activeCollector{reader: reader, desc: prometheus.NewDesc(
		"pitstop_node_maintenances",
		"NodeMaintenance objects by phase (Pending: not yet reconciled); objects being deleted count as Restoring.",
		[]string{"phase"}, nil)}
}

func (c *activeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *activeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	list := &pitstopv1alpha1.NodeMaintenanceList{}
	if err := c.reader.List(ctx, list); err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
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
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, n, phase)
	}
}
