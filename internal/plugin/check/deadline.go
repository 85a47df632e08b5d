package check

import (
	"context"
	"fmt"
	"time"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

// deadline passes when the node's earliest scheduled cloud event is near:
// it starts within `within`, or, without `within`, its latest safe start
// (the time an action takes on this cluster before the event, and a
// margin) has come. It reads what pitstop's cloud events put on the node:
// the pitstop.dev/scheduled-event label and the not-before and start-by
// annotations. A node without an event fails it.
type deadline struct {
	within time.Duration
}

func newDeadline(cfg *pitstopv1alpha1.DeadlineCheck) (Check, error) {
	d := &deadline{}
	if cfg.Within != nil {
		if err := positive("within", cfg.Within.Duration); err != nil {
			return nil, err
		}
		d.within = cfg.Within.Duration
	}
	return d, nil
}

// Evaluate implements Check.
func (d *deadline) Evaluate(_ context.Context, c Context) (Result, error) {
	code := c.Node.Labels[pitstopv1alpha1.LabelScheduledEvent]
	if code == "" {
		return Result{Reason: "no scheduled cloud event"}, nil
	}
	key, what := pitstopv1alpha1.AnnotationScheduledEventStartBy, "latest safe start"
	if d.within > 0 {
		key, what = pitstopv1alpha1.AnnotationScheduledEventNotBefore, "start"
	}
	raw := c.Node.Annotations[key]
	if raw == "" {
		return Result{Reason: fmt.Sprintf("%s is scheduled, but its %s is unknown (annotation %s)", code, what, key)}, nil
	}
	at, err := time.Parse(time.RFC3339, raw)
	if err != nil {
		return Result{}, fmt.Errorf("annotation %s %q: %w", key, raw, err)
	}
	due := at.Add(-d.within)
	if !c.Now.Before(due) {
		if d.within > 0 {
			return Result{Passed: true, Reason: fmt.Sprintf("%s starts at %s, within %s", code, instant(at), humanDuration(d.within))}, nil
		}
		return Result{Passed: true, Reason: fmt.Sprintf("%s: its latest safe start %s has come", code, instant(at))}, nil
	}
	if d.within > 0 {
		return Result{Reason: fmt.Sprintf("%s starts at %s; passes %s before it, at %s (in %s)", code, instant(at), humanDuration(d.within), instant(due), humanDuration(due.Sub(c.Now))),
			NextChange: due}, nil
	}
	return Result{Reason: fmt.Sprintf("%s: passes at its latest safe start %s (in %s)", code, instant(at), humanDuration(due.Sub(c.Now))), NextChange: due}, nil
}
