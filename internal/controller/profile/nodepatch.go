package profile

import (
	"context"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/resourceversion"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/fleet"
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
	err := nodepatch.Write(ctx, r.client, r.apiReader, node, want, nodepatch.Lock{Annotations: []string{pitstopv1alpha1.AnnotationMaintenanceData}})
	if err == nil {
		r.written.remember(want.DeepCopy())
	}
	return err
}

// writtenNodes keeps the node each of the engine's writes returned until
// the manager's cache shows that version or a later one: the evaluation
// that follows a move (at once, to take the next transition if it is due)
// then starts from the engine's own write instead of a cached node from
// before it. Evaluated from that older node, it would find the move not
// yet made, run its triggers again and try to write it again, to be told
// by the API server that the record has changed.
type writtenNodes struct {
	mu    sync.Mutex
	nodes map[string]*corev1.Node
}

func newWrittenNodes() *writtenNodes { return &writtenNodes{nodes: map[string]*corev1.Node{}} }

// remember keeps the node as a write returned it (the caller no longer
// changes it).
func (w *writtenNodes) remember(node *corev1.Node) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.nodes[node.Name] = node
}

// newest returns a copy of the node last written when the cached node is
// older than it, and the cached node otherwise, forgetting the written one
// once the cache has caught up (olderThan).
func (w *writtenNodes) newest(cached *corev1.Node) *corev1.Node {
	w.mu.Lock()
	defer w.mu.Unlock()
	written, ok := w.nodes[cached.Name]
	if !ok {
		return cached
	}
	if olderThan(cached, written) {
		return written.DeepCopy()
	}
	delete(w.nodes, cached.Name)
	return cached
}

// over lists the nodes through list with the engine's own writes in place
// of the cached nodes they are newer than, for the checks that count over
// the fleet. A node is written out of maintenance before its budget slot
// is given back, and the node let into that slot is counted from the
// slot's Lease: counted from a cache that has not yet seen the first
// write, both would be counted, the budget would look exceeded to the
// nodes holding the other slots, and their moves into maintenance would
// wait until the cache caught up. The nodes handed out are shared: read
// them, never change them.
func (w *writtenNodes) over(list fleet.NodeLister) fleet.NodeLister {
	return func(ctx context.Context) ([]*corev1.Node, error) {
		nodes, err := list(ctx)
		if err != nil {
			return nil, err
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if len(w.nodes) == 0 {
			return nodes, nil
		}
		out, cloned := nodes, false
		for i, n := range nodes {
			written, ok := w.nodes[n.Name]
			if !ok || !olderThan(n, written) {
				continue
			}
			if !cloned {
				out, cloned = slices.Clone(nodes), true // the lister's slice is not changed either
			}
			out[i] = written
		}
		return out, nil
	}
}

// overIndex reads ix with the engine's own writes in place of the cached
// nodes they are newer than, as over lists them: a node the engine has
// just written into maintenance is among those holding budget slots
// before the cache shows it there. nil without an index.
func (w *writtenNodes) overIndex(ix *fleet.NodeIndex) *fleet.NodeIndex {
	if ix == nil {
		return nil
	}
	get := func(ctx context.Context, name string) (*corev1.Node, error) {
		cached, err := ix.Get(ctx, name)
		if cached == nil || err != nil {
			return cached, err
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if written, ok := w.nodes[name]; ok && olderThan(cached, written) {
			return written, nil
		}
		return cached, nil
	}
	holding := func(ctx context.Context) ([]*corev1.Node, error) {
		nodes, err := ix.Holding(ctx)
		if err != nil {
			return nil, err
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if len(w.nodes) == 0 {
			return nodes, nil
		}
		out := make([]*corev1.Node, 0, len(nodes))
		listed := make(map[string]bool, len(nodes))
		for _, n := range nodes {
			listed[n.Name] = true
			if written, ok := w.nodes[n.Name]; ok && olderThan(n, written) {
				n = written
			}
			out = append(out, n)
		}
		// The others written since the cache last showed them may hold
		// slots now: the callers read their records.
		for name, written := range w.nodes {
			if listed[name] {
				continue
			}
			cached, err := ix.Get(ctx, name)
			if err != nil {
				return nil, err
			}
			if cached != nil && olderThan(cached, written) {
				out = append(out, written)
			}
		}
		return out, nil
	}
	return &fleet.NodeIndex{Holding: holding, Get: get}
}

// olderThan says the cached node is an older version than the written
// one. Resource versions of one resource are ordered
// (resourceversion.CompareResourceVersion); one that does not parse
// counts as caught up.
func olderThan(cached, written *corev1.Node) bool {
	cmp, err := resourceversion.CompareResourceVersion(cached.ResourceVersion, written.ResourceVersion)
	return err == nil && cmp < 0
}

// forget drops a node that is gone.
func (w *writtenNodes) forget(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.nodes, name)
}
