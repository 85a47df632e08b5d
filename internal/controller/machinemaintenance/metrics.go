package machinemaintenance

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	scheduledEvents = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "pitstop_scheduled_events",
		Help: "MachineMaintenances (scheduled cloud events) by event code and phase.",
	}, []string{"code", "phase"})
	secondsToDeadline = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "pitstop_scheduled_event_deadline_seconds",
		Help: "Seconds until the nearest latest safe start of an open scheduled event (negative: past it); absent when there is none.",
	})
	deadlinesAtRisk = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "pitstop_scheduled_events_at_risk",
		Help: "Open scheduled events that nothing will act on before their latest safe start (condition DeadlineAtRisk).",
	})
	pollErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pitstop_cloud_events_poll_errors_total",
		Help: "Polls of a cloud's scheduled events that could not read every instance's events.",
	}, []string{"provider"})
	lastPoll = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "pitstop_cloud_events_last_success_timestamp_seconds",
		Help: "When a poll last read every instance's scheduled events (Unix time).",
	}, []string{"provider"})
	apiCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pitstop_cloud_events_api_calls_total",
		Help: "Pages of scheduled events the cloud's API returned.",
	}, []string{"provider"})
	pollDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "pitstop_cloud_events_poll_duration_seconds",
		Help:    "Time one poll of the cloud's scheduled events took.",
		Buckets: prometheus.ExponentialBuckets(0.05, 2, 12),
	})
)

func init() {
	metrics.Registry.MustRegister(scheduledEvents, secondsToDeadline, deadlinesAtRisk, pollErrors, lastPoll, apiCalls, pollDuration)
}
