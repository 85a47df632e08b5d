package nodemaintenance

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NodeWriter cordons and restores nodes as the controller does, reading
// through reader when the node it was given is stale.
type NodeWriter struct{ r *Reconciler }

// NewNodeWriter returns a NodeWriter writing through c.
func NewNodeWriter(c client.Client, reader client.Reader) NodeWriter {
	return NodeWriter{&Reconciler{client: c, apiReader: reader}}
}

// Cordon cordons node as read; it returns the node as written and whether
// it wrote.
func (w NodeWriter) Cordon(ctx context.Context, node *corev1.Node) (*corev1.Node, bool, error) {
	return w.r.patchNode(ctx, node, cordoned)
}

// Restore restores node as read.
func (w NodeWriter) Restore(ctx context.Context, node *corev1.Node) (*corev1.Node, bool, error) {
	return w.r.patchNode(ctx, node, restored)
}

// NewMaintenancesCollector is the collector of the NodeMaintenance gauges,
// reading through reader at clk's time.
func NewMaintenancesCollector(reader client.Reader, clk clock.PassiveClock) prometheus.Collector {
	return newMaintenancesCollector(reader, clk)
}

// ControlPlaneTurn is the budget through which managers take turns to
// cordon control-plane nodes.
var ControlPlaneTurn = controlPlaneTurn
