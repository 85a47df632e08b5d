// Package budget serializes admission into maintenance through the API
// server: a budget of N is N slot Leases, and a node may enter maintenance
// only while it holds one. Creating a Lease is atomic and taking over a
// stale one is an update with optimistic concurrency, so the bound holds
// across concurrent reconciles, several manager replicas, a leader handover
// and restarts, where a count read from a cache would not. The package
// knows nothing of profiles' semantics: callers say which slots exist and
// when a holder's slot is stale.
//
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;delete,namespace=pitstop-system
package budget

import (
	"context"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

// Labels on slot Leases, so that a budget's slots can be listed.
const (
	// holderPrefix marks Leases as pitstop's in their holder identity.
	holderPrefix = "node/"
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
	// The hash tells budgets apart; the readable part is cut, and keeps
	// only what a Lease name and a label value both allow.
	name := strings.Map(func(r rune) rune {
		if ('a' <= r && r <= 'z') || ('0' <= r && r <= '9') || r == '-' || r == '.' {
			return r
		}
		return '-'
	}, strings.ToLower(k.Name))
	if len(name) > 40 {
		name = name[:40]
	}
	return fmt.Sprintf("%s-%08x", strings.Trim(name, "-."), h.Sum32())
}

// Slots hands out a budget's slots.
type Slots struct {
	// Client must read from the API server, not a cache.
	Client client.Client
	// Cache reads the slot Leases from an informer cache, for Free; nil
	// means every slot looks free.
	Cache client.Reader
	// Namespace holds the Leases (the manager's own).
	Namespace string
	// Clock is what this process's own sightings and writes are timed by
	// (Unchanged): the clock its callers pass now from. Nil is the
	// system's.
	Clock clock.PassiveClock

	// taken remembers the slot this process last gave each node in each
	// budget (by takenKey), for cacheLag or until it is released: while
	// the cache does not show it, Acquire and Release ask the API server.
	mu    sync.Mutex
	taken map[string]takenSlot
	// written remembers this process's own writes of slot Leases, by
	// name, for cacheLag: the cache is read with them laid over it. A slot
	// just given back is then free to the next node at once, not only once
	// the watch delivers the deletion; a slot just taken is held to the
	// other nodes woken with the taker, which would otherwise race for it
	// with a create bound to fail.
	written map[string]slotWrite
	// seen remembers, by slot Lease name, the version of the Lease this
	// process last saw and when it first saw it (Unchanged).
	seen map[string]sighting
}

// now is the time on the slots' clock.
func (s *Slots) now() time.Time {
	if s.Clock == nil {
		return time.Now()
	}
	return s.Clock.Now()
}

// NewSlots returns the slots of budgets in namespace, read live from the
// manager's API server and written through its client, with Free
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

// KeyOf returns the budget a slot Lease belongs to, and whether it is one.
func KeyOf(lease *coordinationv1.Lease) (Key, bool) {
	if _, ok := lease.Labels[pitstopv1alpha1.LabelBudget]; !ok {
		return Key{}, false
	}
	return Key{Name: lease.Annotations[pitstopv1alpha1.AnnotationBudgetName], Group: lease.Annotations[pitstopv1alpha1.AnnotationBudgetGroup]}, true
}

func isSlot(key Key, max int, name string) bool {
	_, ok := slotIndex(key, max, name)
	return ok
}

// slotIndex is the index of the budget's slot a Lease name stands for,
// if it is one of the first max.
func slotIndex(key Key, max int, name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, slotPrefix(key))
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(rest)
	if err != nil || i < 0 || i >= max || strconv.Itoa(i) != rest {
		return 0, false
	}
	return i, true
}

// bySlot places the budget's Leases at their slot's index, or names the
// slot node holds, if it holds one.
func bySlot(key Key, max int, node string, leases []coordinationv1.Lease) (own string, slots []*coordinationv1.Lease) {
	slots = make([]*coordinationv1.Lease, max)
	for i := range leases {
		lease := &leases[i]
		if j, ok := slotIndex(key, max, lease.Name); ok {
			if HolderOf(lease) == node {
				return lease.Name, nil
			}
			slots[j] = lease
		}
	}
	return "", slots
}

func (s *Slots) newLease(key Key, i int, node string, now time.Time) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: s.Namespace,
			Name:      slotName(key, i),
			Labels:    map[string]string{pitstopv1alpha1.LabelBudget: key.id()},
			Annotations: map[string]string{
				pitstopv1alpha1.AnnotationBudgetName:  key.Name,
				pitstopv1alpha1.AnnotationBudgetGroup: key.Group,
			},
		},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To(holderPrefix + node),
			AcquireTime:    &metav1.MicroTime{Time: now},
		},
	}
}

func slotName(key Key, i int) string { return slotPrefix(key) + strconv.Itoa(i) }

func slotPrefix(key Key) string { return "pitstop-slot-" + key.id() + "-" }

// HolderOf names the node holding a slot Lease ("" if none).
func HolderOf(lease *coordinationv1.Lease) string {
	return strings.TrimPrefix(ptr.Deref(lease.Spec.HolderIdentity, ""), holderPrefix)
}
