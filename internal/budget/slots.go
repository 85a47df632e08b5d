// Package budget serializes admission into maintenance through the API
// server: a budget of N is N slot Leases, and a node may enter maintenance
// only while it holds one. Creating a Lease is atomic and taking over a
// stale one is an update with optimistic concurrency, so the bound holds
// across concurrent reconciles, several manager replicas, a leader handover
// and restarts, where a count read from a cache would not. The package
// knows nothing of profiles' semantics: callers say which slots exist and
// when a holder's slot is stale.
//
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;delete
package budget

import (
	"context"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Labels on slot Leases, so that a budget's slots can be listed.
const (
	LabelBudget = "pitstop.dev/budget"
	// holderPrefix marks Leases as pitstop's in their holder identity.
	holderPrefix = "node/"
	// annotationBudgetName and annotationBudgetGroup say which budget a
	// slot belongs to (its label is a hash).
	annotationBudgetName  = "pitstop.dev/budget-name"
	annotationBudgetGroup = "pitstop.dev/budget-group"
)

// Key names a budget: a profile and, for budgets per group, the group's
// value (a zone, say).
type Key struct {
	Name  string
	Group string
}

// id is the budget's name in Lease names and labels: readable where it can
// be, with a hash so that any group value fits.
func (k Key) id() string {
	h := fnv.New32a()
	h.Write([]byte(k.Name + "\x00" + k.Group))
	name := strings.ToLower(k.Name)
	if len(name) > 40 {
		name = name[:40]
	}
	return fmt.Sprintf("%s-%08x", strings.Trim(name, "-."), h.Sum32())
}

// Slots hands out a budget's slots.
type Slots struct {
	// Client must read from the API server, not a cache.
	Client client.Client
	// Cache reads the slot Leases from an informer cache, for LooksFull;
	// nil means LooksFull never answers yes.
	Cache client.Reader
	// Namespace holds the Leases (the manager's own).
	Namespace string
}

// NewSlots returns the slots of budgets in namespace, read live from the
// manager's API server and written through its client, with LooksFull
// answered from its cache.
func NewSlots(mgr interface {
	GetClient() client.Client
	GetAPIReader() client.Reader
}, namespace string) *Slots {
	return &Slots{Client: LiveClient(mgr.GetClient(), mgr.GetAPIReader()), Cache: mgr.GetClient(), Namespace: namespace}
}

// LiveClient reads through reader (the API server) and writes through c,
// as Acquire needs: a slot taken a moment ago must not look free.
func LiveClient(c client.Client, reader client.Reader) client.Client {
	return liveClient{Client: c, reader: reader}
}

type liveClient struct {
	client.Client
	reader client.Reader
}

func (c liveClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return c.reader.Get(ctx, key, obj, opts...)
}

func (c liveClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return c.reader.List(ctx, list, opts...)
}

// LooksFull reports, from the cache, that every slot of the budget is held
// by another node and none has expired: Acquire would refuse, so it need
// not ask the API server. It never grants anything, so a lagging cache
// cannot let a node in: at worst a slot just given back still looks taken,
// and the watch event that shows it free wakes the waiting nodes again.
func (s *Slots) LooksFull(ctx context.Context, key Key, max int, node string, expired Stale) bool {
	if s.Cache == nil {
		return false
	}
	list := &coordinationv1.LeaseList{}
	if err := s.Cache.List(ctx, list, client.InNamespace(s.Namespace), client.MatchingLabels{LabelBudget: key.id()}); err != nil {
		return false
	}
	held := 0
	for i := range list.Items {
		lease := &list.Items[i]
		holder := holderOf(lease)
		switch {
		case holder == node:
			return false // holding one: Acquire says so
		case holder == "", !isSlot(key, max, lease.Name), expired != nil && expired(holder, lease):
			continue
		}
		held++
	}
	return held >= max
}

// KeyOf returns the budget a slot Lease belongs to, and whether it is one.
func KeyOf(lease *coordinationv1.Lease) (Key, bool) {
	if _, ok := lease.Labels[LabelBudget]; !ok {
		return Key{}, false
	}
	return Key{Name: lease.Annotations[annotationBudgetName], Group: lease.Annotations[annotationBudgetGroup]}, true
}

func isSlot(key Key, max int, name string) bool {
	for i := range max {
		if name == slotName(key, i) {
			return true
		}
	}
	return false
}

// Stale reports whether a slot's holder no longer needs it (its node left
// maintenance, or a stagger slot's time ran out), so it may be taken.
type Stale func(holder string, lease *coordinationv1.Lease) bool

// Acquire gives node a slot of the budget of size max, or reports that all
// are taken. Holding one already is success. It returns the slot's name.
func (s *Slots) Acquire(ctx context.Context, key Key, max int, node string, now time.Time, stale Stale) (string, bool, error) {
	// One read of the budget's slots (from the API server); the writes
	// below are what serialize: a create fails if the slot exists, an
	// update if the slot changed since this read.
	list := &coordinationv1.LeaseList{}
	if err := s.Client.List(ctx, list, client.InNamespace(s.Namespace), client.MatchingLabels{LabelBudget: key.id()}); err != nil {
		return "", false, fmt.Errorf("reading the slots of %s: %w", key.Name, err)
	}
	slots := make([]*coordinationv1.Lease, max)
	for i := range list.Items {
		lease := &list.Items[i]
		for j := range max {
			if lease.Name == slotName(key, j) {
				if holderOf(lease) == node {
					return lease.Name, true, nil
				}
				slots[j] = lease
			}
		}
	}
	// Free slots first: taking one costs one create. Only when none is
	// free are the holders checked for staleness.
	for i, lease := range slots {
		if lease != nil {
			continue
		}
		err := s.Client.Create(ctx, s.newLease(key, i, node, now))
		switch {
		case err == nil:
			return slotName(key, i), true, nil
		case apierrors.IsAlreadyExists(err):
			continue // another node got this slot first
		default:
			return "", false, fmt.Errorf("taking slot %s: %w", slotName(key, i), err)
		}
	}
	for i, lease := range slots {
		if lease == nil || stale == nil || !stale(holderOf(lease), lease) {
			continue
		}
		lease.Spec.HolderIdentity = ptr.To(holderPrefix + node)
		lease.Spec.AcquireTime = &metav1.MicroTime{Time: now}
		lease.Spec.LeaseTransitions = ptr.To(ptr.Deref(lease.Spec.LeaseTransitions, 0) + 1)
		err := s.Client.Update(ctx, lease) // carries the resourceVersion read above
		switch {
		case err == nil:
			return slotName(key, i), true, nil
		case apierrors.IsConflict(err), apierrors.IsNotFound(err):
			continue // another node got this slot first
		default:
			return "", false, fmt.Errorf("taking slot %s: %w", slotName(key, i), err)
		}
	}
	return "", false, nil
}

// Release gives up every slot of the budget node holds; slots beyond max
// (left from a larger budget) are released too.
func (s *Slots) Release(ctx context.Context, key Key, node string) error {
	list := &coordinationv1.LeaseList{}
	if err := s.Client.List(ctx, list, client.InNamespace(s.Namespace), client.MatchingLabels{LabelBudget: key.id()}); err != nil {
		return fmt.Errorf("listing slots of %s: %w", key.Name, err)
	}
	for i := range list.Items {
		lease := &list.Items[i]
		if holderOf(lease) != node {
			continue
		}
		err := s.Client.Delete(ctx, lease, client.Preconditions{ResourceVersion: &lease.ResourceVersion})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("releasing slot %s: %w", lease.Name, err)
		}
	}
	return nil
}

