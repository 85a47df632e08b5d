// Package kwok is the machine provider of the local cluster: a Machine's
// instance is a Node that kwok plays the kubelet for. Creating a machine
// creates its Node (with a kwok:// providerID and an internal IP of its
// own); deleting it makes the Node disappear after the spec's deleteDelay.
// The tests, `pitstop dev` and the benchmarks run the Machine API on it,
// the way OpenShift offers kubemark for development. It must never be
// enabled on a real cluster: it creates Node objects no kubelet stands
// behind.
package kwok

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"net/netip"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/kwoknode"
	"github.com/pitstop-dev/pitstop/internal/machineapi/provider"
)

// Kind is the providerSpec kind the kwok provider serves.
const Kind = "KwokMachineProviderConfig"

// APIVersion is the providerSpec apiVersion of Spec.
const APIVersion = "pitstop.dev/v1alpha1"

const (
	// defaultPods is the pod capacity of a node whose spec says none.
	defaultPods = 110
)

// Spec is the providerSpec of a kwok Machine:
//
//	providerSpec:
//	  value:
//	    apiVersion: pitstop.dev/v1alpha1
//	    kind: KwokMachineProviderConfig
//	    zone: zone-a
//	    instanceType: kwok.large
//	    pods: 110
//	    deleteDelay: 5s
//	    labels: {team: a}
type Spec struct {
	metav1.TypeMeta `json:",inline"`
	// Labels are set on the Node when it is created.
	Labels map[string]string `json:"labels,omitempty"`
	// Region and Zone become the Node's topology labels and the Machine's
	// region and zone labels.
	Region string `json:"region,omitempty"`
	Zone   string `json:"zone,omitempty"`
	// InstanceType becomes the Node's instance-type label and the
	// Machine's.
	InstanceType string `json:"instanceType,omitempty"`
	// Pods is the Node's pod capacity (default 110).
	Pods int `json:"pods,omitempty"`
	// DeleteDelay is how long the Node stays, shutting down, after the
	// machine's instance is deleted: a cloud instance does not vanish at
	// once either.
	DeleteDelay metav1.Duration `json:"deleteDelay,omitempty"`
}

// Status is the providerStatus of a kwok Machine.
type Status struct {
	metav1.TypeMeta `json:",inline"`
	// NodeName is the Node standing for the instance.
	NodeName string `json:"nodeName"`
	// State is running or shutting-down.
	State string `json:"state"`
}

// Provider creates and deletes kwok Nodes for Machines.
type Provider struct {
	// Client writes Nodes; reads may come from a cache, since Create looks
	// its Node up by name and a create of an existing name fails.
	Client client.Client
	Clock  clock.PassiveClock
}

var _ provider.Provider = (*Provider)(nil)

// Kind is KwokMachineProviderConfig.
func (p *Provider) Kind() string { return Kind }

// Create makes the machine's Node, named after the machine, or returns it.
func (p *Provider) Create(ctx context.Context, m *machinev1beta1.Machine) (*provider.Instance, error) {
	spec, err := decode(m)
	if err != nil {
		return nil, err
	}
	node := &corev1.Node{}
	err = p.Client.Get(ctx, client.ObjectKey{Name: m.Name}, node)
	if apierrors.IsNotFound(err) {
		node, err = p.createNode(ctx, m, spec)
	}
	if err != nil {
		return nil, fmt.Errorf("creating kwok node %s: %w", m.Name, err)
	}
	if !isMachineNode(node, m) {
		return nil, fmt.Errorf("%w: metadata.name: a node named %s exists that is not this machine's (its %s annotation is %q)",
			provider.ErrInvalidConfig, m.Name, pitstopv1alpha1.AnnotationKwokMachine, node.Annotations[pitstopv1alpha1.AnnotationKwokMachine])
	}
	return p.instance(node, spec), nil
}

func (p *Provider) createNode(ctx context.Context, m *machinev1beta1.Machine, spec *Spec) (*corev1.Node, error) {
	ip, err := p.freeIP(ctx, m)
	if err != nil {
		return nil, err
	}
	labels := map[string]string{}
	for k, v := range spec.Labels {
		labels[k] = v
	}
	if spec.InstanceType != "" {
		labels[corev1.LabelInstanceTypeStable] = spec.InstanceType
	}
	pods := spec.Pods
	if pods == 0 {
		pods = defaultPods
	}
	node := kwoknode.New(m.Name, 0, spec.Zone, pods, labels)
	if spec.Region != "" {
		node.Labels[corev1.LabelTopologyRegion] = spec.Region
	}
	setInternalIP(node, ip)
	node.Annotations[pitstopv1alpha1.AnnotationKwokMachine] = m.Namespace + "/" + m.Name
	if err := p.Client.Create(ctx, node); err != nil {
		return nil, err
	}
	return node, nil
}

