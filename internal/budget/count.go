package budget

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

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
