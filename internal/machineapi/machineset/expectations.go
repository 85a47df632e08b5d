package machineset

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"
)

// expectationsTimeout is how long a MachineSet waits for its cache to show
// the Machines it created and deleted. Watch events normally arrive within
// milliseconds; past this, the set trusts its cache again and counts
// anew, so a lost event costs a delay instead of a stuck MachineSet.
const expectationsTimeout = time.Minute

// expectations remember, per MachineSet, the creations and deletions of
// Machines the cache has not shown yet, as the ReplicaSet controller's
// expectations do. A set with pending expectations does not scale: its
// cache would show too few Machines after creations (and it would create
// more) or too many after deletions (and it would delete more).
//
// The Machine event handler marks creations and deletions observed. An
// informer updates its cache before it calls its handlers, so once every
// expected event is observed, the cache shows them all.
type expectations struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	byKey map[types.NamespacedName]*expectation
}

// expectation is what one MachineSet waits for.
type expectation struct {
	// creations is the number of created Machines not seen yet. Created
	// Machines get their names from generateName on the server, possibly
	// after their watch event has arrived, so they are counted, not named.
	creations int
	// deletions are the UIDs of deleted Machines not seen deleting or gone
	// yet. Named, because Machines deleted by others (a health check, a
	// person) must not count as ours.
	deletions sets.Set[types.UID]
	// since is when the expectation was set, for expectationsTimeout.
	since time.Time
}

func newExpectations(c clock.PassiveClock) *expectations {
	return &expectations{clock: c, byKey: map[types.NamespacedName]*expectation{}}
}

// expectCreations records that the set is about to create n Machines. Call
// it before creating them: their events may arrive before Create returns.
func (e *expectations) expectCreations(key types.NamespacedName, n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.get(key).creations += n
}

// creationObserved records that the cache shows one of the set's new
// Machines, or that a creation the set expected did not happen.
func (e *expectations) creationObserved(key types.NamespacedName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x, ok := e.byKey[key]; ok && x.creations > 0 {
		x.creations--
	}
}

// expectDeletions records that the set is about to delete the Machines of
// uids. Call it before deleting them.
func (e *expectations) expectDeletions(key types.NamespacedName, uids ...types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.get(key).deletions.Insert(uids...)
}

// deletionObserved records that the cache shows the Machine of uid being
// deleted or gone, or that the set's deletion of it did not happen.
func (e *expectations) deletionObserved(key types.NamespacedName, uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x, ok := e.byKey[key]; ok {
		x.deletions.Delete(uid)
	}
}

// syncState is what satisfied answers.
type syncState struct {
	// ok says that the cache shows everything the set did.
	ok bool
	// wait is, when not ok, how long until the expectation times out.
	wait time.Duration
}

// satisfied says whether the set's cache shows everything it did, so it
// may count its Machines and act again. A timed-out expectation is
// dropped: the set counts from its cache again.
func (e *expectations) satisfied(key types.NamespacedName) syncState {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, found := e.byKey[key]
	if !found {
		return syncState{ok: true}
	}
	if x.creations <= 0 && x.deletions.Len() == 0 {
		delete(e.byKey, key)
		return syncState{ok: true}
	}
	wait := x.since.Add(expectationsTimeout).Sub(e.clock.Now())
	if wait <= 0 {
		delete(e.byKey, key)
		return syncState{ok: true}
	}
	return syncState{wait: wait}
}

// forget drops what a deleted MachineSet waited for.
func (e *expectations) forget(key types.NamespacedName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.byKey, key)
}

// get returns the set's expectation, creating it; the caller holds mu. A
// new expectation, or one extended while nothing was pending, restarts the
// timeout.
func (e *expectations) get(key types.NamespacedName) *expectation {
	x, ok := e.byKey[key]
	if !ok {
		x = &expectation{deletions: sets.New[types.UID]()}
		e.byKey[key] = x
	}
	if x.creations <= 0 && x.deletions.Len() == 0 {
		x.creations, x.since = 0, e.clock.Now()
	}
	return x
}
