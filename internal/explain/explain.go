// Package explain answers "why is this node (or profile) where it is?" from
// the cluster: each profile's state, every transition's checks with their
// results and reasons, what the drain is waiting for, recent events, and
// when the answer can next change. `pitstop explain` prints it; the
// dashboard shows the same report.
package explain

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/controller/profile"
	"github.com/pitstop-dev/pitstop/internal/engine"
)

// NodeReport is everything that explains a node's maintenance.
type NodeReport struct {
	Node      string    `json:"node"`
	Generated time.Time `json:"generated"`
	// State is the node's most severe state over its profiles.
	State       string               `json:"state"`
	Cordoned    bool                 `json:"cordoned"`
	Profiles    []profile.Evaluation `json:"profiles"`
	Maintenance []Maintenance        `json:"maintenances,omitempty"`
	Events      []Event              `json:"events,omitempty"`
	// NextChange is the earliest time a check's answer can change by
	// itself; nil when only a change in the cluster can change it.
	NextChange *time.Time `json:"nextChange,omitempty"`
}

// Maintenance is a NodeMaintenance of the node: the drain.
type Maintenance struct {
	Name      string                         `json:"name"`
	Reason    string                         `json:"reason,omitempty"`
	Phase     string                         `json:"phase"`
	Progress  int32                          `json:"drainProgress"`
	Pending   int                            `json:"pendingPods"`
	Blockers  []pitstopv1alpha1.DrainBlocker `json:"blockers,omitempty"`
	LastError string                         `json:"lastError,omitempty"`
	Drained   *metav1.Condition              `json:"drained,omitempty"`
	Deleting  bool                           `json:"deleting,omitempty"`
}

// Event is one recent event about the node.
type Event struct {
	Time   time.Time `json:"time"`
	Type   string    `json:"type"`
	Reason string    `json:"reason"`
	Note   string    `json:"note"`
	Count  int32     `json:"count,omitempty"`
}

// maxEvents bounds the events in a report.
const maxEvents = 10

// Node builds the report of one node from reader (the API server for the
// command line, the manager's cache for the dashboard).
func Node(ctx context.Context, reader client.Reader, ev *profile.Evaluator, name string, now time.Time) (*NodeReport, error) {
	node := &corev1.Node{}
	if err := reader.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		return nil, fmt.Errorf("node %s: %w", name, err)
	}
	r := &NodeReport{Node: name, Generated: now, State: node.Labels[engine.LabelState], Cordoned: node.Spec.Unschedulable}
	if r.State == "" {
		r.State = "-"
	}
	evals, err := ev.Node(ctx, node, now)
	if err != nil {
		return nil, err
	}
	r.Profiles = evals
	for _, e := range evals {
		if t := e.Decision.NextChange; !t.IsZero() && (r.NextChange == nil || t.Before(*r.NextChange)) {
			r.NextChange = &t
		}
	}

	nms := &pitstopv1alpha1.NodeMaintenanceList{}
	if err := reader.List(ctx, nms); err != nil {
		return nil, err
	}
	for _, nm := range nms.Items {
		if nm.Spec.NodeName != name {
			continue
		}
		r.Maintenance = append(r.Maintenance, Maintenance{
			Name: nm.Name, Reason: nm.Spec.Reason, Phase: string(nm.Status.Phase), Progress: nm.Status.DrainProgress,
			Pending: len(nm.Status.PendingPods), Blockers: nm.Status.Blockers, LastError: nm.Status.LastError,
			Drained:  meta.FindStatusCondition(nm.Status.Conditions, pitstopv1alpha1.ConditionDrained),
			Deleting: nm.DeletionTimestamp != nil,
		})
	}

	events := &eventsv1.EventList{}
	if err := reader.List(ctx, events); err == nil {
		for _, e := range events.Items {
			if e.Regarding.Kind != "Node" || e.Regarding.Name != name {
				continue
			}
			out := Event{Time: eventTime(&e), Type: e.Type, Reason: e.Reason, Note: e.Note}
			if e.Series != nil {
				out.Count = e.Series.Count
			} else if e.DeprecatedCount > 1 {
				out.Count = e.DeprecatedCount
			}
			r.Events = append(r.Events, out)
		}
		sort.Slice(r.Events, func(i, j int) bool { return r.Events[i].Time.After(r.Events[j].Time) })
		r.Events = r.Events[:min(len(r.Events), maxEvents)]
	}
	return r, nil
}

func eventTime(e *eventsv1.Event) time.Time {
	switch {
	case e.Series != nil:
		return e.Series.LastObservedTime.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.DeprecatedLastTimestamp.IsZero():
		return e.DeprecatedLastTimestamp.Time
	}
	return e.CreationTimestamp.Time
}