// Describe returns the machine's Node as its instance. A Node whose
// deleteDelay has run out is deleted here: that is when the instance is
// gone.
func (p *Provider) Describe(ctx context.Context, m *machinev1beta1.Machine) (*provider.Instance, error) {
	spec, err := decode(m)
	if err != nil {
		return nil, err
	}
	node := &corev1.Node{}
	if err := p.Client.Get(ctx, client.ObjectKey{Name: m.Name}, node); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, provider.ErrNotFound
		}
		return nil, fmt.Errorf("reading kwok node %s: %w", m.Name, err)
	}
	if !isMachineNode(node, m) {
		// A Node of that name that is not this machine's (another
		// machine's, or a real one) is not its instance.
		return nil, provider.ErrNotFound
	}
	if at, ok := deleteAt(node); ok {
		if left := at.Sub(p.Clock.Now()); left > 0 {
			inst := p.instance(node, spec)
			inst.State, inst.Running, inst.PollAfter = "shutting-down", false, left
			inst.Status = &Status{TypeMeta: statusType, NodeName: node.Name, State: inst.State}
			return inst, nil
		}
		if err := p.Client.Delete(ctx, node); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("deleting kwok node %s: %w", node.Name, err)
		}
		return nil, provider.ErrNotFound
	}
	return p.instance(node, spec), nil
}

// Delete starts the machine's Node on its way out: at once without a
// deleteDelay, else Describe removes it once the delay has passed.
func (p *Provider) Delete(ctx context.Context, m *machinev1beta1.Machine) error {
	spec, err := decode(m)
	if err != nil {
		return err
	}
	node := &corev1.Node{}
	if err := p.Client.Get(ctx, client.ObjectKey{Name: m.Name}, node); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !isMachineNode(node, m) {
		return nil
	}
	if spec.DeleteDelay.Duration <= 0 {
		return client.IgnoreNotFound(p.Client.Delete(ctx, node))
	}
	if _, ok := deleteAt(node); ok {
		return nil
	}
	patch := client.MergeFrom(node.DeepCopy())
	node.Annotations[pitstopv1alpha1.AnnotationKwokDeleteAt] = p.Clock.Now().Add(spec.DeleteDelay.Duration).UTC().Format(time.RFC3339Nano)
	return client.IgnoreNotFound(p.Client.Patch(ctx, node, patch))
}

var statusType = metav1.TypeMeta{APIVersion: APIVersion, Kind: "KwokMachineProviderStatus"}

func (p *Provider) instance(node *corev1.Node, spec *Spec) *provider.Instance {
	return &provider.Instance{
		ID:           node.Name,
		ProviderID:   node.Spec.ProviderID,
		State:        "running",
		Running:      true,
		Addresses:    node.Status.Addresses,
		Region:       spec.Region,
		Zone:         spec.Zone,
		InstanceType: spec.InstanceType,
		Status:       &Status{TypeMeta: statusType, NodeName: node.Name, State: "running"},
	}
}

func decode(m *machinev1beta1.Machine) (*Spec, error) {
	spec := &Spec{}
	if err := provider.DecodeSpec(m, spec, true); err != nil {
		return nil, err
	}
	if spec.Pods < 0 {
		return nil, provider.InvalidConfig("pods", "must not be negative, got %d", spec.Pods)
	}
	if spec.DeleteDelay.Duration < 0 {
		return nil, provider.InvalidConfig("deleteDelay", "must not be negative, got %s", spec.DeleteDelay.Duration)
	}
	if errs := validation.IsDNS1123Subdomain(m.Name); len(errs) > 0 {
		return nil, fmt.Errorf("%w: metadata.name %q cannot name a node: %s", provider.ErrInvalidConfig, m.Name, errs[0])
	}
	return spec, nil
}

func isMachineNode(node *corev1.Node, m *machinev1beta1.Machine) bool {
	return node.Annotations[pitstopv1alpha1.AnnotationKwokMachine] == m.Namespace+"/"+m.Name
}

func deleteAt(node *corev1.Node) (time.Time, bool) {
	v, ok := node.Annotations[pitstopv1alpha1.AnnotationKwokDeleteAt]
	if !ok {
		return time.Time{}, false
	}
	// An unreadable time is the zero time, already past: the instance was
	// being deleted, and nobody else writes this annotation.
	t, _ := time.Parse(time.RFC3339Nano, v)
	return t, true
}

// ipRange holds the internal IPs of kwok machines' nodes, apart from the
// local cluster's own nodes (10.64.0.0/16) and kwok's pod CIDR
// (10.128.0.0/9).
var ipRange = netip.MustParsePrefix("10.0.0.0/10")

// freeIP picks the machine's internal IP: a hash of its UID within
// ipRange, moved on past addresses other nodes have. Nodelink falls back
// to matching by this address, so it must be unique.
func (p *Provider) freeIP(ctx context.Context, m *machinev1beta1.Machine) (netip.Addr, error) {
	nodes := &corev1.NodeList{}
	if err := p.Client.List(ctx, nodes); err != nil {
		return netip.Addr{}, fmt.Errorf("listing nodes: %w", err)
	}
	taken := map[netip.Addr]bool{}
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if ip, err := netip.ParseAddr(a.Address); err == nil && a.Type == corev1.NodeInternalIP {
				taken[ip] = true
			}
		}
	}
	h := fnv.New32a()
	h.Write([]byte(m.UID))
	size := uint32(1) << (32 - ipRange.Bits())
	base := binary.BigEndian.Uint32(ipRange.Addr().AsSlice())
	start := h.Sum32() % size
	for i := range size {
		offset := (start + i) % size
		if offset == 0 || offset == size-1 {
			continue // network and broadcast addresses
		}
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], base+offset)
		if ip := netip.AddrFrom4(b); !taken[ip] {
			return ip, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("no free address in %s", ipRange)
}

func setInternalIP(node *corev1.Node, ip netip.Addr) {
	for i, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			node.Status.Addresses[i].Address = ip.String()
		}
	}
}
