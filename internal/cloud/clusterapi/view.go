package clusterapi

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/engine"
)

// ClusterView is one workload cluster as the dashboard shows it: its
// opted-in Machines, each with its workload Node's maintenance state and
// why it waits.
type ClusterView struct {
	// Cluster is "namespace/name".
	Cluster string `json:"cluster"`
	// Connected: pitstop reads the cluster's Nodes.
	Connected bool `json:"connected"`
	// Error says why the cluster cannot be read.
	Error    string        `json:"error,omitempty"`
	Machines []MachineView `json:"machines"`
}

// MachineView is one opted-in Machine.
type MachineView struct {
	Machine string `json:"machine"`
	Phase   string `json:"phase,omitempty"`
	Node    string `json:"node,omitempty"`
	// Held: pitstop's pre-drain hook holds Cluster API's drain and
	// deletion.
	Held     bool `json:"held"`
	Deleting bool `json:"deleting"`
	// Maintenance is requested, approved or "".
	Maintenance string `json:"maintenance,omitempty"`
	// State is the workload Node's maintenance state (pitstop's, or the
	// maintenance-controller's); "" when unknown.
	State string `json:"state,omitempty"`
	// Waiting says, per profile the Node is not operational in, since
	// when and what holds it (its failed checks, its last error), as the
	// Node's record keeps it.
	Waiting []string `json:"waiting,omitempty"`
	// Unreachable is the Machine's condition when its cluster cannot be
	// read.
	Unreachable string `json:"unreachable,omitempty"`
}

// View lists the opted-in Machines of reader (the manager's cache) by
// cluster, their Nodes read from the connections pitstop holds (no
// request to a workload cluster).
func (c *Clusters) View(ctx context.Context, reader client.Reader) ([]ClusterView, error) {
	list := &clusterv1.MachineList{}
	if err := reader.List(ctx, list, client.MatchingLabels{LabelEnabled: "true"}); err != nil {
		return nil, err
	}
	byCluster := map[clusterKey]*ClusterView{}
	conns := map[clusterKey]*Conn{}
	for i := range list.Items {
		m := &list.Items[i]
		key := KeyOf(m)
		v := byCluster[key]
		if v == nil {
			v = &ClusterView{Cluster: key.String(), Machines: []MachineView{}}
			byCluster[key] = v
			c.mu.Lock()
			conns[key] = c.conns[key]
			f, failed := c.failed[key]
			c.mu.Unlock()
			cn := conns[key]
			switch {
			case cn == nil && failed:
				v.Error = f.err.Error()
			case cn == nil:
				v.Error = "not connected yet"
			case !cn.synced():
				v.Error = "listing its Nodes"
				cn.mu.Lock()
				if cn.err != nil {
					v.Error = cn.err.Error()
				}
				cn.mu.Unlock()
			default:
				v.Connected = true
			}
		}
		mv := MachineView{
			Machine: m.Name, Phase: m.Status.Phase, Node: m.Status.NodeRef.Name, Held: m.Annotations[AnnotationHook] != "",
			Deleting: !m.DeletionTimestamp.IsZero(), Maintenance: m.Labels[LabelMaintenance],
		}
		if cond := meta.FindStatusCondition(m.Status.Conditions, ConditionWorkloadReachable); cond != nil && cond.Status == metav1.ConditionFalse {
			mv.Unreachable = cond.Message
		}
		if v.Connected && mv.Node != "" {
			describeNode(conns[key], &mv)
		}
		v.Machines = append(v.Machines, mv)
	}
	out := make([]ClusterView, 0, len(byCluster))
	for _, v := range byCluster {
		sort.Slice(v.Machines, func(i, j int) bool { return v.Machines[i].Machine < v.Machines[j].Machine })
		out = append(out, *v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Cluster < out[j].Cluster })
	return out, nil
}

// describeNode fills in the Machine's workload Node, read through cn: its
// state and, from its record, what it waits for.
func describeNode(cn *Conn, mv *MachineView) {
	node, err := cn.Node(mv.Node)
	if err != nil || node == nil {
		if node == nil && err == nil {
			mv.Waiting = []string{"the Node does not exist in the workload cluster"}
		}
		return
	}
	mv.State = node.Labels[pitstopv1alpha1.LabelState]
	if mv.State == "" {
		mv.State = node.Labels[pitstopv1alpha1.LabelSeedState]
	}
	record, err := engine.ReadRecord(node)
	if err != nil {
		mv.Waiting = []string{err.Error()}
		return
	}
	for _, name := range slices.Sorted(maps.Keys(record.Profiles)) {
		pr := record.Profiles[name]
		if pr.Current == pitstopv1alpha1.StateOperational {
			continue
		}
		var failed []string
		for check, passed := range pr.Checks {
			if !passed {
				failed = append(failed, check)
			}
		}
		sort.Strings(failed)
		s := fmt.Sprintf("profile %s: %s since %s", name, pr.Current, pr.Since.UTC().Format(time.RFC3339))
		if len(failed) > 0 {
			s += "; failing: " + strings.Join(failed, ", ")
		}
		if pr.LastError != "" {
			s += "; last error: " + pr.LastError
		}
		mv.Waiting = append(mv.Waiting, s)
	}
}
