package nodemaintenance

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

// NodeWriter cordons and restores nodes as the controller does for one
// NodeMaintenance, reading through reader when the node it was given is
// stale.
type NodeWriter struct {
	r  *Reconciler
	nm *pitstopv1alpha1.NodeMaintenance
}

// NewNodeWriter returns a NodeWriter writing through c.
func NewNodeWriter(c client.Client, reader client.Reader) NodeWriter {
	return NodeWriter{&Reconciler{client: c, apiReader: reader}, &pitstopv1alpha1.NodeMaintenance{}}
}

// Cordon cordons node as read, recording whether it was cordoned before
// as the controller does at the first cordon; it returns the node as
// written and whether it wrote.
func (w NodeWriter) Cordon(ctx context.Context, node *corev1.Node) (*corev1.Node, bool, error) {
	var before bool
	written, wrote, err := w.r.patchNode(ctx, node, cordonFor(w.nm, nil, &before))
	if err == nil {
		w.nm.Status.CordonedBefore = &before
	}
	return written, wrote, err
}

// Restore restores node as read, and ends the maintenance: the next
// Cordon is another's.
func (w NodeWriter) Restore(ctx context.Context, node *corev1.Node) (*corev1.Node, bool, error) {
	written, wrote, err := w.r.patchNode(ctx, node, func(n *corev1.Node) *corev1.Node { return restored(w.nm, n) })
	if err == nil {
		w.nm.Status.CordonedBefore = nil
	}
	return written, wrote, err
}

// NewMaintenancesCollector is the collector of the NodeMaintenance gauges,
// reading through reader at clk's time.
func NewMaintenancesCollector(reader client.Reader, clk clock.PassiveClock) prometheus.Collector {
	return newMaintenancesCollector(reader, clk)
}

// ControlPlaneTurn is the budget through which managers take turns to
// cordon control-plane nodes.
var ControlPlaneTurn = controlPlaneTurn

// ShortenQuorumRetry makes a control-plane maintenance held back by the
// quorum rule look again every d until the test ends. Call it before the
// manager starts.
func ShortenQuorumRetry(t interface{ Cleanup(func()) }, d time.Duration) {
	was := quorumRetry
	quorumRetry = d
	t.Cleanup(func() { quorumRetry = was })
}
