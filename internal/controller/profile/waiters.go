package profile

import (
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// waiters remembers the nodes whose transition waits on the rest of the
// fleet (a budget slot, or a check that counts other nodes), so that the
// node that frees what they wait for wakes them at once, the longest
// waiting first, instead of every node being evaluated again on every
// change in the fleet.
//
// A node that gives back its budget slot wakes the budget's waiters as
// soon as it has (handOver): the engine counts the node from its own write
// and the slots as it last wrote them, so the waiters need not wait for the
// cache to see either. Otherwise (a slot given back by a manager
// that stopped, and swept) a freed budget wakes its waiters when the
// manager's cache sees the node leave maintenance and when it sees the
// slot Lease deleted; whichever comes second lets the waiter in.
type waiters struct {
	mu    sync.Mutex
	byKey map[string]map[string]time.Time // wake key → node → waiting since
	wake  chan event.GenericEvent
	// handed remembers, for handedOverFor, the slots handed over at once
	// (by wake key and the node that gave it back), so that the cache's
	// later sight of the same hand-over wakes nobody more.
	handed map[string]time.Time
}

// handedOverFor is how long a slot handed over at once keeps the cache's
// sight of the hand-over from waking more waiters: longer than the cache
// lags, shorter than the recheck of a waiter nothing woke.
const handedOverFor = 15 * time.Second

// wakeBatch is how many waiters one freed slot or state change wakes: the
// oldest takes the slot; the next is there in case the oldest cannot.
const wakeBatch = 2

// waiterRecheck bounds how long a waiter sleeps when nothing wakes it
// (a slot freed by a node that disappeared, say).
const waiterRecheck = 30 * time.Second

func newWaiters() *waiters {
	return &waiters{byKey: map[string]map[string]time.Time{}, wake: make(chan event.GenericEvent, 1024), handed: map[string]time.Time{}}
}

// set makes node a waiter on exactly keys (none: not waiting).
func (w *waiters) set(node string, keys []string, since time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	want := map[string]bool{}
	for _, k := range keys {
		want[k] = true
	}
	for k, nodes := range w.byKey {
		if !want[k] {
			delete(nodes, node)
			if len(nodes) == 0 {
				delete(w.byKey, k)
			}
		}
	}
	for k := range want {
		if w.byKey[k] == nil {
			w.byKey[k] = map[string]time.Time{}
		}
		if _, ok := w.byKey[k][node]; !ok {
			w.byKey[k][node] = since
		}
	}
}

// handOver wakes the longest-waiting nodes on key for the slot node just
// gave back, and remembers that they were woken for it. When none was
// waiting just then (those woken a moment ago are still being evaluated),
// nothing is remembered: the cache's sight of the hand-over wakes those
// that wait again by then.
func (w *waiters) handOver(key, node string, now time.Time) {
	if w.notify(key, node) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, at := range w.handed { // bounded: old entries go
		if now.Sub(at) >= handedOverFor {
			delete(w.handed, k)
		}
	}
	w.handed[key+"\x00"+node] = now
}

// handedOver says the waiters on key were already woken for the slot node
// gave back (handOver).
func (w *waiters) handedOver(key, node string, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	at, ok := w.handed[key+"\x00"+node]
	return ok && now.Sub(at) < handedOverFor
}

// notify wakes the longest-waiting nodes on key, other than the node that
// freed it, and says how many it woke. A full channel drops the wake-up:
// the recheck still comes.
func (w *waiters) notify(key, except string) int {
	woken := 0
	for _, node := range w.oldest(key, except) {
		select {
		case w.wake <- event.GenericEvent{Object: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}}:
			woken++
		default:
		}
	}
	return woken
}

// oldest returns the longest-waiting nodes on key, other than except.
func (w *waiters) oldest(key, except string) []string {
	w.mu.Lock()
	type waiter struct {
		node  string
		since time.Time
	}
	var list []waiter
	for n, since := range w.byKey[key] {
		if n != except {
			list = append(list, waiter{n, since})
		}
	}
	w.mu.Unlock()
	sort.Slice(list, func(i, j int) bool {
		if !list[i].since.Equal(list[j].since) {
			return list[i].since.Before(list[j].since)
		}
		return list[i].node < list[j].node
	})
	out := make([]string, 0, wakeBatch)
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, wt := range list[:min(wakeBatch, len(list))] {
		out = append(out, wt.node)
		// Woken nodes stop waiting until their evaluation says they still
		// do, so that the next slot freed meanwhile wakes the next nodes,
		// not these again.
		delete(w.byKey[key], wt.node)
	}
	return out
}
