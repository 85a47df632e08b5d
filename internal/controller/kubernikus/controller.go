// Package kubernikus is the maintenance-controller's Kubernikus
// integration in pitstop: it labels each node whose kubelet's version
// differs from the API server's (cloud.sap/kubelet-needs-update), and a
// node labelled cloud.sap/delete-node=true is drained through a
// NodeMaintenance and then its OpenStack server deleted, so that its
// Kubernikus node pool replaces it: the server its providerID names, only
// if its name (and Kubernikus metadata) agree, and no more nodes at once
// than the integration's own budget. It also reads the node pools' sizes
// for the kubernikusCount check.
package kubernikus

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
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/budget"
	"github.com/pitstop-dev/pitstop/internal/cloud/openstack"
	"github.com/pitstop-dev/pitstop/internal/maintenance"
	"github.com/pitstop-dev/pitstop/internal/nodepatch"
	"github.com/pitstop-dev/pitstop/internal/seedconfig"
)

// The maintenance-controller's keys.
const (
	// LabelKubeletNeedsUpdate is written: true when the node's kubelet is
	// of another version than the API server (older or newer), else false.
	LabelKubeletNeedsUpdate = "cloud.sap/kubelet-needs-update"
	// LabelDeleteNode is read: true drains the node and deletes its server.
	// Taking it off before the server is deleted gives the node back.
	LabelDeleteNode = "cloud.sap/delete-node"
	// AnnotationServerDeleted records the ID of the server pitstop deleted
	// for the node.
	AnnotationServerDeleted = "pitstop.dev/kubernikus-server-deleted"
)

// Options configure the integration.
type Options struct {
	// ConfigPath is the kubernikus.yaml file; missing: the defaults.
	ConfigPath string
	// CloudConfigPath is the cloudprovider.conf file with the OpenStack
	// account, unless the configuration names a Secret.
	CloudConfigPath string
	// Accounts are the OpenStack clients, shared with kubernikusCount
	// checks.
	Accounts *openstack.Accounts
	// LeaseNamespace holds the slot Leases of the integration's budget
	// (the manager's namespace).
	LeaseNamespace string
}

// Reconciler reconciles Nodes.
type Reconciler struct {
	client    client.Client
	reader    client.Reader
	recorder  events.EventRecorder
	log       logr.Logger
	discovery discovery.ServerVersionInterface
	slots     *budget.Slots
	opts      Options

	cfg *seedconfig.Reloader[*Config]

	mu     sync.Mutex
	server *version.Version
	readAt time.Time
}

// Setup checks the configuration and adds the controller to mgr.
func Setup(mgr ctrl.Manager, opts Options) (*Reconciler, error) {
	if opts.LeaseNamespace == "" {
		return nil, errors.New("the Kubernikus integration needs a namespace for its budget's slot Leases")
	}
	cfg, err := seedconfig.NewReloader(opts.ConfigPath, func() (*Config, error) { return LoadConfig(opts.ConfigPath) })
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return nil, err
	}
	r := &Reconciler{
		client: mgr.GetClient(), reader: mgr.GetAPIReader(), recorder: mgr.GetEventRecorder("pitstop-kubernikus"),
		log: mgr.GetLogger().WithName("kubernikus"), discovery: dc, opts: opts, cfg: cfg,
		slots: budget.NewSlots(mgr, opts.LeaseNamespace),
	}
	toNode := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		nm, ok := o.(*pitstopv1alpha1.NodeMaintenance)
		if !ok || nm.Labels[pitstopv1alpha1.LabelSource] != pitstopv1alpha1.SourceKubernikus {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: nm.Spec.NodeName}}}
	})
	return r, ctrl.NewControllerManagedBy(mgr).Named("kubernikus").
		For(&corev1.Node{}).
		Watches(&pitstopv1alpha1.NodeMaintenance{}, toNode).
		Complete(r)
}

// config is the configuration, read again when the file changed; the
// last good one is kept when the change does not load.
func (r *Reconciler) config() *Config {
	cfg, err := r.cfg.Get()
	if err != nil {
		r.log.Error(err, "Keeping the last good Kubernikus configuration")
	}
	return cfg
}

