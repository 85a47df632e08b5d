package manager

import (
	"strconv"

	"github.com/pitstop-dev/pitstop/internal/controller/nodemaintenance"
)

// validateEvictionBounds checks the manager-wide bound on evictions and the
// settle period of PodDisruptionBudget status after a gap.
func validateEvictionBounds(o nodemaintenance.Options) error {
	e := o.Evictions
	switch {
	case e.InFlight < 1:
		return &FlagError{"evictions-in-flight", strconv.Itoa(e.InFlight), "must be at least 1"}
	case e.Rate <= 0:
		return &FlagError{"eviction-rate", strconv.FormatFloat(e.Rate, 'g', -1, 64), "must be above 0 (evictions a second across the manager)"}
	case e.Burst < 1:
		return &FlagError{"eviction-burst", strconv.Itoa(e.Burst), "must be at least 1"}
	case o.BudgetSettle < 0:
		return &FlagError{"pdb-status-settle", o.BudgetSettle.String(), "must not be negative"}
	}
	return nil
}
