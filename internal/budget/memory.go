package budget

import (
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

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
