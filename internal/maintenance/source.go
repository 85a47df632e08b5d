package maintenance

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

// SourceStale is the staleness rule of a source budget's slots (the ESX
// and Kubernikus integrations): a holder is no longer in the source's
// hands when it has no NodeMaintenance of the source (named with prefix),
// or only one being deleted, and its node is gone or no longer asks to go
// down (asks). It reads reader, the API server, so that a cache that lags
// cannot free a slot still needed, and no clock, so that clocks that
// disagree cannot either: a holder that asks and has no NodeMaintenance yet
// (it is being created) keeps its slot. An error reading keeps the slot.
func SourceStale(ctx context.Context, reader client.Reader, prefix string, asks func(*corev1.Node) bool) func(holder string, _ *coordinationv1.Lease) bool {
	return func(holder string, _ *coordinationv1.Lease) bool {
		nm := &pitstopv1alpha1.NodeMaintenance{}
		err := reader.Get(ctx, client.ObjectKey{Name: Name(prefix, holder)}, nm)
		switch {
		case err == nil && nm.DeletionTimestamp.IsZero():
			return false
		case err != nil && !apierrors.IsNotFound(err):
			return false
		}
		node := &corev1.Node{}
		if err := reader.Get(ctx, client.ObjectKey{Name: holder}, node); err != nil {
			return apierrors.IsNotFound(err)
		}
		return !asks(node)
	}
}
