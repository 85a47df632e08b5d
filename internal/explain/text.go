package explain

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// WriteText prints the report for a terminal: plain text, no colour, the
// answer first.
func (r *NodeReport) WriteText(w io.Writer) error {
	p := &printer{w: w}
	cordoned := ""
	if r.Cordoned {
		cordoned = ", cordoned"
	}
	p.line(0, "Node %s: %s%s", r.Node, r.State, cordoned)
	if len(r.Profiles) == 0 {
		p.line(1, "no MaintenanceProfile selects this node")
	}
	for _, e := range r.Profiles {
		p.line(0, "")
		p.line(0, "Profile %s: %s since %s (%s)", e.Profile, e.Record.Current, stamp(e.Record.Since.Time), ago(r.Generated, e.Record.Since.Time))
		if e.Error != "" {
			p.line(1, "cannot evaluate: %s", e.Error)
		}
		if e.Record.Failures > 0 {
			p.line(1, "%d failed attempts in a row; last: %s", e.Record.Failures, e.Record.LastError)
		}
		if e.Decision.Entering != "" {
			p.line(1, "%s", e.Decision.Entering)
		}
		if len(e.Decision.Evaluations) == 0 && e.Error == "" && e.Decision.Entering == "" {
			p.line(1, "no transition leaves %s", e.Record.Current)
		}
		for _, t := range e.Decision.Evaluations {
			verdict := "waits"
			switch {
			case t.Passed && t.Blocked != "":
				verdict = "passes, but blocked"
			case t.Index == e.Decision.Take:
				verdict = "passes: taken on the manager's next pass"
			case t.Passed:
				verdict = "passes (an earlier transition wins)"
			}
			check := t.Check
			if check == "" {
				check = "(always)"
			}
			p.line(1, "→ %s when %s: %s", t.Next, check, verdict)
			for _, c := range t.Checks {
				mark := "fail"
				if c.Passed {
					mark = "pass"
				}
				why := c.Reason
				if c.Error != "" {
					mark, why = "error", c.Error
				}
				next := ""
				if c.NextChange != nil {
					next = fmt.Sprintf(" (can change at %s)", stamp(*c.NextChange))
				}
				p.line(2, "[%s] %s: %s%s", mark, c.Name, why, next)
			}
			if t.Blocked != "" {
				p.line(2, "blocked: %s", t.Blocked)
			}
		}
	}
	writeScheduledEvents(p, r.Generated, r.ScheduledEvents)
	for _, m := range r.Maintenance {
		p.line(0, "")
		state := m.Phase
		if m.Deleting {
			state += ", being deleted (restoring the node)"
		}
		p.line(0, "Drain (NodeMaintenance %s): %s, %d%% drained, %d pods to go", m.Name, state, m.Progress, m.Pending)
		if m.Reason != "" {
			p.line(1, "reason: %s", m.Reason)
		}
		if m.Drained != nil && m.Drained.Status != "True" {
			p.line(1, "%s: %s", m.Drained.Reason, m.Drained.Message)
		}
		for _, b := range m.Blockers {
			pdb := ""
			if b.PodDisruptionBudget != "" {
				pdb = " (PodDisruptionBudget " + b.PodDisruptionBudget + ")"
			}
			p.line(1, "waiting for pod %s/%s%s: %s", b.Pod.Namespace, b.Pod.Name, pdb, b.Message)
		}
		if m.LastError != "" {
			p.line(1, "last error: %s", m.LastError)
		}
	}
	p.line(0, "")
	if r.NextChange != nil {
		p.line(0, "Next change by itself: %s (in %s).", stamp(*r.NextChange), r.NextChange.Sub(r.Generated).Round(time.Second))
	} else {
		p.line(0, "Next change: only when something in the cluster changes.")
	}
	if r.EventsError != "" {
		p.line(0, "")
		p.line(0, "Recent events: cannot be read: %s", r.EventsError)
	}
	if len(r.Events) > 0 {
		p.line(0, "")
		p.line(0, "Recent events:")
		for _, e := range r.Events {
			count := ""
			if e.Count > 1 {
				count = fmt.Sprintf(" (×%d)", e.Count)
			}
			p.line(1, "%s  %-7s %s: %s%s", stamp(e.Time), e.Type, e.Reason, e.Note, count)
		}
	}
	return p.err
}

type printer struct {
	w   io.Writer
	err error
}

func (p *printer) line(indent int, format string, args ...any) {
	if p.err != nil {
		return
	}
	_, p.err = fmt.Fprintf(p.w, "%s%s\n", strings.Repeat("  ", indent), fmt.Sprintf(format, args...))
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") }

func ago(now, t time.Time) string {
	return now.Sub(t).Round(time.Second).String() + " ago"
}

// until says how far t is from now: "in 3h0m0s", or "12s ago".
func until(now, t time.Time) string {
	if t.Before(now) {
		return ago(now, t)
	}
	return "in " + t.Sub(now).Round(time.Second).String()
}

// writeScheduledEvents prints scheduled cloud events and their plans.
func writeScheduledEvents(p *printer, now time.Time, events []ScheduledEvent) {
	for _, e := range events {
		p.line(0, "")
		when := "at an unknown time"
		if e.NotBefore != nil {
			when = "at " + stamp(*e.NotBefore) + " (" + until(now, *e.NotBefore) + ")"
		}
		p.line(0, "Scheduled event %s %s (MachineMaintenance %s): %s", e.Code, when, e.Object, e.Phase)
		if e.Description != "" {
			p.line(1, "%s", e.Description)
		}
		if e.LatestSafeStart != nil {
			p.line(1, "latest safe start: %s (%s)", stamp(*e.LatestSafeStart), until(now, *e.LatestSafeStart))
		}
		if e.Plan != "" {
			p.line(1, "plan: %s", e.Plan)
		}
		if e.Action != "" {
			p.line(1, "action: %s", e.Action)
		}
		if e.AtRisk != "" {
			p.line(1, "AT RISK: %s", e.AtRisk)
		}
	}
}
