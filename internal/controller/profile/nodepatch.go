package profile

import (
	"context"
	corev1 "k8s.io/api/core/v1"

	"github.com/pitstop-dev/pitstop/internal/engine"
	"github.com/pitstop-dev/pitstop/internal/nodepatch"
)

// writeNode writes the engine's changes to a node: its record, its state
// label and what the transitions' triggers changed. It reports
// nodepatch.ErrStale when the node changed since it was read in a way the
// write depends on.
//
// The write is locked on the record and on every label and annotation it
// changes, not on the whole node (nodepatch): writes to other fields in
// between (the NodeMaintenance controller's cordon, the kubelet's status,
// another controller's labels) no longer make it fail and evaluate the
// node again; another writer of the record (a second manager during a
// leader handover) still does. A finalizer change (the alterFinalizer
// trigger) is written with an optimistic lock on the whole node.
func (r *Reconciler) writeNode(ctx context.Context, node, want *corev1.Node) error {
	return nodepatch.Write(ctx, r.client, r.apiReader, node, want, nodepatch.Lock{Annotations: []string{engine.AnnotationData}})
}