// Reconcile labels the node and moves its deletion on.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cfg := r.config()
	requeue := ctrl.Result{RequeueAfter: cfg.Intervals.Requeue.Duration}
	nmName := maintenance.Name(maintenance.PrefixKubernikus, req.Name)
	node := &corev1.Node{}
	if err := r.client.Get(ctx, req.NamespacedName, node); err != nil {
		if apierrors.IsNotFound(err) {
			// The node is gone with its server: so are its drain and its slot.
			return ctrl.Result{}, r.letGo(ctx, req.Name, nmName)
		}
		return ctrl.Result{}, err
	}
	if err := r.markUpdate(ctx, node, cfg); err != nil {
		r.log.Error(err, "Comparing the kubelet's version with the API server's", "node", node.Name)
	}
	if !asksDeletion(node) {
		if _, deleted := node.Annotations[AnnotationServerDeleted]; !deleted {
			return requeue, r.callOff(ctx, node, nmName)
		}
		return requeue, nil
	}
	return requeue, r.reconcileDeletion(ctx, cfg, node, nmName)
}

// asksDeletion says the node is labelled for deletion and its server not
// deleted yet.
func asksDeletion(node *corev1.Node) bool {
	_, deleted := node.Annotations[AnnotationServerDeleted]
	return node.Labels[LabelDeleteNode] == "true" && !deleted
}

// callOff calls off a drain begun for a node asked no more (or never).
// The cache says whether there is one, so that nodes without cost no
// request.
func (r *Reconciler) callOff(ctx context.Context, node *corev1.Node, nmName string) error {
	nm := &pitstopv1alpha1.NodeMaintenance{}
	if err := r.client.Get(ctx, client.ObjectKey{Name: nmName}, nm); err != nil || !nm.DeletionTimestamp.IsZero() {
		return client.IgnoreNotFound(err)
	}
	if err := r.letGo(ctx, node.Name, nmName); err != nil {
		return err
	}
	r.recorder.Eventf(node, nil, corev1.EventTypeNormal, EventDeletionCancelled, "Restore", "%s is gone before the server was deleted: node restored", LabelDeleteNode)
	return nil
}

// reconcileDeletion drains the node, once its server is found through a
// link the node cannot forge and a slot of the budget is free, and then
// deletes the server.
func (r *Reconciler) reconcileDeletion(ctx context.Context, cfg *Config, node *corev1.Node, nmName string) error {
	nm := &pitstopv1alpha1.NodeMaintenance{}
	err := r.client.Get(ctx, client.ObjectKey{Name: nmName}, nm)
	switch {
	case apierrors.IsNotFound(err):
		return r.admit(ctx, cfg, node, nmName)
	case err != nil:
		return err
	case !nm.DeletionTimestamp.IsZero():
		return nil // the last drain's, going
	}
	done, status, err := maintenance.Progress(nm)
	if err != nil {
		r.recorder.Eventf(node, nil, corev1.EventTypeWarning, EventDrainFailed, "Drain", "the server is kept until the drain is done: %v", err)
		return nil
	}
	if !done {
		r.log.V(1).Info(status, "node", node.Name)
		return nil
	}
	cc, err := r.cloudConfig(ctx, cfg)
	if err != nil {
		return err
	}
	// Checked again: the server may have changed since the drain began.
	id, refused, err := r.target(ctx, cfg, cc, node)
	if err != nil || refused != "" {
		return r.refuse(node, refused, err)
	}
	if err := r.opts.Accounts.DeleteServer(ctx, cc, id); err != nil {
		r.recorder.Eventf(node, nil, corev1.EventTypeWarning, EventDeleteFailed, "Delete", "deleting server %s of node %s: %v", id, node.Name, err)
		return err
	}
	r.recorder.Eventf(node, nil, corev1.EventTypeNormal, EventServerDeleted, "Delete", "drained; server %s (%s) deleted: its node pool replaces it", node.Name, id)
	return nodepatch.Meta(ctx, r.client, node, "annotations", map[string]any{AnnotationServerDeleted: id})
}

// admit starts the node's drain: only once its server is found and
// checked (a node named after a server outside the cluster is refused
// before any of its pods is evicted), and once it holds a slot of the
// integration's budget.
func (r *Reconciler) admit(ctx context.Context, cfg *Config, node *corev1.Node, nmName string) error {
	cc, err := r.cloudConfig(ctx, cfg)
	if err != nil {
		return err
	}
	if _, refused, err := r.target(ctx, cfg, cc, node); err != nil || refused != "" {
		return r.refuse(node, refused, err)
	}
	got, err := r.acquire(ctx, cfg, node.Name)
	if err != nil || !got {
		return err
	}
	_, err = r.drain(ctx, cfg, node, nmName)
	return err
}