// Sweep gives back every held slot, of any budget, that stale says its
// holder no longer needs: slots left by a manager stopped between writing
// a node out of maintenance and giving its slot back.
func (s *Slots) Sweep(ctx context.Context, stale func(key Key, holder string, lease *coordinationv1.Lease) bool) error {
	list := &coordinationv1.LeaseList{}
	if err := s.Client.List(ctx, list, client.InNamespace(s.Namespace), client.HasLabels{LabelBudget}); err != nil {
		return fmt.Errorf("listing budget slots: %w", err)
	}
	for i := range list.Items {
		lease := &list.Items[i]
		holder := holderOf(lease)
		key, _ := KeyOf(lease)
		if holder == "" || !stale(key, holder, lease) {
			continue
		}
		err := s.Client.Delete(ctx, lease, client.Preconditions{ResourceVersion: &lease.ResourceVersion})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("giving back slot %s: %w", lease.Name, err)
		}
	}
	return nil
}

// Holders lists the nodes holding the budget's slots.
func (s *Slots) Holders(ctx context.Context, key Key) ([]string, error) {
	list := &coordinationv1.LeaseList{}
	if err := s.Client.List(ctx, list, client.InNamespace(s.Namespace), client.MatchingLabels{LabelBudget: key.id()}); err != nil {
		return nil, fmt.Errorf("listing slots of %s: %w", key.Name, err)
	}
	var out []string
	for i := range list.Items {
		if h := holderOf(&list.Items[i]); h != "" {
			out = append(out, h)
		}
	}
	return out, nil
}

func (s *Slots) newLease(key Key, i int, node string, now time.Time) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: s.Namespace,
			Name:      slotName(key, i),
			Labels:    map[string]string{LabelBudget: key.id()},
			Annotations: map[string]string{
				annotationBudgetName:  key.Name,
				annotationBudgetGroup: key.Group,
			},
		},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To(holderPrefix + node),
			AcquireTime:    &metav1.MicroTime{Time: now},
		},
	}
}

func slotName(key Key, i int) string { return fmt.Sprintf("pitstop-slot-%s-%d", key.id(), i) }

func holderOf(lease *coordinationv1.Lease) string {
	return strings.TrimPrefix(ptr.Deref(lease.Spec.HolderIdentity, ""), holderPrefix)
}
