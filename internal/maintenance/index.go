package maintenance

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pitstop-dev/pitstop/internal/podcache"
)

// IndexPodNode is the field index of the manager's pod cache by the node a
// pod is bound to: list a node's pods with
// client.MatchingFields{IndexPodNode: node}.
const IndexPodNode = "spec.nodeName"

// IndexPods registers IndexPodNode with the manager's cache; the
// NodeMaintenance controller does, and every controller of the manager
// reads it.
func IndexPods(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, &corev1.Pod{}, IndexPodNode, func(o client.Object) []string {
		if n := podcache.NodeName(o); n != "" {
			return []string{n}
		}
		return nil
	})
}
