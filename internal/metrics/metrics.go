// Package metrics holds what pitstop's controllers share about Prometheus
// metrics.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Replace registers a collector that reads a manager's cache, replacing
// the one of an earlier manager in the same process (tests run several).
func Replace(c prometheus.Collector) error {
	err := crmetrics.Registry.Register(c)
	if are, ok := err.(prometheus.AlreadyRegisteredError); ok {
		crmetrics.Registry.Unregister(are.ExistingCollector)
		err = crmetrics.Registry.Register(c)
	}
	return err
}
