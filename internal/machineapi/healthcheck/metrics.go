package healthcheck

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Values of the result label of remediations.
const (
	resultDeleted    = "deleted"
	resultFailed     = "failed"
	resultSkipped    = "skipped"
	resultRestricted = "restricted"
)

var remediations = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "pitstop_machinehealthcheck_remediations_total",
	Help: "Remediations by MachineHealthChecks, by result: deleted (an unhealthy Machine was deleted), failed (its deletion failed; " +
		"it is retried), skipped (an unhealthy Machine no MachineSet controls was left alone; counted by every reconcile that finds it), " +
		"restricted (the storm guard held remediation back: more Machines unhealthy than maxUnhealthy allows; counted when that " +
		"starts or its counts change).",
}, []string{"result"})

func init() {
	// Every result is present from the start, at 0, so that rate() and
	// increase() see the first one.
	for _, r := range []string{resultDeleted, resultFailed, resultSkipped, resultRestricted} {
		remediations.WithLabelValues(r)
	}
}
