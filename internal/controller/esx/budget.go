package esx

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/budget"
	"github.com/pitstop-dev/pitstop/internal/cloud/vsphere"
	"github.com/pitstop-dev/pitstop/internal/maintenance"
)

// budgetKey is the integration's budget: a host holds many nodes, and
// cloud.sap/esx-reboot-ok is a label anyone with nodes/patch can set, so
// no more than maxMaintenance nodes are taken down at once, whatever their
// hosts.
var budgetKey = budget.SourceKey(pitstopv1alpha1.SourceESX)

// acquire takes a slot of the integration's budget for node n (holding one
// already is success), or records that it waits for one.
func (c *Controller) acquire(ctx context.Context, cfg *Config, n *corev1.Node) (bool, error) {
	_, got, err := c.slots.Acquire(ctx, budgetKey, cfg.MaxMaintenance, n.Name, c.clock.Now(), c.stale(ctx))
	if err != nil {
		return false, fmt.Errorf("taking a slot of the ESX budget for node %s: %w", n.Name, err)
	}
	if !got {
		holders, _ := c.slots.Holders(ctx, budgetKey)
		c.recorder.Eventf(n, nil, corev1.EventTypeNormal, EventWaitingForBudget, "Drain",
			"waiting: the ESX integration takes %d nodes down at once (maxMaintenance), and has %s", cfg.MaxMaintenance, strings.Join(holders, ", "))
	}
	return got, nil
}

// stale says a slot's holder is no longer in the integration's hands: it
// has no NodeMaintenance (or only one being deleted), and its node is gone
// or no longer waits to go down (its host back, or no esx-reboot-ok).
func (c *Controller) stale(ctx context.Context) budget.Stale {
	return maintenance.SourceStale(ctx, c.reader, maintenance.PrefixESX, func(n *corev1.Node) bool {
		return n.Labels[LabelRebootOK] == "true" && n.Labels[LabelInMaintenance] != "" && n.Labels[LabelInMaintenance] != vsphere.InMaintenanceFalse
	})
}
