package clusterapi

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// clusterKey names a workload cluster: its namespace in the management
// cluster and its name.
type clusterKey = types.NamespacedName

// Clusters keeps one connection (a watch of Node metadata) per workload
// cluster that has opted-in Machines: made when the first of them is
// seen, rebuilt when its kubeconfig Secret changes or its credentials are
// refused, closed when the last is gone, when the Secret is deleted, or
// when the cluster sends more than a connection may hold (bounds.go). A
// change of a workload Node wakes its Machine. It is a manager Runnable:
// its connections end with the manager.
type Clusters struct {
	secrets client.Reader
	log     logr.Logger
	// wake carries the Machines to reconcile.
	wake chan event.GenericEvent
	// base is the parent of every connection's context.
	base   context.Context
	cancel context.CancelFunc
	// recheck is how often a connection reads its Secret again, to close
	// when it is deleted even while no Machine is reconciled.
	recheck time.Duration

	mu    sync.Mutex
	conns map[clusterKey]*Conn
	// failed are the connections closed past a bound, kept until
	// failedRetry so that a hostile cluster is not read again at once.
	failed map[clusterKey]failure
	// users are the opted-in Machines and the cluster of each.
	users map[types.NamespacedName]clusterKey
}

// failure is why a cluster's connection was closed, and when.
type failure struct {
	version string
	err     error
	at      time.Time
}

// failedRetry is how long a cluster whose connection passed a bound is
// left alone (its Secret unchanged); secretRecheck how often a connection
// checks that its Secret is still there.
const (
	failedRetry   = time.Minute
	secretRecheck = 30 * time.Second
)

// NewClusters reads kubeconfig Secrets through secrets (a live reader: a
// rotation or deletion must be seen); each connection reads its Secret
// again every recheck (0: 30s).
func NewClusters(secrets client.Reader, log logr.Logger, recheck time.Duration) *Clusters {
	if recheck <= 0 {
		recheck = secretRecheck
	}
	base, cancel := context.WithCancel(context.Background())
	return &Clusters{
		secrets: secrets, log: log, wake: make(chan event.GenericEvent, 4096), base: base, cancel: cancel, recheck: recheck,
		conns: map[clusterKey]*Conn{}, failed: map[clusterKey]failure{}, users: map[types.NamespacedName]clusterKey{},
	}
}

// Start keeps the connections until ctx ends, then stops them all.
func (c *Clusters) Start(ctx context.Context) error {
	<-ctx.Done()
	c.cancel()
	return nil
}

// NeedLeaderElection: the connections serve the leader's controller.
func (c *Clusters) NeedLeaderElection() bool { return true }

// Wakes is the channel of Machines whose workload Node changed.
func (c *Clusters) Wakes() <-chan event.GenericEvent { return c.wake }

// Conn is one workload cluster's connection.
type Conn struct {
	// version is the kubeconfig Secret's resourceVersion it was built from.
	version string
	client  metadata.ResourceInterface
	nodes   cache.Indexer
	synced  cache.InformerSynced
	stop    context.CancelFunc
	Started time.Time

	mu sync.Mutex
	// err is the last error listing or watching Nodes, until a Node is
	// seen again.
	err error
	// refused: the API server refused the credentials (401); the next
	// use rebuilds the connection from the Secret.
	refused bool
	// closed says why the connection was closed; nil while it is open.
	closed error
}

// clusterOf is the workload cluster of a Machine.
func KeyOf(m *clusterv1.Machine) clusterKey {
	name := m.Spec.ClusterName
	if name == "" {
		name = m.Labels[clusterv1.ClusterNameLabel]
	}
	return clusterKey{Namespace: m.Namespace, Name: name}
}

