package budget

import (
	"context"
	"fmt"
	"hash/fnv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

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
