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
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// sighting is the version of a slot Lease this process last saw: since
// when, on the clock of the caller that saw it, and whether this process
// wrote it.
type sighting struct {
	version string
	at      time.Time
	own     bool
}

// slotWrite is what this process last wrote of one slot Lease: the
// versions it replaced or deleted, and the Lease as it now is (nil:
// deleted).
type slotWrite struct {
	gone  []string
	lease *coordinationv1.Lease
	at    time.Time
}

type takenSlot struct {
	name string
	at   time.Time
}

// cacheLag bounds how long a slot this process took may be missing from
// its cache.
const cacheLag = time.Minute

func takenKey(key Key, node string) string { return key.id() + "/" + node }

// recentSlot is the slot this process gave node within cacheLag, if any.
func (s *Slots) recentSlot(key Key, node string, now time.Time) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.taken[takenKey(key, node)]
	if !ok || now.Sub(t.at) >= cacheLag || t.at.Sub(now) >= cacheLag {
		return ""
	}
	return t.name
}

// remember records the slot given to node; an empty name forgets it.
func (s *Slots) remember(key Key, node, name string, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if name == "" {
		delete(s.taken, takenKey(key, node))
		return
	}
	if s.taken == nil {
		s.taken = map[string]takenSlot{}
	}
	for k, t := range s.taken { // bounded: entries older than cacheLag go
		if now.Sub(t.at) >= cacheLag {
			delete(s.taken, k)
		}
	}
	s.taken[takenKey(key, node)] = takenSlot{name: name, at: now}
}

// wrote records a write of this process: the version before gave way to
// lease (nil: deleted).
func (s *Slots) wrote(name, before string, lease *coordinationv1.Lease, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.written == nil {
		s.written = map[string]slotWrite{}
	}
	for n, w := range s.written { // bounded: entries older than cacheLag go
		if now.Sub(w.at) >= cacheLag {
			delete(s.written, n)
		}
	}
	w := s.written[name]
	if before != "" {
		w.gone = append(w.gone, before)
	}
	if lease != nil {
		lease = lease.DeepCopy()
		s.sawLocked(name, sighting{version: lease.ResourceVersion, at: now, own: true})
	} else {
		delete(s.seen, name)
	}
	w.lease, w.at = lease, now
	s.written[name] = w
}