// Use registers machine as a user of its cluster's connection and returns
// the connection, made or rebuilt as needed.
func (c *Clusters) Use(ctx context.Context, key clusterKey, machine types.NamespacedName) (*Conn, error) {
	if key.Name == "" {
		return nil, fmt.Errorf("the Machine names no cluster (spec.clusterName)")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.users[machine]; ok && old != key {
		c.releaseLocked(machine)
	}
	c.users[machine] = key
	secret, err := readKubeconfigSecret(ctx, c.secrets, key)
	if apierrors.IsNotFound(err) {
		// The Secret is gone: so is pitstop's access to the cluster.
		c.closeLocked(key, nil, "its kubeconfig Secret was deleted")
	}
	if err != nil {
		return nil, err
	}
	if f, ok := c.failed[key]; ok {
		if f.version == secret.ResourceVersion && time.Since(f.at) < failedRetry {
			return nil, f.err
		}
		delete(c.failed, key)
	}
	if cur, ok := c.conns[key]; ok {
		cur.mu.Lock()
		refused := cur.refused
		cur.mu.Unlock()
		if cur.version == secret.ResourceVersion && !refused {
			return cur, nil
		}
		why := "reconnecting: its kubeconfig Secret changed"
		if refused {
			why = "reconnecting: the workload API server refused the credentials"
		}
		c.closeLocked(key, nil, why)
	}
	cn, err := c.connect(key, secret)
	if err != nil {
		return nil, err
	}
	c.conns[key] = cn
	return cn, nil
}

// Release says machine no longer uses its cluster's connection (it is
// gone or no longer opted in); the last user stops it.
func (c *Clusters) Release(machine types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.releaseLocked(machine)
}

func (c *Clusters) releaseLocked(machine types.NamespacedName) {
	key, ok := c.users[machine]
	if !ok {
		return
	}
	delete(c.users, machine)
	for _, k := range c.users {
		if k == key {
			return
		}
	}
	delete(c.failed, key)
	if _, ok := c.conns[key]; ok {
		c.closeLocked(key, nil, "no opted-in Machine left")
	}
}

// closeLocked stops the cluster's connection (only if it is still only,
// when not nil), says why in the log, and forgets it.
func (c *Clusters) closeLocked(key clusterKey, only *Conn, why string) bool {
	cn, ok := c.conns[key]
	if !ok || (only != nil && cn != only) {
		return false
	}
	cn.mu.Lock()
	if cn.closed == nil {
		cn.closed = errors.New(why)
	}
	cn.mu.Unlock()
	cn.stop()
	delete(c.conns, key)
	c.log.Info("disconnected from the workload cluster", "cluster", key, "reason", why)
	return true
}

// fail closes a connection that passed a bound, remembers why until
// failedRetry, and wakes the cluster's Machines to report it.
func (c *Clusters) fail(key clusterKey, cn *Conn, err error) {
	err = fmt.Errorf("the connection to the workload cluster was closed: %w", err)
	c.mu.Lock()
	closed := c.closeLocked(key, cn, err.Error())
	if closed {
		c.failed[key] = failure{version: cn.version, err: err, at: time.Now()}
	}
	c.mu.Unlock()
	if closed {
		c.wakeCluster(key)
	}
}

// Connected says how many workload clusters pitstop is connected to.
func (c *Clusters) Connected() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.conns)
}

// connect checks the kubeconfig in the Secret, then builds a metadata
// client and a bounded informer of the cluster's Nodes from it. The
// kubeconfig is never logged.
func (c *Clusters) connect(key clusterKey, secret *corev1.Secret) (*Conn, error) {
	cfg, err := restConfigOf(secret)
	if err != nil {
		return nil, err
	}
	cn := &Conn{version: secret.ResourceVersion, Started: time.Now()}
	limitResponses(cfg, func(err error) { c.fail(key, cn, err) })
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("the kubeconfig Secret %s/%s: %w", secret.Namespace, secret.Name, err)
	}
	cn.client = mc.Resource(corev1.SchemeGroupVersion.WithResource("nodes"))
	ctx, stop := context.WithCancel(klog.NewContext(c.base, c.log.WithValues("cluster", key)))
	cn.stop = stop
	lw := &boundedNodes{client: cn.client, exceeded: func(err error) { c.fail(key, cn, err) }}
	inf := cache.NewSharedIndexInformer(lw, &metav1.PartialObjectMetadata{}, 0, cache.Indexers{})
	cn.nodes = inf.GetIndexer()
	cn.synced = inf.HasSynced
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		cn.mu.Lock()
		cn.err = err
		if apierrors.IsUnauthorized(err) {
			cn.refused = true
		}
		cn.mu.Unlock()
		c.log.V(1).Info("listing or watching the workload cluster's Nodes failed", "cluster", key, "error", err.Error())
		c.wakeCluster(key)
	})
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { c.nodeChanged(key, cn, o) },
		UpdateFunc: func(_, o any) { c.nodeChanged(key, cn, o) },
		DeleteFunc: func(o any) {
			if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = t.Obj
			}
			c.nodeChanged(key, cn, o)
		},
	})
	go inf.RunWithContext(ctx)
	go c.recheckSecret(ctx, key, cn)
	return cn, nil
}

