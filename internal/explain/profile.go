package explain

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/fleet"
)

// ProfileReport explains a profile: whether it runs, where its nodes are,
// and for each node not operational, what it waits for.
type ProfileReport struct {
	Profile   string         `json:"profile"`
	Generated time.Time      `json:"generated"`
	Valid     string         `json:"valid"`
	Ready     string         `json:"ready"`
	Nodes     map[string]int `json:"nodes"`
	Waiting   []NodeLine     `json:"waiting,omitempty"`
	// NextChange is the earliest time any of its nodes' answers can change
	// by itself.
	NextChange *time.Time `json:"nextChange,omitempty"`
}

// NodeLine is one node of a profile that is not operational.
type NodeLine struct {
	Node  string    `json:"node"`
	State string    `json:"state"`
	Since time.Time `json:"since"`
	// Why is the first reason the node does not move on.
	Why string `json:"why"`
}

// Profile builds the report of one profile.
func Profile(ctx context.Context, reader client.Reader, ev *fleet.Evaluator, name string, now time.Time) (*ProfileReport, error) {
	p := &pitstopv1alpha1.MaintenanceProfile{}
	if err := reader.Get(ctx, client.ObjectKey{Name: name}, p); err != nil {
		return nil, fmt.Errorf("MaintenanceProfile %s: %w", name, err)
	}
	r := &ProfileReport{Profile: name, Generated: now, Nodes: map[string]int{}}
	for _, c := range []struct {
		typ string
		out *string
	}{{"Valid", &r.Valid}, {"Ready", &r.Ready}} {
		*c.out = "unknown (the manager has not reported)"
		if cond := meta.FindStatusCondition(p.Status.Conditions, c.typ); cond != nil {
			*c.out = fmt.Sprintf("%s (%s): %s", cond.Status, cond.Reason, cond.Message)
		}
	}
	fleet, err := ev.Fleet(ctx, now)
	if err != nil {
		return nil, err
	}
	for node, evals := range fleet {
		for _, e := range evals {
			if e.Profile != name {
				continue
			}
			r.Nodes[string(e.Record.Current)]++
			if t := e.Decision.NextChange; !t.IsZero() && (r.NextChange == nil || t.Before(*r.NextChange)) {
				r.NextChange = &t
			}
			if e.Record.Current != pitstopv1alpha1.StateOperational {
				r.Waiting = append(r.Waiting, NodeLine{Node: node, State: string(e.Record.Current), Since: e.Record.Since.Time, Why: why(e)})
			}
		}
	}
	sort.Slice(r.Waiting, func(i, j int) bool {
		if !r.Waiting[i].Since.Equal(r.Waiting[j].Since) {
			return r.Waiting[i].Since.Before(r.Waiting[j].Since)
		}
		return r.Waiting[i].Node < r.Waiting[j].Node
	})
	return r, nil
}

// why is the first thing keeping a node where it is.
func why(e fleet.Evaluation) string {
	if e.Error != "" {
		return e.Error
	}
	if blocking := e.Decision.Blocking(); len(blocking) > 0 {
		return blocking[0]
	}
	if e.Decision.Take >= 0 {
		return "moving on now"
	}
	return "no transition passes"
}

// WriteText prints the profile report.
func (r *ProfileReport) WriteText(w io.Writer) error {
	p := &printer{w: w}
	p.line(0, "Profile %s", r.Profile)
	p.line(1, "valid: %s", r.Valid)
	p.line(1, "ready: %s", r.Ready)
	p.line(1, "nodes: %d operational, %d maintenance-required, %d in-maintenance",
		r.Nodes[string(pitstopv1alpha1.StateOperational)], r.Nodes[string(pitstopv1alpha1.StateMaintenanceRequired)], r.Nodes[string(pitstopv1alpha1.StateInMaintenance)])
	if len(r.Waiting) > 0 {
		p.line(0, "")
		p.line(0, "Nodes not operational, longest first:")
		for _, n := range r.Waiting {
			p.line(1, "%s: %s for %s: %s", n.Node, n.State, r.Generated.Sub(n.Since).Round(time.Second), n.Why)
		}
	}
	p.line(0, "")
	if r.NextChange != nil {
		p.line(0, "Next change by itself: %s (in %s).", stamp(*r.NextChange), r.NextChange.Sub(r.Generated).Round(time.Second))
	} else {
		p.line(0, "Next change: only when something in the cluster changes.")
	}
	return p.err
}
