package profile

import (
	"context"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/engine"
)

// clusterView is the read-only view of the cluster checks get, read from
// the manager's cache once per reconcile and only when a check asks.
type clusterView struct {
	ctx      context.Context
	reader   client.Reader
	profiles []pitstopv1alpha1.MaintenanceProfile
	nodes    []corev1.Node
	loaded   bool
}

func (v *clusterView) load() {
	if v.loaded {
		return
	}
	v.loaded = true
	list := &corev1.NodeList{}
	if err := v.reader.List(v.ctx, list); err == nil {
		v.nodes = list.Items
	}
}

// Nodes returns every node.
func (v *clusterView) Nodes() []corev1.Node {
	v.load()
	return v.nodes
}

// ProfileNodes returns the nodes the profile selects.
func (v *clusterView) ProfileNodes(profile string) []corev1.Node {
	v.load()
	var p *pitstopv1alpha1.MaintenanceProfile
	for i := range v.profiles {
		if v.profiles[i].Name == profile {
			p = &v.profiles[i]
		}
	}
	var out []corev1.Node
	for _, n := range v.nodes {
		if p == nil {
			break
		}
		if ok, _ := engine.Selects(p, &n); ok {
			out = append(out, n)
		}
	}
	return out
}

// StateOf reads a node's state in a profile from its record.
func (v *clusterView) StateOf(node *corev1.Node, profile string) (pitstopv1alpha1.MaintenanceState, bool) {
	rec, err := engine.ReadRecord(node)
	if err != nil {
		return "", false
	}
	return rec.Profiles[profile].Current, rec.HeldBy() != ""
}

// PodsOn lists the pods bound to a node (through the cache's index).
func (v *clusterView) PodsOn(node string) []corev1.Pod {
	list := &corev1.PodList{}
	if err := v.reader.List(v.ctx, list, client.MatchingFields{"spec.nodeName": node}); err != nil {
		return nil
	}
	return list.Items
}

// EnteredMaintenance lists when the profile's nodes entered maintenance,
// for the stagger check.
func (v *clusterView) EnteredMaintenance(profile string) []time.Time {
	v.load()
	var out []time.Time
	for i := range v.nodes {
		rec, err := engine.ReadRecord(&v.nodes[i])
		if err != nil {
			continue
		}
		if pr, ok := rec.Profiles[profile]; ok && pr.Current == pitstopv1alpha1.StateInMaintenance {
			out = append(out, pr.Since.Time)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}
