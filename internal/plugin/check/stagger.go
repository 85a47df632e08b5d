package check

import (
	"context"
	"fmt"
	"slices"
	"time"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

// stagger spaces entries into maintenance out in time: it passes while
// fewer than parallel nodes of the profile entered in-maintenance within
// the last duration. Each entry holds a slot for duration after it, even
// when its node has left maintenance since, like the seed's Leases (held
// for duration from the transition). The seed takes the Lease when the
// transition is taken; here the check only reads entry times, and admission
// is serialized elsewhere (see the package comment).
//
// Entry times come from the Cluster, when it implements Entries; without
// them the check passes, saying so. When the node under evaluation is
// itself in-maintenance, its own entry (at Since) does not count, as in
// maxMaintenance.
type stagger struct {
	duration time.Duration
	parallel int
}

func newStagger(cfg *pitstopv1alpha1.StaggerCheck) (Check, error) {
	if err := positive("duration", cfg.Duration.Duration); err != nil {
		return nil, err
	}
	parallel := int(cfg.Parallel)
	switch {
	case parallel < 0:
		return nil, fmt.Errorf("parallel: must be at least 1, got %d", cfg.Parallel)
	case parallel == 0: // Not defaulted by the API server (a unit test, an old object).
		parallel = 1
	}
	return &stagger{duration: cfg.Duration.Duration, parallel: parallel}, nil
}

// Evaluate implements Check.
func (s *stagger) Evaluate(_ context.Context, c Context) (Result, error) {
	entries, ok := c.Cluster.(Entries)
	if !ok {
		return Result{Passed: true, Reason: "no entry times known"}, nil
	}
	own := c.State == pitstopv1alpha1.StateInMaintenance
	var recent []time.Time
	for _, e := range entries.EnteredMaintenance(c.Profile) {
		if own && e.Equal(c.Since) {
			own = false
			continue
		}
		// An entry holds its slot during [e, e+duration); one in the
		// future (clock skew between replicas) holds it too.
		if e.Add(s.duration).After(c.Now) {
			recent = append(recent, e)
		}
	}
	taken := len(recent)
	reason := fmt.Sprintf("%d of %d stagger slots taken in the last %s", taken, s.parallel, humanDuration(s.duration))
	if taken < s.parallel {
		return Result{Passed: true, Reason: reason}, nil
	}
	// A slot frees once taken-parallel+1 entries have left the window:
	// when the (taken-parallel+1)-th oldest does.
	slices.SortFunc(recent, time.Time.Compare)
	frees := recent[taken-s.parallel].Add(s.duration)
	reason += fmt.Sprintf("; one frees at %s (in %s)", instant(frees), humanDuration(frees.Sub(c.Now)))
	return Result{Reason: reason, NextChange: frees}, nil
}
