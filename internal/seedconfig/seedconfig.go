// Package seedconfig holds the value types the maintenance-controller's
// integration files (esx.yaml, kubernikus.yaml) share, read the way it
// reads them, and the drain they configure.
package seedconfig

import (
	"fmt"
	"strings"
	"time"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/maintenance"
)

// Duration is a Go duration ("5m") in a file.
type Duration struct{ time.Duration }

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	v, err := time.ParseDuration(s)
	if err != nil {
		return &DurationError{Value: s}
	}
	d.Duration = v
	return nil
}

// Timed is a polling period and a timeout.
type Timed struct {
	Period  Duration `json:"period,omitempty"`
	Timeout Duration `json:"timeout,omitempty"`
}

// Eviction is the podEviction entry: how often a refused eviction is
// asked again, how long the drain may take (then it fails), and whether
// pods still terminating past their grace period are deleted without
// grace (force), as the maintenance-controller's drain does.
type Eviction struct {
	Timed `json:",inline"`
	Force bool `json:"force,omitempty"`
}

// DefaultEvictionPeriod is podEviction.period when a file leaves it out.
const DefaultEvictionPeriod = 20 * time.Second

// Check fills in the default period and returns the problems of e, named
// under field (intervals.podEviction).
func (e *Eviction) Check(field string) []error {
	if e.Period.Duration == 0 {
		e.Period.Duration = DefaultEvictionPeriod
	}
	var errs []error
	if p := e.Period.Duration; p < time.Second || p > time.Hour {
		errs = append(errs, fmt.Errorf("%s.period: must be from 1s to 1h, got %s", field, p))
	}
	if t := e.Timeout.Duration; t != 0 && t < time.Second {
		errs = append(errs, fmt.Errorf("%s.timeout: must be at least 1s, got %s", field, t))
	}
	return errs
}

// Drain is the drain e configures, in pitstop's terms:
// maintenance.SeedDrain.
func (e Eviction) Drain() pitstopv1alpha1.DrainSpec {
	return maintenance.SeedDrain(e.Period.Duration, e.Timeout.Duration, e.Force)
}