// recheckSecret reads the connection's Secret every c.recheck: once it is
// deleted the connection closes, once it changes the cluster's Machines
// are woken to rebuild it.
func (c *Clusters) recheckSecret(ctx context.Context, key clusterKey, cn *Conn) {
	t := time.NewTicker(c.recheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		secret, err := readKubeconfigSecret(ctx, c.secrets, key)
		switch {
		case apierrors.IsNotFound(err):
			c.mu.Lock()
			closed := c.closeLocked(key, cn, "its kubeconfig Secret was deleted")
			c.mu.Unlock()
			if closed {
				c.wakeCluster(key)
			}
			return
		case err == nil && secret.ResourceVersion != cn.version:
			c.wakeCluster(key)
		}
	}
}

// nodeChanged wakes the Machine of a workload Node (from the annotations
// Cluster API writes on it), or every Machine of the cluster when the
// Node names none.
func (c *Clusters) nodeChanged(key clusterKey, cn *Conn, o any) {
	cn.mu.Lock()
	cn.err = nil
	cn.mu.Unlock()
	node, ok := o.(*metav1.PartialObjectMetadata)
	if !ok {
		return
	}
	name, ns := node.Annotations[clusterv1.MachineAnnotation], node.Annotations[clusterv1.ClusterNamespaceAnnotation]
	if name != "" && (ns == "" || ns == key.Namespace) {
		c.send(types.NamespacedName{Namespace: key.Namespace, Name: name})
		return
	}
	c.wakeCluster(key)
}

// wakeCluster wakes every opted-in Machine of the cluster.
func (c *Clusters) wakeCluster(key clusterKey) {
	c.mu.Lock()
	var machines []types.NamespacedName
	for m, k := range c.users {
		if k == key {
			machines = append(machines, m)
		}
	}
	c.mu.Unlock()
	for _, m := range machines {
		c.send(m)
	}
}

func (c *Clusters) send(m types.NamespacedName) {
	select {
	case c.wake <- event.GenericEvent{Object: &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name}}}:
	case <-c.base.Done():
	}
}

// ErrNotSynced: the connection has not listed the cluster's Nodes yet.
var ErrNotSynced = errors.New("the workload cluster's Nodes are not listed yet")

// node returns the workload Node as the connection keeps it (its labels
// and annotations the bridge reads; nil when it does not exist), or why
// it cannot be known.
func (cn *Conn) Node(name string) (*corev1.Node, error) {
	cn.mu.Lock()
	closed := cn.closed
	cn.mu.Unlock()
	if closed != nil {
		return nil, closed
	}
	if !cn.synced() {
		cn.mu.Lock()
		defer cn.mu.Unlock()
		if cn.err != nil {
			return nil, fmt.Errorf("listing its Nodes: %w", cn.err)
		}
		return nil, ErrNotSynced
	}
	o, ok, err := cn.nodes.GetByKey(name)
	if err != nil || !ok {
		return nil, err
	}
	m, ok := o.(*metav1.PartialObjectMetadata)
	if !ok {
		return nil, fmt.Errorf("workload Node %s: unexpected %T in the cache", name, o)
	}
	return &corev1.Node{ObjectMeta: *m.ObjectMeta.DeepCopy()}, nil
}

// patchNode writes a JSON merge patch to a workload Node. Refused
// credentials mark the connection for a rebuild.
func (cn *Conn) PatchNode(ctx context.Context, name string, patch []byte) error {
	_, err := cn.client.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "pitstop-cluster-api"})
	if apierrors.IsUnauthorized(err) {
		cn.mu.Lock()
		cn.refused = true
		cn.mu.Unlock()
	}
	return err
}

// ClusterOf names a Machine's workload cluster, "namespace/name".
func ClusterOf(m *clusterv1.Machine) string { return KeyOf(m).String() }
