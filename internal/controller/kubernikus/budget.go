package kubernikus

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/budget"
	"github.com/pitstop-dev/pitstop/internal/maintenance"
)

// budgetKey is the integration's budget: a label anyone with nodes/patch
// can set must not take more than maxMaintenance nodes at once.
var budgetKey = budget.SourceKey(pitstopv1alpha1.SourceKubernikus)

// acquire takes a slot of the integration's budget for node (holding one
// already is success), or records that the node waits for one.
func (r *Reconciler) acquire(ctx context.Context, cfg *Config, node string) (bool, error) {
	_, got, err := r.slots.Acquire(ctx, budgetKey, cfg.MaxMaintenance, node, time.Now(), r.stale(ctx))
	if err != nil {
		return false, fmt.Errorf("taking a slot of the Kubernikus budget for node %s: %w", node, err)
	}
	if !got {
		holders, _ := r.slots.Holders(ctx, budgetKey)
		r.recorder.Eventf(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, nil, corev1.EventTypeNormal, EventWaitingForBudget, "Drain",
			"waiting: the Kubernikus integration has %d nodes in hand at once (maxMaintenance), and has %s", cfg.MaxMaintenance, strings.Join(holders, ", "))
	}
	return got, nil
}

// stale says a slot's holder is no longer in the integration's hands: it
// has no drain (or only one being deleted), and its node is gone or no
// longer asks for one; the drain of a node gone is deleted before its slot
// is free.
func (r *Reconciler) stale(ctx context.Context) budget.Stale {
	return maintenance.SourceStale(ctx, r.reader, maintenance.PrefixKubernikus, asksDeletion)
}

// letGo deletes the node's drain and gives its slot back.
func (r *Reconciler) letGo(ctx context.Context, node, nmName string) error {
	nm := &pitstopv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: nmName}}
	if err := r.client.Delete(ctx, nm); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting NodeMaintenance %s: %w", nmName, err)
	}
	if err := r.slots.Release(ctx, budgetKey, node); err != nil {
		return fmt.Errorf("giving back the Kubernikus budget slot of node %s: %w", node, err)
	}
	return nil
}