// refuse records why the node's server is not deleted.
func (r *Reconciler) refuse(node *corev1.Node, refused string, err error) error {
	if err != nil {
		r.recorder.Eventf(node, nil, corev1.EventTypeWarning, EventDeleteFailed, "Delete", "finding the server of node %s: %v", node.Name, err)
		return err
	}
	r.recorder.Eventf(node, nil, corev1.EventTypeWarning, EventServerRefused, "Delete", "%s", refused)
	return nil
}

// drain returns the node's NodeMaintenance, created on first call; nil
// while an earlier one is still going.
func (r *Reconciler) drain(ctx context.Context, cfg *Config, node *corev1.Node, name string) (*pitstopv1alpha1.NodeMaintenance, error) {
	nm, created, err := maintenance.Ensure(ctx, r.client, &pitstopv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{pitstopv1alpha1.LabelSource: pitstopv1alpha1.SourceKubernikus}},
		Spec: pitstopv1alpha1.NodeMaintenanceSpec{
			NodeName: node.Name, Reason: LabelDeleteNode + "=true: the server is deleted once the node is drained",
			Drain: cfg.Intervals.PodEviction.Drain(),
		},
	})
	if created {
		r.recorder.Eventf(node, nil, corev1.EventTypeNormal, EventDrain, "Drain", "%s=true: draining the node (NodeMaintenance %s), then deleting its server", LabelDeleteNode, name)
	}
	return nm, err
}

// cloudConfig is the OpenStack account: from the configured Secret, else
// from the file.
func (r *Reconciler) cloudConfig(ctx context.Context, cfg *Config) (openstack.CloudConfig, error) {
	if s := cfg.CloudProviderSecret; s != nil {
		secret := &corev1.Secret{}
		if err := r.reader.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.Name}, secret); err != nil {
			return openstack.CloudConfig{}, fmt.Errorf("reading cloudProviderSecret %s/%s: %w", s.Namespace, s.Name, err)
		}
		raw, ok := secret.Data[openstack.KeyCloudConfig]
		if !ok {
			return openstack.CloudConfig{}, fmt.Errorf("cloudProviderSecret %s/%s has no key %s", s.Namespace, s.Name, openstack.KeyCloudConfig)
		}
		cc, err := openstack.ParseCloudConfig(raw)
		if err != nil {
			return openstack.CloudConfig{}, fmt.Errorf("cloudProviderSecret %s/%s, key %s: %w", s.Namespace, s.Name, openstack.KeyCloudConfig, err)
		}
		return cc, nil
	}
	return openstack.LoadCloudConfig(r.opts.CloudConfigPath)
}

// markUpdate writes LabelKubeletNeedsUpdate. A kubelet version that is not
// a semantic version leaves the node unlabelled.
func (r *Reconciler) markUpdate(ctx context.Context, node *corev1.Node, cfg *Config) error {
	kubelet, err := version.ParseSemantic(node.Status.NodeInfo.KubeletVersion)
	if err != nil {
		return fmt.Errorf("kubelet version %q: %w", node.Status.NodeInfo.KubeletVersion, err)
	}
	server, err := r.serverVersion(cfg.Intervals.Requeue.Duration)
	if err != nil {
		return err
	}
	want := "false"
	if !sameVersion(kubelet, server) {
		want = "true"
	}
	if node.Labels[LabelKubeletNeedsUpdate] == want {
		return nil
	}
	return nodepatch.Meta(ctx, r.client, node, "labels", map[string]any{LabelKubeletNeedsUpdate: want})
}

// sameVersion compares major, minor, patch and pre-release: build
// metadata (+abc) does not make a kubelet another version.
func sameVersion(a, b *version.Version) bool {
	return a.Major() == b.Major() && a.Minor() == b.Minor() && a.Patch() == b.Patch() && a.PreRelease() == b.PreRelease()
}

// serverVersion is the API server's version, read again after ttl.
func (r *Reconciler) serverVersion(ttl time.Duration) (*version.Version, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.server != nil && time.Since(r.readAt) < ttl {
		return r.server, nil
	}
	info, err := r.discovery.ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("reading the API server's version: %w", err)
	}
	v, err := version.ParseSemantic(info.GitVersion)
	if err != nil {
		return nil, fmt.Errorf("the API server's version %q: %w", info.GitVersion, err)
	}
	r.server, r.readAt = v, time.Now()
	return v, nil
}
