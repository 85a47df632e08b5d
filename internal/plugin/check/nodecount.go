package check

import (
	"context"
	"fmt"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

// nodeCount passes when the cluster has at least count nodes, whatever
// their state: a guard against maintaining a cluster that has lost nodes.
type nodeCount struct {
	count int
}

func newNodeCount(cfg *pitstopv1alpha1.NodeCountCheck) (Check, error) {
	if cfg.Count < 0 {
		return nil, fmt.Errorf("count: must not be negative, got %d", cfg.Count)
	}
	return &nodeCount{count: int(cfg.Count)}, nil
}

// Evaluate implements Check.
func (n *nodeCount) Evaluate(_ context.Context, c Context) (Result, error) {
	have := len(c.Cluster.Nodes())
	return Result{Passed: have >= n.count, Reason: fmt.Sprintf("%d nodes, at least %d wanted", have, n.count)}, nil
}
