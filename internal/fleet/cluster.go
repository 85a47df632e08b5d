package fleet

import (
	"context"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/admission"
	"github.com/pitstop-dev/pitstop/internal/budget"
	"github.com/pitstop-dev/pitstop/internal/engine"
	"github.com/pitstop-dev/pitstop/internal/plugin/check"
)

// Cluster is the read-only view of the cluster checks get, read from
// the manager's cache once per reconcile and only when a check asks. The
// nodes are the cache's own objects, not copies: nothing here changes them.
type Cluster struct {
	ctx      context.Context
	reader   client.Reader
	profiles []pitstopv1alpha1.MaintenanceProfile
	records  *Records
	// slots reads the budgets' slot Leases from the cache; nil knows of
	// no slots.
	slots *budget.Slots
	// holders keeps each budget's slot holders once read: `pitstop
	// explain` reads them from the API server, once per view.
	holders map[budget.Key][]string
	// list reads the nodes; nil lists them through reader.
	list   NodeLister
	nodes  []*corev1.Node
	loaded bool
	// lines are the nodes in line for each budget, found once per view
	// (Evaluator.lines).
	lines admission.Lines
	// selectors are the profiles' node selectors, parsed once per view.
	selectors map[string]func(*corev1.Node) bool
	// occupiedCached is every node under maintenance as the cache shows
	// it, found once per view (Occupied).
	occupiedCached map[string]bool
	// byName indexes nodes by name, built once per view (Node) when
	// there is no index.
	byName map[string]*corev1.Node
	// index reads the nodes holding budget slots, and nodes by name,
	// without listing every node (WithIndex); nil lists every node.
	index *NodeIndex
	// holdingNodes are the nodes the index names holding budget slots,
	// read once per view (HoldingNodes).
	holdingNodes  []*corev1.Node
	holdingLoaded bool
}

// NewCluster is the cluster as reader (the manager's cache) shows it:
// nodes listed by list (nil lists them through reader), the profiles,
// nodes' records decoded once per version by records, and the budgets'
// slots read through slots (nil knows of none).
func NewCluster(ctx context.Context, reader client.Reader, list NodeLister, profiles []pitstopv1alpha1.MaintenanceProfile, records *Records, slots *budget.Slots) *Cluster {
	return &Cluster{ctx: ctx, reader: reader, list: list, profiles: profiles, records: records, slots: slots}
}

// selects says whether the profile applies to the node.
func (v *Cluster) selects(p *pitstopv1alpha1.MaintenanceProfile, node *corev1.Node) bool {
	f, ok := v.selectors[p.Name]
	if !ok {
		f, _ = engine.Selector(p) // nil for a selector that does not parse: selects nothing
		if v.selectors == nil {
			v.selectors = map[string]func(*corev1.Node) bool{}
		}
		v.selectors[p.Name] = f
	}
	return f != nil && f(node)
}

func (v *Cluster) load() {
	if v.loaded {
		return
	}
	v.loaded = true
	list := v.list
	if list == nil {
		list = ListNodes(v.reader)
	}
	if nodes, err := list(v.ctx); err == nil {
		v.nodes = nodes
		v.records.prune(v.nodes)
	}
}

// NodeLister reads every node, the cache's own objects: read them, never
// change them.
type NodeLister func(context.Context) ([]*corev1.Node, error)

// ListNodes lists the nodes through a reader of the manager's cache.
func ListNodes(reader client.Reader) NodeLister {
	return func(ctx context.Context) ([]*corev1.Node, error) {
		list := &corev1.NodeList{}
		if err := reader.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
			return nil, err
		}
		return Pointers(list.Items), nil
	}
}

// InformerNodes reads the nodes straight from the informer's store: a
// list through the cache copies every node into a new array (about a
// megabyte at 1,000 nodes), and each of the engine's concurrent
// evaluations, waiting on the API server, would hold one.
func InformerNodes(c cache.Cache) (NodeLister, error) {
	informer, err := c.GetInformer(context.Background(), &corev1.Node{})
	if err != nil {
		return nil, err
	}
	store, ok := informer.(toolscache.SharedIndexInformer)
	if !ok {
		return ListNodes(c), nil
	}
	return func(context.Context) ([]*corev1.Node, error) {
		items := store.GetStore().List()
		nodes := make([]*corev1.Node, 0, len(items))
		for _, item := range items {
			if n, ok := item.(*corev1.Node); ok {
				nodes = append(nodes, n)
			}
		}
		return nodes, nil
	}, nil
}

