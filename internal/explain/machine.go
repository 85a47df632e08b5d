package explain

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/fleet"
)

// MachineReport explains a Machine: its scheduled cloud events and what
// pitstop plans and does about them, and its node's report.
type MachineReport struct {
	Machine   string    `json:"machine"`
	Generated time.Time `json:"generated"`
	Phase     string    `json:"phase"`
	NodeName  string    `json:"nodeName,omitempty"`
	// ScheduledEvents are the Machine's MachineMaintenances.
	ScheduledEvents []ScheduledEvent `json:"scheduledEvents,omitempty"`
	// Node is its node's report; nil while it has none.
	Node *NodeReport `json:"node,omitempty"`
}

// Machine builds the report of the Machine namespace/name, as Node does.
func Machine(ctx context.Context, reader, events client.Reader, ev *fleet.Evaluator, ref string, now time.Time) (*MachineReport, error) {
	namespace, name, ok := strings.Cut(ref, "/")
	if !ok || namespace == "" || name == "" {
		return nil, fmt.Errorf("machine %q: name it as NAMESPACE/NAME", ref)
	}
	m := &machinev1beta1.Machine{}
	if err := reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, m); err != nil {
		return nil, fmt.Errorf("machine %s: %w", ref, err)
	}
	r := &MachineReport{Machine: ref, Generated: now, Phase: "-"}
	if m.Status.Phase != nil {
		r.Phase = *m.Status.Phase
	}
	list := &pitstopv1alpha1.MachineMaintenanceList{}
	if err := reader.List(ctx, list, client.InNamespace(namespace)); err == nil {
		var mine []pitstopv1alpha1.MachineMaintenance
		for _, mm := range list.Items {
			if mm.Spec.MachineName == name {
				mine = append(mine, mm)
			}
		}
		r.ScheduledEvents = scheduledEventsOf(mine)
	}
	if m.Status.NodeRef != nil {
		r.NodeName = m.Status.NodeRef.Name
		node, err := Node(ctx, reader, events, ev, r.NodeName, now)
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
		if node != nil {
			node.ScheduledEvents = nil // the Machine's, above
			r.Node = node
		}
	}
	return r, nil
}

// WriteText prints the report for a terminal.
func (r *MachineReport) WriteText(w io.Writer) error {
	p := &printer{w: w}
	node := "no node yet"
	if r.NodeName != "" {
		node = "node " + r.NodeName
	}
	p.line(0, "Machine %s: %s, %s", r.Machine, r.Phase, node)
	if len(r.ScheduledEvents) == 0 {
		p.line(1, "no scheduled cloud event")
	}
	writeScheduledEvents(p, r.Generated, r.ScheduledEvents)
	if p.err != nil || r.Node == nil {
		return p.err
	}
	p.line(0, "")
	return r.Node.WriteText(w)
}
