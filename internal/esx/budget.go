package esx

import (
	"context"
	"fmt"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/budget"
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
// or no longer waits to go down (its host back, or no esx-reboot-ok). It
// reads the API server, so that a cache that lags cannot free a slot still
// needed, and no clock, so that clocks that disagree cannot either.
func (c *Controller) stale(ctx context.Context) budget.Stale {
	return func(holder string, _ *coordinationv1.Lease) bool {
		nm := &pitstopv1alpha1.NodeMaintenance{}
		err := c.reader.Get(ctx, client.ObjectKey{Name: maintenance.Name(maintenance.PrefixESX, holder)}, nm)
		switch {
		case err == nil && nm.DeletionTimestamp.IsZero():
			return false
		case err != nil && !apierrors.IsNotFound(err):
			return false
		}
		n := &corev1.Node{}
		if err := c.reader.Get(ctx, client.ObjectKey{Name: holder}, n); err != nil {
			return apierrors.IsNotFound(err)
		}
		waits := n.Labels[LabelRebootOK] == "true" && n.Labels[LabelInMaintenance] != "" && n.Labels[LabelInMaintenance] != InMaintenanceFalse
		return !waits
	}
}