func Pointers(nodes []corev1.Node) []*corev1.Node {
	out := make([]*corev1.Node, len(nodes))
	for i := range nodes {
		out[i] = &nodes[i]
	}
	return out
}

// Records keeps each node's decoded record for the node's current
// version, so that checks counting over the fleet decode a node once per
// change rather than once per evaluation of every other node. Records
// handed out are shared: read them, never change them.
type Records struct {
	mu     sync.Mutex
	byNode map[string]cachedRecord
}

type cachedRecord struct {
	version string
	record  engine.Record
	err     error
}

func NewRecords() *Records { return &Records{byNode: map[string]cachedRecord{}} }

func (c *Records) Read(n *corev1.Node) (engine.Record, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byNode[n.Name]; ok && n.ResourceVersion != "" && e.version == n.ResourceVersion {
		return e.record, e.err
	}
	rec, err := engine.ReadRecord(n)
	c.byNode[n.Name] = cachedRecord{version: n.ResourceVersion, record: rec, err: err}
	return rec, err
}

// Forget drops the record of a node that is gone.
func (c *Records) Forget(node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.byNode, node)
}

// prune forgets nodes that are gone, once they are a good share of the
// entries.
func (c *Records) prune(nodes []*corev1.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.byNode) <= 2*len(nodes)+16 {
		return
	}
	live := make(map[string]bool, len(nodes))
	for i := range nodes {
		live[nodes[i].Name] = true
	}
	for name := range c.byNode {
		if !live[name] {
			delete(c.byNode, name)
		}
	}
}

// Nodes returns every node.
func (v *Cluster) Nodes() []*corev1.Node {
	v.load()
	return v.nodes
}

// ProfileNodes returns the nodes the profile selects, shared with the
// view: read them, never change them.
func (v *Cluster) ProfileNodes(profile string) []*corev1.Node {
	v.load()
	var p *pitstopv1alpha1.MaintenanceProfile
	for i := range v.profiles {
		if v.profiles[i].Name == profile {
			p = &v.profiles[i]
		}
	}
	var out []*corev1.Node
	for _, n := range v.nodes {
		if p == nil {
			break
		}
		if v.selects(p, n) {
			out = append(out, n)
		}
	}
	return out
}

// StateOf reads a node's state in a profile from its record.
func (v *Cluster) StateOf(node *corev1.Node, profile string) (pitstopv1alpha1.MaintenanceState, bool) {
	rec, err := v.records.Read(node)
	if err != nil {
		return "", false
	}
	return rec.Profiles[profile].Current, rec.HeldBy() != ""
}

// InMaintenanceSince is when the node entered in-maintenance for the
// profile holding it, from its record.
func (v *Cluster) InMaintenanceSince(node string) (time.Time, bool) {
	n := v.Node(node)
	if n == nil {
		return time.Time{}, false
	}
	rec, err := v.records.Read(n)
	if err != nil {
		return time.Time{}, false
	}
	held := rec.HeldBy()
	if held == "" {
		return time.Time{}, false
	}
	return rec.Profiles[held].Since.Time, true
}

// PodsOn lists the pods bound to a node (through the cache's index).
func (v *Cluster) PodsOn(node string) []corev1.Pod {
	list := &corev1.PodList{}
	if err := v.reader.List(v.ctx, list, client.MatchingFields{"spec.nodeName": node}); err != nil {
		return nil
	}
	return list.Items
}

// SlotHolders names the nodes holding slots of a maxMaintenance budget,
// from the cache.
func (v *Cluster) SlotHolders(profile string, m *pitstopv1alpha1.MaxMaintenanceCheck, group string) []string {
	key := check.MaxMaintenanceKey(profile, m, group)
	if h, ok := v.holders[key]; ok {
		return h
	}
	if v.holders == nil {
		v.holders = map[budget.Key][]string{}
	}
	v.holders[key] = v.slots.CachedHolders(v.ctx, key, int(m.Max))
	return v.holders[key]
}

// EnteredMaintenance lists when the profile's nodes entered maintenance,
// for the stagger check.
func (v *Cluster) EnteredMaintenance(profile string) []time.Time {
	var out []time.Time
	for _, n := range v.HoldingNodes() {
		rec, err := v.records.Read(n)
		if err != nil {
			continue
		}
		if pr, ok := rec.Profiles[profile]; ok && pr.Current == pitstopv1alpha1.StateInMaintenance {
			out = append(out, pr.Since.Time)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}
