package profile

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
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
