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
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/fleet"
)

// NodeReport is everything that explains a node's maintenance.
type NodeReport struct {
	Node      string    `json:"node"`
	Generated time.Time `json:"generated"`
	// State is the node's most severe state over its profiles.
	State       string             `json:"state"`
	Cordoned    bool               `json:"cordoned"`
	Profiles    []fleet.Evaluation `json:"profiles"`
	Maintenance []Maintenance      `json:"maintenances,omitempty"`
	// ScheduledEvents are the node's scheduled cloud events (its
	// MachineMaintenances), earliest first.
	ScheduledEvents []ScheduledEvent `json:"scheduledEvents,omitempty"`
	Events          []Event          `json:"events,omitempty"`
	// EventsError says why Events could not be read (RBAC, say).
	EventsError string `json:"eventsError,omitempty"`
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

// ScheduledEvent is a cloud event scheduled for the node's instance, and
// pitstop's plan for it.
type ScheduledEvent struct {
	Object          string     `json:"object"`
	Code            string     `json:"code"`
	Description     string     `json:"description,omitempty"`
	NotBefore       *time.Time `json:"notBefore,omitempty"`
	LatestSafeStart *time.Time `json:"latestSafeStart,omitempty"`
	Phase           string     `json:"phase"`
	Plan            string     `json:"plan,omitempty"`
	Action          string     `json:"action,omitempty"`
	AtRisk          string     `json:"atRisk,omitempty"`
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
// command line, the manager's cache for the dashboard), its profiles'
// evaluations from ev (evaluated now for the command line, the engine's
// last decisions for the dashboard), and its Events from
// events, which must read the API server: Events are listed with a field
// selector on the node, which a cache would serve only by holding every
// Event of the cluster.
func Node(ctx context.Context, reader, events client.Reader, ev *fleet.Evaluator, name string, now time.Time) (*NodeReport, error) {
	node := &corev1.Node{}
	if err := reader.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		return nil, fmt.Errorf("node %s: %w", name, err)
	}
	r := &NodeReport{Node: name, Generated: now, State: node.Labels[pitstopv1alpha1.LabelState], Cordoned: node.Spec.Unschedulable}
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
	for i := range nms.Items {
		if nms.Items[i].Spec.NodeName == name {
			r.Maintenance = append(r.Maintenance, MaintenanceOf(&nms.Items[i]))
		}
	}
	r.ScheduledEvents = scheduledEvents(ctx, reader, name)
	r.Events, err = nodeEvents(ctx, events, name)
	if err != nil {
		// The rest of the report stands without them.
		r.EventsError = err.Error()
	}
	return r, nil
}

// scheduledEvents lists the node's MachineMaintenances, open ones first
// and earliest first; none when the API server does not serve them.
func scheduledEvents(ctx context.Context, reader client.Reader, name string) []ScheduledEvent {
	list := &pitstopv1alpha1.MachineMaintenanceList{}
	if err := reader.List(ctx, list, client.MatchingLabels{pitstopv1alpha1.LabelMachineMaintenanceNode: name}); err != nil {
		return nil
	}
	return scheduledEventsOf(list.Items)
}

// scheduledEventsOf is what MachineMaintenances tell, open ones first and
// earliest first.
func scheduledEventsOf(items []pitstopv1alpha1.MachineMaintenance) []ScheduledEvent {
	sort.SliceStable(items, func(i, j int) bool {
		fi, fj := items[i].Status.Phase.Finished(), items[j].Status.Phase.Finished()
		if fi != fj {
			return !fi
		}
		return items[i].Spec.StartsBefore(&items[j].Spec)
	})
	out := make([]ScheduledEvent, 0, len(items))
	for i := range items {
		mm := &items[i]
		e := ScheduledEvent{Object: mm.Namespace + "/" + mm.Name, Code: mm.Spec.Code, Description: mm.Spec.Description,
			Phase: string(mm.Status.Phase), Plan: mm.Status.Plan}
		if t := mm.Spec.NotBefore; t != nil {
			e.NotBefore = &t.Time
		}
		if t := mm.Status.LatestSafeStart; t != nil {
			e.LatestSafeStart = &t.Time
		}
		if a := mm.Status.Action; a != nil {
			e.Action = fmt.Sprintf("%s %s: %s", strings.ToLower(string(a.Type)), a.Step, a.Message)
		}
		if c := meta.FindStatusCondition(mm.Status.Conditions, "DeadlineAtRisk"); c != nil && c.Status == metav1.ConditionTrue {
			e.AtRisk = c.Message
		}
		out = append(out, e)
	}
	return out
}

// MaintenanceOf is what a NodeMaintenance tells about its drain.
func MaintenanceOf(nm *pitstopv1alpha1.NodeMaintenance) Maintenance {
	return Maintenance{
		Name: nm.Name, Reason: nm.Spec.Reason, Phase: string(nm.Status.Phase), Progress: nm.Status.DrainProgress,
		Pending: len(nm.Status.PendingPods), Blockers: nm.Status.Blockers, LastError: nm.Status.LastError,
		Drained:  meta.FindStatusCondition(nm.Status.Conditions, pitstopv1alpha1.ConditionDrained),
		Deleting: nm.DeletionTimestamp != nil,
	}
}

// nodeEvents lists the latest Events about the node, newest first. The
// field selector lets the API server pick them (events.k8s.io/v1 maps
// regarding.* to the core Event's involvedObject.* fields).
func nodeEvents(ctx context.Context, reader client.Reader, name string) ([]Event, error) {
	list := &eventsv1.EventList{}
	selector := fields.AndSelectors(fields.OneTermEqualSelector("regarding.kind", "Node"), fields.OneTermEqualSelector("regarding.name", name))
	// Events about a node live in the default namespace: the API server
	// refuses Events about cluster-scoped objects anywhere but there and
	// kube-system, and the kubelet, like pitstop, writes them there.
	if err := reader.List(ctx, list, client.InNamespace(metav1.NamespaceDefault), client.MatchingFieldsSelector{Selector: selector}); err != nil {
		return nil, fmt.Errorf("listing the Events of node %s: %w", name, err)
	}
	out := make([]Event, 0, len(list.Items))
	for i := range list.Items {
		e := &list.Items[i]
		ev := Event{Time: eventTime(e), Type: e.Type, Reason: e.Reason, Note: e.Note}
		if e.Series != nil {
			ev.Count = e.Series.Count
		} else if e.DeprecatedCount > 1 {
			ev.Count = e.DeprecatedCount
		}
		out = append(out, ev)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Time.After(out[j].Time) })
	return out[:min(len(out), maxEvents)], nil
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
