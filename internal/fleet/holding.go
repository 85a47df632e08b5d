package fleet

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// indexHolding is the node informer's index of the nodes whose record
// holds budget slots (engine.Record.Holding), all under one value.
const indexHolding, holdingValue = "pitstop.dev/holding", "true"

// NodeIndex reads what a node's evaluation needs of the rest of the fleet
// without listing every node: the nodes whose record holds budget slots
// (in maintenance for a profile, or leaving it), as many as the budgets
// let in, and any node by name. Its nodes are the cache's own objects:
// read them, never change them.
type NodeIndex struct {
	// Holding lists at least every node whose record holds budget slots;
	// callers read each one's record.
	Holding NodeLister
	// Get returns the node named; nil when there is none.
	Get func(ctx context.Context, name string) (*corev1.Node, error)
}

// InformerIndex adds the index of the nodes holding budget slots to the
// node informer of c, and reads it and the informer's nodes by name,
// straight from the informer's store. The store keeps its indexes under
// the lock it keeps its nodes under, updated with each node it stores, so
// the index always names exactly the nodes of the store whose record
// holds slots: counting from it never misses a node that a look at every
// node would count. Records decodes each node's record once per version,
// for the index and the checks alike. A cache whose informer has no such
// store gives no index (nil): the Cluster then looks at every node.
func InformerIndex(c cache.Cache, records *Records) (*NodeIndex, error) {
	informer, err := c.GetInformer(context.Background(), &corev1.Node{})
	if err != nil {
		return nil, err
	}
	shared, ok := informer.(toolscache.SharedIndexInformer)
	if !ok {
		return nil, nil
	}
	err = shared.AddIndexers(toolscache.Indexers{indexHolding: func(obj any) ([]string, error) {
		n, ok := obj.(*corev1.Node)
		if !ok {
			return nil, nil
		}
		// A record that cannot be read holds nothing the checks count.
		if rec, err := records.Read(n); err == nil && rec.Holding() {
			return []string{holdingValue}, nil
		}
		return nil, nil
	}})
	if err != nil {
		return nil, err
	}
	store := shared.GetIndexer()
	return &NodeIndex{
		Holding: func(context.Context) ([]*corev1.Node, error) {
			items, err := store.ByIndex(indexHolding, holdingValue)
			if err != nil {
				return nil, err
			}
			nodes := make([]*corev1.Node, 0, len(items))
			for _, item := range items {
				if n, ok := item.(*corev1.Node); ok {
					nodes = append(nodes, n)
				}
			}
			return nodes, nil
		},
		Get: func(_ context.Context, name string) (*corev1.Node, error) {
			item, found, err := store.GetByKey(name) // a node's key is its name
			if err != nil || !found {
				return nil, err
			}
			n, _ := item.(*corev1.Node)
			return n, nil
		},
	}, nil
}

// WithIndex has the view read the nodes holding budget slots, and nodes by
// name, through ix rather than from a list of every node; nil keeps
// looking at every node.
func (v *Cluster) WithIndex(ix *NodeIndex) *Cluster {
	v.index = ix
	return v
}

// HoldingNodes returns at least every node whose record holds budget
// slots, found once per view: from the index, or every node without one
// (or when it cannot be read). Callers read each one's record.
func (v *Cluster) HoldingNodes() []*corev1.Node {
	if v.index == nil {
		return v.Nodes()
	}
	if !v.holdingLoaded {
		nodes, err := v.index.Holding(v.ctx)
		if err != nil {
			return v.Nodes()
		}
		v.holdingNodes, v.holdingLoaded = nodes, true
	}
	return v.holdingNodes
}

// Node returns the node named, nil when the cluster has none: from the
// index, or from the list of every node without one.
func (v *Cluster) Node(name string) *corev1.Node {
	if v.index != nil {
		if n, err := v.index.Get(v.ctx, name); err == nil {
			return n
		}
	}
	v.load()
	if v.byName == nil {
		v.byName = make(map[string]*corev1.Node, len(v.nodes))
		for _, n := range v.nodes {
			v.byName[n.Name] = n
		}
	}
	return v.byName[name]
}

// Selects says whether the profile selects the node, as ProfileNodes
// does: false for a profile the view does not have.
func (v *Cluster) Selects(profile string, node *corev1.Node) bool {
	for i := range v.profiles {
		if v.profiles[i].Name == profile {
			return v.selects(&v.profiles[i], node)
		}
	}
	return false
}