// Unchanged says how long this process has seen the slot Lease unchanged:
// since it first saw the Lease's current resourceVersion, by the clock now
// is read from (the one every caller of one Slots reads). A version seen
// for the first time is seen now, and so unchanged for 0; a process that
// wrote the version saw it when it wrote it.
//
// This is how a slot's age is judged, never by the times written in the
// Lease (acquireTime, renewTime): those are another replica's clock, and a
// clock ahead of it (or a partitioned replica whose writes arrive late)
// would find a slot old that its holder has just taken or confirmed, and
// free it while it is still in use. A slot is old only once this process
// has watched it unchanged for that long on its own clock; a process that
// has just started waits that long from its first sight of each slot. A
// constant offset of the clock cancels out; a holder's every write
// (renewal, hand-over) changes the resourceVersion and starts the count
// again. Leader election in client-go judges its Lease the same way.
//
// Slots without a Client (a view for explain and the dashboard, which
// never takes nor frees a slot) show the age the Lease's writer recorded
// instead (Taken): a one-shot view has seen nothing change.
func (s *Slots) Unchanged(lease *coordinationv1.Lease, now time.Time) time.Duration {
	switch {
	case s == nil || lease.ResourceVersion == "":
		return 0 // not a Lease read from the API server
	case s.Client == nil:
		return max(now.Sub(Taken(lease)), 0)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if seen, ok := s.seen[lease.Name]; ok && seen.version == lease.ResourceVersion {
		return max(now.Sub(seen.at), 0)
	}
	s.sawLocked(lease.Name, sighting{version: lease.ResourceVersion, at: now})
	return 0
}

// wroteWithin says this process wrote the slot Lease's current version
// less than fresh before now.
func (s *Slots) wroteWithin(lease *coordinationv1.Lease, now time.Time, fresh time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen, ok := s.seen[lease.Name]
	return ok && seen.own && seen.version == lease.ResourceVersion && now.Sub(seen.at) < fresh
}

func (s *Slots) sawLocked(name string, seen sighting) {
	if s.seen == nil {
		s.seen = map[string]sighting{}
	}
	s.seen[name] = seen
}

// forgetUnseen drops the sightings of slot Leases that are gone, as a
// list of every slot shows them.
func (s *Slots) forgetUnseen(list *coordinationv1.LeaseList) {
	s.mu.Lock()
	defer s.mu.Unlock()
	present := make(map[string]bool, len(list.Items))
	for i := range list.Items {
		present[list.Items[i].Name] = true
	}
	for name := range s.seen {
		if !present[name] {
			delete(s.seen, name)
		}
	}
}

// overlay lays this process's own recent writes over a cached list of the
// budget's slots: a version it replaced or deleted gives way to what it
// wrote, and a slot it created that the cache does not show yet is added.
// Anything else the cache shows (the write itself, or a later one by
// anyone) stays, and the write is forgotten: the cache has caught up.
//
// A slot this process created and someone else deleted before the cache
// showed it looks held until cacheLag has passed: the budget looks fuller
// than it is for a while, never emptier.
func (s *Slots) overlay(key Key, list *coordinationv1.LeaseList, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.written) == 0 {
		return
	}
	seen := map[string]bool{}
	items := make([]coordinationv1.Lease, 0, len(list.Items))
	for _, lease := range list.Items {
		seen[lease.Name] = true
		w, ok := s.written[lease.Name]
		if ok && !slices.Contains(w.gone, lease.ResourceVersion) {
			delete(s.written, lease.Name) // the cache shows the write, or a later one
		}
		if !ok || now.Sub(w.at) >= cacheLag || !slices.Contains(w.gone, lease.ResourceVersion) {
			items = append(items, lease)
			continue
		}
		if w.lease != nil {
			items = append(items, *w.lease)
		}
	}
	for name, w := range s.written {
		if !seen[name] && w.lease != nil && now.Sub(w.at) < cacheLag && w.lease.Labels[pitstopv1alpha1.LabelBudget] == key.id() {
			items = append(items, *w.lease)
		}
	}
	list.Items = items
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

// Free says how many of the budget's slots the cache shows free to node:
// neither held by another node nor expired. holding says node holds one
// already (Acquire says which; free is then 0). Without a cache every slot
// looks free. It never grants anything, so a lagging cache cannot let a
// node in: at worst a slot just given back still looks taken, and the
// watch event that shows it free wakes the waiting nodes again; a slot
// that looks free is only Acquire's to give.
func (s *Slots) Free(ctx context.Context, key Key, size int, node string, expired Stale) (free int, holding bool) {
	if s.Cache == nil {
		return size, false
	}
	list := &coordinationv1.LeaseList{}
	if err := s.cached(ctx, key, list); err != nil {
		return size, false
	}
	held := 0
	for i := range list.Items {
		lease := &list.Items[i]
		switch {
		case HolderOf(lease) == node:
			return 0, true
		case counts(key, size, lease, expired):
			held++
		}
	}
	return max(size-held, 0), false
}

// ExpiresIn is how long, on this process's count (Unchanged), until the
// first of the budget's held slots is lasts old, for a budget whose slots
// expire (a stagger's duration, a maxMaintenance's skipAfter): when a node
// that waits for one is worth evaluating again. Zero when the cache shows
// no held slot.
func (s *Slots) ExpiresIn(ctx context.Context, key Key, size int, lasts time.Duration, now time.Time) time.Duration {
	if s == nil || s.Cache == nil || lasts <= 0 {
		return 0
	}
	list := &coordinationv1.LeaseList{}
	if err := s.cached(ctx, key, list); err != nil {
		return 0
	}
	var soonest time.Duration
	for i := range list.Items {
		lease := &list.Items[i]
		if HolderOf(lease) == "" || !isSlot(key, size, lease.Name) {
			continue
		}
		left := max(lasts-s.Unchanged(lease, now), time.Millisecond)
		if soonest == 0 || left < soonest {
			soonest = left
		}
	}
	return soonest
}

// counts says a Lease takes up one of the first size slots of the budget:
// it is one of them, held, and not expired.
func counts(key Key, size int, lease *coordinationv1.Lease, expired Stale) bool {
	holder := HolderOf(lease)
	return holder != "" && isSlot(key, size, lease.Name) && (expired == nil || !expired(holder, lease))
}

// CachedUsed counts the budget's slots the cache shows taken: held and
// not expired, of the first size. Like CachedHolders it is for counting
// and showing, never for admission.
func (s *Slots) CachedUsed(ctx context.Context, key Key, size int, expired Stale) (int, error) {
	if s == nil || s.Cache == nil {
		return 0, nil
	}
	list := &coordinationv1.LeaseList{}
	if err := s.cached(ctx, key, list); err != nil {
		return 0, fmt.Errorf("reading the slots of %s: %w", key.Name, err)
	}
	used := 0
	for i := range list.Items {
		if counts(key, size, &list.Items[i], expired) {
			used++
		}
	}
	return used, nil
}

// CachedKeys names the budgets whose slot Leases the cache shows, in no
// particular order. A slot given back is deleted, so a budget (or a group
// of one) missing here has no slot taken.
func (s *Slots) CachedKeys(ctx context.Context) ([]Key, error) {
	if s == nil || s.Cache == nil {
		return nil, nil
	}
	list := &coordinationv1.LeaseList{}
	if err := s.Cache.List(ctx, list, client.InNamespace(s.Namespace), client.HasLabels{pitstopv1alpha1.LabelBudget}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing budget slots: %w", err)
	}
	seen := map[Key]bool{}
	var keys []Key
	for i := range list.Items {
		if key, ok := KeyOf(&list.Items[i]); ok && !seen[key] {
			seen[key] = true
			keys = append(keys, key)
		}
	}
	return keys, nil
}

// CachedHolders names the nodes holding the budget's slots, as the cache
// shows them (nil without a cache): for counting and showing, never for
// admission, which Acquire decides with the API server.
func (s *Slots) CachedHolders(ctx context.Context, key Key, max int) []string {
	if s == nil || s.Cache == nil {
		return nil
	}
	list := &coordinationv1.LeaseList{}
	if err := s.cached(ctx, key, list); err != nil {
		return nil
	}
	var holders []string
	for i := range list.Items {
		if h := HolderOf(&list.Items[i]); h != "" && isSlot(key, max, list.Items[i].Name) {
			holders = append(holders, h)
		}
	}
	return holders
}

// cached lists the budget's slots from the cache, the cache's own objects
// (read them, never change them), with this process's own writes since
// laid over them.
func (s *Slots) cached(ctx context.Context, key Key, list *coordinationv1.LeaseList) error {
	if err := s.Cache.List(ctx, list, client.InNamespace(s.Namespace), client.MatchingLabels{pitstopv1alpha1.LabelBudget: key.id()}, client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	s.overlay(key, list, s.now())
	return nil
}

// live lists the budget's slots from the API server (Client's reads).
func (s *Slots) live(ctx context.Context, key Key, list *coordinationv1.LeaseList) error {
	return s.Client.List(ctx, list, client.InNamespace(s.Namespace), client.MatchingLabels{pitstopv1alpha1.LabelBudget: key.id()})
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

// Stale reports whether a slot's holder no longer needs it (its node left
// maintenance, or a stagger slot's time ran out), so it may be taken. A
// rule that depends on the slot's age reads it from Unchanged, never from
// the times written in the Lease.
type Stale func(holder string, lease *coordinationv1.Lease) bool

// Acquire gives node a slot of the budget of size max, or reports that all
// are taken. Holding one already is success. It returns the slot's name.
func (s *Slots) Acquire(ctx context.Context, key Key, max int, node string, now time.Time, stale Stale) (string, bool, error) {
	name, ok, raced, err := s.acquireCached(ctx, key, max, node, now)
	if ok || raced || err != nil {
		return name, ok, err
	}
	name, ok, err = s.acquireLive(ctx, key, max, node, now, stale)
	if ok {
		s.remember(key, node, name, now)
	}
	return name, ok, err
}

// acquireCached takes a slot the cache shows free with a create alone,
// without listing the budget from the API server. The create fails if the
// slot exists, so a cache that lags can cost a failed create but never give
// a slot two holders. What it cannot tell from the cache is whether the
// node took a slot a moment ago that the cache does not show yet: when
// this process gave the node a slot within cacheLag that the cache does
// not show, the API server is asked (acquireLive). A create refused
// because the slot exists costs one read of that slot: another replica may
// have given it to this very node, which then holds it and takes no other.
// At worst (a slot taken by another replica just before a handover) a node
// holds two slots until it leaves maintenance, which leaves the budget one
// node short but never over.
//
// A create that loses to another node goes on to the next slot the cache
// shows free. raced says every slot the cache showed free was taken by
// others just now: the budget is full, and asking the API server would
// only confirm it. Nodes woken together for a freed slot race for it; a
// loser that then listed the budget and checked its holders for staleness
// spent three or four requests to learn that; it now spends one read.
func (s *Slots) acquireCached(ctx context.Context, key Key, max int, node string, now time.Time) (name string, ok, raced bool, err error) {
	if s.Cache == nil {
		return "", false, false, nil
	}
	list := &coordinationv1.LeaseList{}
	if err := s.cached(ctx, key, list); err != nil {
		return "", false, false, nil
	}
	own, slots := bySlot(key, max, node, list.Items)
	if own != "" {
		return own, true, false, nil
	}
	if s.recentSlot(key, node, now) != "" {
		return "", false, false, nil // given a slot the cache does not show yet
	}
	// Nodes woken together for freed slots would all try the lowest free
	// one first; starting from a place of the node's own spreads them.
	h := fnv.New32a()
	h.Write([]byte(node))
	start := int(h.Sum32() % uint32(max))
	for k := range max {
		i := (start + k) % max
		if slots[i] != nil {
			continue
		}
		lease := s.newLease(key, i, node, now)
		err := s.Client.Create(ctx, lease)
		switch {
		case err == nil:
			s.remember(key, node, lease.Name, now)
			s.wrote(lease.Name, "", lease, now)
			return lease.Name, true, false, nil
		case apierrors.IsAlreadyExists(err):
			// The cache is behind: another node got this slot first, or
			// another replica gave it to this node a moment ago (every
			// replica starts from the same place for a node). Then it is
			// the node's slot, and it must not take a second one.
			if s.holds(ctx, lease.Name, node) {
				s.remember(key, node, lease.Name, now)
				return lease.Name, true, false, nil
			}
			raced = true
		default:
			return "", false, false, fmt.Errorf("taking slot %s: %w", slotName(key, i), err)
		}
	}
	return "", false, raced, nil
}

// holds says the API server shows node holding the slot Lease name.
func (s *Slots) holds(ctx context.Context, name, node string) bool {
	lease := &coordinationv1.Lease{}
	if err := s.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: name}, lease); err != nil {
		return false
	}
	return HolderOf(lease) == node
}

// acquireLive reads the budget's slots from the API server and takes a
// free one, or one whose holder is stale.
func (s *Slots) acquireLive(ctx context.Context, key Key, max int, node string, now time.Time, stale Stale) (string, bool, error) {
	// One read of the budget's slots (from the API server); the writes
	// below are what serialize: a create fails if the slot exists, an
	// update if the slot changed since this read.
	list := &coordinationv1.LeaseList{}
	if err := s.live(ctx, key, list); err != nil {
		return "", false, fmt.Errorf("reading the slots of %s: %w", key.Name, err)
	}
	own, slots := bySlot(key, max, node, list.Items)
	if own != "" {
		return own, true, nil
	}
	// Free slots first: taking one costs one create. Only when none is
	// free are the holders checked for staleness.
	for i, lease := range slots {
		if lease != nil {
			continue
		}
		created := s.newLease(key, i, node, now)
		err := s.Client.Create(ctx, created)
		switch {
		case err == nil:
			s.wrote(created.Name, "", created, now)
			return created.Name, true, nil
		case apierrors.IsAlreadyExists(err):
			continue // another node got this slot first
		default:
			return "", false, fmt.Errorf("taking slot %s: %w", slotName(key, i), err)
		}
	}
	for i, lease := range slots {
		if lease == nil || stale == nil || !stale(HolderOf(lease), lease) {
			continue
		}
		before := lease.ResourceVersion
		giveTo(lease, node, now)
		err := s.Client.Update(ctx, lease) // carries the resourceVersion read above
		switch {
		case err == nil:
			s.wrote(lease.Name, before, lease, now)
			return slotName(key, i), true, nil
		case apierrors.IsConflict(err), apierrors.IsNotFound(err):
			continue // another node got this slot first
		default:
			return "", false, fmt.Errorf("taking slot %s: %w", slotName(key, i), err)
		}
	}
	return "", false, nil
}

// giveTo makes node the holder of a slot Lease from now.
func giveTo(lease *coordinationv1.Lease, node string, now time.Time) {
	lease.Spec.HolderIdentity = ptr.To(holderPrefix + node)
	lease.Spec.AcquireTime = &metav1.MicroTime{Time: now}
	lease.Spec.LeaseTransitions = ptr.To(ptr.Deref(lease.Spec.LeaseTransitions, 0) + 1)
}

// HandOver gives the slot node from holds in the budget of size max
// straight to node to, in one write: to then finds the slot held for it
// instead of racing the other nodes for it, and the budget is never a
// node over, since the slot only changes hands. The Lease changes holder
// only if it has not changed since the cache (with this process's own
// writes laid over it) showed it. It reports false, having changed
// nothing, unless the cache shows from holding exactly one slot of the
// budget, within max, and to none; the caller then gives the slot back
// (Release).
func (s *Slots) HandOver(ctx context.Context, key Key, max int, from, to string, now time.Time) (bool, error) {
	if s.Cache == nil || from == to {
		return false, nil
	}
	list := &coordinationv1.LeaseList{}
	if err := s.cached(ctx, key, list); err != nil {
		return false, nil
	}
	var held *coordinationv1.Lease
	for i := range list.Items {
		switch HolderOf(&list.Items[i]) {
		case to:
			return false, nil
		case from:
			if held != nil {
				return false, nil
			}
			held = &list.Items[i]
		}
	}
	if held == nil || !isSlot(key, max, held.Name) {
		return false, nil
	}
	if recent := s.recentSlot(key, from, now); recent != "" && recent != held.Name {
		return false, nil // the cache does not show the slot given to from a moment ago
	}
	ok, err := s.update(ctx, held, func(l *coordinationv1.Lease) { giveTo(l, to, now) }, now)
	if !ok || err != nil {
		return false, err
	}
	s.remember(key, from, "", now)
	s.remember(key, to, held.Name, now)
	return true, nil
}

// Taken is when a slot was last taken or confirmed by its holder, as the
// writer's clock put it: its acquireTime (set when it is taken or handed
// over) or its renewTime (set when its holder confirms it, Renew),
// whichever is later. It is for showing; a slot's age is judged by
// Unchanged, on this process's clock.
func Taken(lease *coordinationv1.Lease) time.Time {
	var t time.Time
	if a := lease.Spec.AcquireTime; a != nil {
		t = a.Time
	}
	if r := lease.Spec.RenewTime; r != nil && r.After(t) {
		t = r.Time
	}
	return t
}

// Renew confirms that node still holds its slot of the budget: unless this
// process itself took or confirmed the slot within fresh (the slot as it
// is now: its own write, judged on its own clock; never a time another
// replica wrote), it writes the slot's renewTime,
// in one update made only if the slot is unchanged since the cache (with
// this process's own writes laid over it) showed it. It reports false
// when the cache (without one, the API server) shows node holding no slot
// of the budget, or when the slot changed or went in the meantime (a sweep
// gave it back): node then holds nothing it may go in on.
func (s *Slots) Renew(ctx context.Context, key Key, node string, now time.Time, fresh time.Duration) (bool, error) {
	list := &coordinationv1.LeaseList{}
	var err error
	if s.Cache != nil {
		err = s.cached(ctx, key, list)
	} else {
		err = s.live(ctx, key, list)
	}
	if err != nil {
		return false, fmt.Errorf("reading the slots of budget %s: %w", key.Name, err)
	}
	var held *coordinationv1.Lease
	for i := range list.Items {
		if HolderOf(&list.Items[i]) == node {
			held = &list.Items[i]
			break
		}
	}
	switch {
	case held == nil:
		return false, nil
	case s.wroteWithin(held, now, fresh):
		return true, nil
	}
	return s.update(ctx, held, func(l *coordinationv1.Lease) { l.Spec.RenewTime = &metav1.MicroTime{Time: now} }, now)
}

// update writes a copy of held (the cache's object, or a list's) as change
// leaves it, only if the slot is unchanged since held was read, and lays
// the write over the cache. It reports false when the slot changed or
// went in the meantime.
func (s *Slots) update(ctx context.Context, held *coordinationv1.Lease, change func(*coordinationv1.Lease), now time.Time) (bool, error) {
	lease := held.DeepCopy()
	before := lease.ResourceVersion
	change(lease)
	switch err := s.Client.Update(ctx, lease); {
	case apierrors.IsConflict(err), apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("writing slot %s (holder %q): %w", lease.Name, HolderOf(lease), err)
	}
	s.wrote(lease.Name, before, lease, now)
	return true, nil
}

// Release gives up every slot of the budget node holds; slots beyond max
// (left from a larger budget) are released too.
func (s *Slots) Release(ctx context.Context, key Key, node string) error {
	if !s.releaseCached(ctx, key, node) {
		if err := s.releaseLive(ctx, key, node); err != nil {
			return err
		}
	}
	s.remember(key, node, "", time.Time{})
	return nil
}

// releaseCached gives back the node's slots as the cache shows them, each
// deleted only if unchanged since (its resourceVersion as cached), so that
// a slot that changed hands meanwhile is never freed. It reports false when
// the API server must be asked: the cache shows no slot of the node, or not
// the one this process gave it a moment ago, or one had changed.
func (s *Slots) releaseCached(ctx context.Context, key Key, node string) bool {
	if s.Cache == nil {
		return false
	}
	recent := s.recentSlot(key, node, s.now())
	list := &coordinationv1.LeaseList{}
	if err := s.cached(ctx, key, list); err != nil {
		return false
	}
	released, sawRecent := false, recent == ""
	for i := range list.Items {
		lease := list.Items[i].DeepCopy()
		if HolderOf(lease) != node {
			continue
		}
		err := s.Client.Delete(ctx, lease, client.Preconditions{ResourceVersion: &lease.ResourceVersion})
		if err != nil && !apierrors.IsNotFound(err) {
			return false
		}
		s.wrote(lease.Name, lease.ResourceVersion, nil, s.now())
		released, sawRecent = true, sawRecent || lease.Name == recent
	}
	return released && sawRecent
}

// releaseLive gives back the node's slots as the API server lists them.
func (s *Slots) releaseLive(ctx context.Context, key Key, node string) error {
	list := &coordinationv1.LeaseList{}
	if err := s.live(ctx, key, list); err != nil {
		return fmt.Errorf("listing slots of %s: %w", key.Name, err)
	}
	for i := range list.Items {
		lease := &list.Items[i]
		if HolderOf(lease) != node {
			continue
		}
		err := s.Client.Delete(ctx, lease, client.Preconditions{ResourceVersion: &lease.ResourceVersion})
		switch {
		case err == nil, apierrors.IsNotFound(err):
			s.wrote(lease.Name, lease.ResourceVersion, nil, s.now())
		case !apierrors.IsConflict(err):
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
	if err := s.Client.List(ctx, list, client.InNamespace(s.Namespace), client.HasLabels{pitstopv1alpha1.LabelBudget}); err != nil {
		return fmt.Errorf("listing budget slots: %w", err)
	}
	s.forgetUnseen(list)
	for i := range list.Items {
		lease := &list.Items[i]
		holder := HolderOf(lease)
		key, _ := KeyOf(lease)
		if holder == "" || !stale(key, holder, lease) {
			continue
		}
		err := s.Client.Delete(ctx, lease, client.Preconditions{ResourceVersion: &lease.ResourceVersion})
		switch {
		case err == nil, apierrors.IsNotFound(err):
			s.wrote(lease.Name, lease.ResourceVersion, nil, s.now())
		case !apierrors.IsConflict(err):
			return fmt.Errorf("giving back slot %s: %w", lease.Name, err)
		}
	}
	return nil
}

// EveryHolder lists the holders of every slot of every budget, read
// through reader: the API server (Client) when a count must not lag, or
// the cache (Cache).
func (s *Slots) EveryHolder(ctx context.Context, reader client.Reader) (map[Key][]string, error) {
	if s == nil || reader == nil {
		return nil, nil
	}
	list := &coordinationv1.LeaseList{}
	if err := reader.List(ctx, list, client.InNamespace(s.Namespace), client.HasLabels{pitstopv1alpha1.LabelBudget}); err != nil {
		return nil, fmt.Errorf("listing budget slots: %w", err)
	}
	out := map[Key][]string{}
	for i := range list.Items {
		key, ok := KeyOf(&list.Items[i])
		if h := HolderOf(&list.Items[i]); ok && h != "" {
			out[key] = append(out[key], h)
		}
	}
	return out, nil
}

// Holders lists the nodes holding the budget's slots.
func (s *Slots) Holders(ctx context.Context, key Key) ([]string, error) {
	list := &coordinationv1.LeaseList{}
	if err := s.live(ctx, key, list); err != nil {
		return nil, fmt.Errorf("listing slots of %s: %w", key.Name, err)
	}
	var out []string
	for i := range list.Items {
		if h := HolderOf(&list.Items[i]); h != "" {
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
