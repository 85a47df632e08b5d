package explain

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/cloud/clusterapi"
	"github.com/pitstop-dev/pitstop/internal/fleet"
	"github.com/pitstop-dev/pitstop/internal/plugin/check"
	"github.com/pitstop-dev/pitstop/internal/scheme"
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
	// Node is its node's report; nil while it has none. For a Cluster
	// API Machine, the workload cluster's node.
	Node *NodeReport `json:"node,omitempty"`
	// ClusterAPI is set for a Cluster API Machine.
	ClusterAPI *ClusterAPIMachine `json:"clusterAPI,omitempty"`
}

// ClusterAPIMachine is what pitstop's Cluster API bridge does with a
// Machine.
type ClusterAPIMachine struct {
	// Cluster is its workload cluster, "namespace/name".
	Cluster string `json:"cluster"`
	// OptedIn: the Machine carries the enabled label.
	OptedIn bool `json:"optedIn"`
	// Held: pitstop's pre-drain hook holds Cluster API's drain and
	// deletion.
	Held     bool `json:"held"`
	Deleting bool `json:"deleting"`
	// Maintenance is the Machine's maintenance label: requested, approved
	// or "".
	Maintenance string `json:"maintenance,omitempty"`
	// Unreachable is the bridge's last word when it cannot read the
	// workload cluster.
	Unreachable string `json:"unreachable,omitempty"`
	// WorkloadError says why explain could not read the workload node.
	WorkloadError string `json:"workloadError,omitempty"`
}

// Machine builds the report of the Machine namespace/name, as Node does.
func Machine(ctx context.Context, reader, events client.Reader, ev *fleet.Evaluator, ref string, now time.Time) (*MachineReport, error) {
	namespace, name, ok := strings.Cut(ref, "/")
	if !ok || namespace == "" || name == "" {
		return nil, fmt.Errorf("machine %q: name it as NAMESPACE/NAME", ref)
	}
	m := &machinev1beta1.Machine{}
	if err := reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, m); err != nil {
		if !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
			return nil, fmt.Errorf("machine %s: %w", ref, err)
		}
		cm := &clusterv1.Machine{}
		if cerr := reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cm); cerr == nil {
			return clusterAPIMachine(ctx, reader, cm, now)
		} else if !apierrors.IsNotFound(cerr) && !meta.IsNoMatchError(cerr) {
			return nil, fmt.Errorf("machine %s: %w", ref, cerr)
		}
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

// clusterAPIMachine reports a Cluster API Machine: the bridge's marks on
// it, then its node's report read from the workload cluster, evaluated
// against that cluster's profiles.
func clusterAPIMachine(ctx context.Context, reader client.Reader, m *clusterv1.Machine, now time.Time) (*MachineReport, error) {
	r := &MachineReport{Machine: m.Namespace + "/" + m.Name, Generated: now, Phase: m.Status.Phase, NodeName: m.Status.NodeRef.Name}
	if r.Phase == "" {
		r.Phase = "-"
	}
	c := &ClusterAPIMachine{
		Cluster: clusterapi.ClusterOf(m), OptedIn: m.Labels[clusterapi.LabelEnabled] == "true", Held: m.Annotations[clusterapi.AnnotationHook] != "",
		Deleting: !m.DeletionTimestamp.IsZero(), Maintenance: m.Labels[clusterapi.LabelMaintenance],
	}
	if cond := meta.FindStatusCondition(m.Status.Conditions, clusterapi.ConditionWorkloadReachable); cond != nil && cond.Status == metav1.ConditionFalse {
		c.Unreachable = cond.Message
	}
	r.ClusterAPI = c
	if r.NodeName == "" {
		return r, nil
	}
	wl, err := clusterapi.WorkloadClient(ctx, reader, m, client.Options{Scheme: scheme.New()})
	if err != nil {
		c.WorkloadError = err.Error()
		return r, nil
	}
	node, err := Node(ctx, wl, wl, fleet.NewEvaluator(wl, check.Deps{Prometheus: unqueried{}}), r.NodeName, now)
	if err != nil {
		c.WorkloadError = err.Error()
		return r, nil
	}
	r.Node = node
	return r, nil
}

// WriteText prints the report for a terminal.
func (r *MachineReport) WriteText(w io.Writer) error {
	if r.ClusterAPI != nil {
		return r.writeClusterAPI(w)
	}
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

// writeClusterAPI prints a Cluster API Machine's report.
func (r *MachineReport) writeClusterAPI(w io.Writer) error {
	p := &printer{w: w}
	c := r.ClusterAPI
	node := "no node yet"
	if r.NodeName != "" {
		node = "node " + r.NodeName
	}
	p.line(0, "Machine %s (Cluster API, workload cluster %s): %s, %s", r.Machine, c.Cluster, r.Phase, node)
	switch {
	case !c.OptedIn && c.Held:
		p.line(1, "not opted in (%s), but still held by pitstop's pre-drain hook: pitstop removes it", clusterapi.LabelEnabled)
	case !c.OptedIn:
		p.line(1, "not opted in (%s is not \"true\"): Cluster API drains and deletes it on its own", clusterapi.LabelEnabled)
	case c.Deleting && c.Held:
		p.line(1, "being deleted: held by pitstop's pre-drain hook until the workload node carries %s=true", clusterapi.LabelApproveDeletion)
	case c.Deleting:
		p.line(1, "being deleted: the workload node approved (or has none); Cluster API drains and deletes it")
	case c.Held:
		p.line(1, "opted in: a deletion will wait for the workload node's approval")
	default:
		p.line(1, "opted in, not held yet: its workload node carries no maintenance state (pitstop.dev/state or cloud.sap/maintenance-state)")
	}
	switch c.Maintenance {
	case clusterapi.MaintenanceRequested:
		p.line(1, "maintenance requested: waiting for the workload node to carry %s=true", clusterapi.LabelApproveMaintenance)
	case clusterapi.MaintenanceApproved:
		p.line(1, "maintenance approved by the workload node")
	}
	if c.Unreachable != "" {
		p.line(1, "UNREACHABLE: %s", c.Unreachable)
	}
	if c.WorkloadError != "" {
		p.line(1, "the workload node could not be read: %s", c.WorkloadError)
	}
	if p.err != nil || r.Node == nil {
		return p.err
	}
	p.line(0, "")
	return r.Node.WriteText(w)
}

// unqueried stands in for Prometheus in the report on a workload cluster's
// node: the URLs of its profiles' prometheusInstant checks are the
// workload cluster owner's to write, and the report runs where an
// administrator runs it, inside networks that owner must not reach through
// it. The check shows as an error saying so.
type unqueried struct{}

func (unqueried) Query(_ context.Context, url string, _ check.Credentials, _ string, _ time.Time) (float64, error) {
	return 0, fmt.Errorf("not queried: %s comes from a profile of the workload cluster, and explain sends no request its owner chose", url)
}
