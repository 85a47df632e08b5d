package capi

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
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// clusterKey names a workload cluster: its namespace in the management
// cluster and its name.
type clusterKey = types.NamespacedName

// Clusters keeps one connection (a Node informer) per workload cluster
// that has opted-in Machines: made when the first of them is seen, rebuilt
// when its kubeconfig Secret changes or its credentials are refused,
// stopped when the last is gone. A change of a workload Node wakes its
// Machine. It is a manager Runnable: its connections end with the manager.
type Clusters struct {
	secrets client.Reader
	log     logr.Logger
	// wake carries the Machines to reconcile.
	wake chan event.GenericEvent
	// base is the parent of every connection's context.
	base   context.Context
	cancel context.CancelFunc

	mu    sync.Mutex
	conns map[clusterKey]*conn
	// users are the opted-in Machines and the cluster of each.
	users map[types.NamespacedName]clusterKey
}

// NewClusters reads kubeconfig Secrets through secrets (a live reader: a
// rotation must be seen).
func NewClusters(secrets client.Reader, log logr.Logger) *Clusters {
	base, cancel := context.WithCancel(context.Background())
	return &Clusters{
		secrets: secrets, log: log, wake: make(chan event.GenericEvent, 4096), base: base, cancel: cancel,
		conns: map[clusterKey]*conn{}, users: map[types.NamespacedName]clusterKey{},
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

// conn is one workload cluster's connection.
type conn struct {
	// version is the kubeconfig Secret's resourceVersion it was built from.
	version string
	client  kubernetes.Interface
	nodes   corelisters.NodeLister
	synced  cache.InformerSynced
	stop    context.CancelFunc
	started time.Time

	mu sync.Mutex
	// err is the last error listing or watching Nodes, until a Node is
	// seen again.
	err error
	// refused: the API server refused the credentials (401); the next
	// use rebuilds the connection from the Secret.
	refused bool
}

// kubeconfigSecret is the name of Cluster API's kubeconfig Secret of a
// cluster.
func kubeconfigSecret(cluster string) string { return cluster + "-kubeconfig" }

// clusterOf is the workload cluster of a Machine.
func clusterOf(m *clusterv1.Machine) clusterKey {
	name := m.Spec.ClusterName
	if name == "" {
		name = m.Labels[clusterv1.ClusterNameLabel]
	}
	return clusterKey{Namespace: m.Namespace, Name: name}
}

// Use registers machine as a user of its cluster's connection and returns
// the connection, made or rebuilt as needed.
func (c *Clusters) Use(ctx context.Context, key clusterKey, machine types.NamespacedName) (*conn, error) {
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
	if err != nil {
		return nil, err
	}
	if cur, ok := c.conns[key]; ok {
		cur.mu.Lock()
		refused := cur.refused
		cur.mu.Unlock()
		if cur.version == secret.ResourceVersion && !refused {
			return cur, nil
		}
		cur.stop()
		delete(c.conns, key)
		c.log.Info("reconnecting to the workload cluster", "cluster", key, "credentialsRefused", refused)
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
	if cn, ok := c.conns[key]; ok {
		cn.stop()
		delete(c.conns, key)
		c.log.Info("disconnected from the workload cluster: no opted-in Machine left", "cluster", key)
	}
}

// Connected says how many workload clusters pitstop is connected to.
func (c *Clusters) Connected() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.conns)
}

// connect builds a client and a Node informer from the kubeconfig in the
// Secret. The kubeconfig is never logged.
func (c *Clusters) connect(key clusterKey, secret *corev1.Secret) (*conn, error) {
	cfg, err := restConfigOf(secret)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("the kubeconfig Secret %s/%s: %w", secret.Namespace, secret.Name, err)
	}
	ctx, stop := context.WithCancel(c.base)
	factory := informers.NewSharedInformerFactory(cs, 0)
	informer := factory.Core().V1().Nodes()
	cn := &conn{version: secret.ResourceVersion, client: cs, nodes: informer.Lister(), stop: stop, started: time.Now()}
	inf := informer.Informer()
	cn.synced = inf.HasSynced
	_ = inf.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
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
	factory.Start(ctx.Done())
	return cn, nil
}

// nodeChanged wakes the Machine of a workload Node (from the annotations
// Cluster API writes on it), or every Machine of the cluster when the
// Node names none.
func (c *Clusters) nodeChanged(key clusterKey, cn *conn, o any) {
	cn.mu.Lock()
	cn.err = nil
	cn.mu.Unlock()
	node, ok := o.(*corev1.Node)
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

// errNotSynced: the connection has not listed the cluster's Nodes yet.
var errNotSynced = errors.New("the workload cluster's Nodes are not listed yet")

// node returns the workload Node (nil when it does not exist), or why it
// cannot be known.
func (cn *conn) node(name string) (*corev1.Node, error) {
	if !cn.synced() {
		cn.mu.Lock()
		defer cn.mu.Unlock()
		if cn.err != nil {
			return nil, fmt.Errorf("listing its Nodes: %w", cn.err)
		}
		return nil, errNotSynced
	}
	n, err := cn.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return n, err
}

// patchNode writes a JSON merge patch to a workload Node. Refused
// credentials mark the connection for a rebuild.
func (cn *conn) patchNode(ctx context.Context, name string, patch []byte) error {
	_, err := cn.client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "pitstop-cluster-api"})
	if apierrors.IsUnauthorized(err) {
		cn.mu.Lock()
		cn.refused = true
		cn.mu.Unlock()
	}
	return err
}

// WorkloadClient is a client of a Machine's workload cluster, from its
// kubeconfig Secret read through reader (pitstop explain and the
// dashboard read a workload cluster's Nodes and profiles with it).
func WorkloadClient(ctx context.Context, reader client.Reader, m *clusterv1.Machine, opts client.Options) (client.Client, error) {
	secret, err := readKubeconfigSecret(ctx, reader, clusterOf(m))
	if err != nil {
		return nil, err
	}
	cfg, err := restConfigOf(secret)
	if err != nil {
		return nil, err
	}
	return client.New(cfg, opts)
}

// readKubeconfigSecret reads Cluster API's kubeconfig Secret of a cluster.
func readKubeconfigSecret(ctx context.Context, reader client.Reader, key clusterKey) (*corev1.Secret, error) {
	secret := &corev1.Secret{}
	if err := reader.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: kubeconfigSecret(key.Name)}, secret); err != nil {
		return nil, fmt.Errorf("reading the kubeconfig Secret %s/%s: %w", key.Namespace, kubeconfigSecret(key.Name), err)
	}
	return secret, nil
}

// restConfigOf reads the kubeconfig of Cluster API's Secret. Its errors
// never quote the kubeconfig.
func restConfigOf(secret *corev1.Secret) (*rest.Config, error) {
	data := secret.Data[kubeconfigKey]
	if len(data) == 0 {
		return nil, fmt.Errorf("the kubeconfig Secret %s/%s has no key %q", secret.Namespace, secret.Name, kubeconfigKey)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		return nil, fmt.Errorf("the kubeconfig Secret %s/%s, key %q, is not a kubeconfig that can be used", secret.Namespace, secret.Name, kubeconfigKey)
	}
	cfg.UserAgent = "pitstop-cluster-api"
	cfg.Timeout = 30 * time.Second
	return cfg, nil
}

// ClusterOf names a Machine's workload cluster, "namespace/name".
func ClusterOf(m *clusterv1.Machine) string { return clusterOf(m).String() }
