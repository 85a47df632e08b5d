package check

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

// operationalAffinityKeys are the node labels a pod's preferred node
// affinity may name to prefer operational nodes: the seed's, so workloads
// written for sapcc/maintenance-controller keep working, and pitstop's.
var operationalAffinityKeys = []string{pitstopv1alpha1.LabelSeedState, pitstopv1alpha1.LabelState}

// affinity orders nodes waiting in maintenance-required: nodes none of
// whose pods prefer operational nodes go first, so they come back
// operational for the pods that do. As in the seed it applies only to
// maintenance-required (elsewhere it is an error, a profile mistake), and
// a pod prefers operational nodes when one of its preferred node affinity
// terms has the expression `<key> In [operational]` with exactly that one
// value, key being one of operationalAffinityKeys. Pods that have
// completed (Succeeded, Failed) are ignored: they will not be rescheduled.
//
// It only orders, never blocks for good: a node with such pods fails only
// while another maintenance-required node of the profile has none, and
// passes once every maintenance-required node has some (the seed's rule).
// With minOperational set it passes, whatever the pods, while at least
// minOperational nodes of the profile are operational, as the seed's does:
// the pods that prefer operational nodes have enough of them, so the order
// does not matter.
type affinity struct {
	minOperational int
}

func newAffinity(cfg *pitstopv1alpha1.AffinityCheck) (Check, error) {
	if cfg.MinOperational < 0 {
		return nil, fmt.Errorf("minOperational: must not be negative, got %d", cfg.MinOperational)
	}
	return &affinity{minOperational: int(cfg.MinOperational)}, nil
}

// Evaluate implements Check.
func (a *affinity) Evaluate(_ context.Context, c Context) (Result, error) {
	if c.State != pitstopv1alpha1.StateMaintenanceRequired {
		return Result{}, fmt.Errorf("affinity orders nodes in %s only, node %s is %s",
			pitstopv1alpha1.StateMaintenanceRequired, c.Node.Name, stateName(c))
	}
	nodes := c.Cluster.ProfileNodes(c.Profile)
	if a.minOperational > 0 {
		operational := 0
		for _, n := range nodes {
			if state, _ := c.Cluster.StateOf(n, c.Profile); state == pitstopv1alpha1.StateOperational {
				operational++
			}
		}
		if operational >= a.minOperational {
			return Result{Passed: true, Reason: fmt.Sprintf("%d nodes operational, at least minOperational %d", operational, a.minOperational)}, nil
		}
	}
	if !prefersOperational(c.Cluster.PodsOn(c.Node.Name)) {
		return Result{Passed: true, Reason: "no pod on the node prefers operational nodes"}, nil
	}
	var first []string
	for _, n := range nodes {
		if n.Name == c.Node.Name {
			continue
		}
		if state, _ := c.Cluster.StateOf(n, c.Profile); state != pitstopv1alpha1.StateMaintenanceRequired {
			continue
		}
		if !prefersOperational(c.Cluster.PodsOn(n.Name)) {
			first = append(first, n.Name)
		}
	}
	if len(first) == 0 {
		return Result{Passed: true, Reason: "pods prefer operational nodes here, and on every other node waiting"}, nil
	}
	slices.Sort(first)
	return Result{Reason: "pods prefer operational nodes here; waiting nodes without such pods go first: " + boundedList(first, 3)}, nil
}

// prefersOperational says whether any pod prefers operational nodes.
func prefersOperational(pods []corev1.Pod) bool {
	for i := range pods {
		p := &pods[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if p.Spec.Affinity == nil || p.Spec.Affinity.NodeAffinity == nil {
			continue
		}
		for _, term := range p.Spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			for _, expr := range term.Preference.MatchExpressions {
				if slices.Contains(operationalAffinityKeys, expr.Key) && expr.Operator == corev1.NodeSelectorOpIn &&
					len(expr.Values) == 1 && expr.Values[0] == string(pitstopv1alpha1.StateOperational) {
					return true
				}
			}
		}
	}
	return false
}

// boundedList writes at most limit names, "a, b, c and 2 more", so a
// reason stays short in a large cluster.
func boundedList(names []string, limit int) string {
	if len(names) <= limit {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:limit], ", "), len(names)-limit)
}
