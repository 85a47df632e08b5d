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
// A freed budget wakes its waiters twice: when the manager's cache sees
// the node leave maintenance (so the budget check, which counts from the
// cache, passes) and after the node's slot Lease is given back (so the
// admission, which takes a Lease, succeeds). Whichever comes second lets
// the waiter in; the order of the two does not matter.
type waiters struct {
	mu    sync.Mutex
	byKey map[string]map[string]time.Time // wake key → node → waiting since
	wake  chan event.GenericEvent
}

// wakeBatch is how many waiters one freed slot or state change wakes: the
// oldest takes the slot; the next is there in case the oldest cannot.
const wakeBatch = 2

// waiterRecheck bounds how long a waiter sleeps when nothing wakes it
// (a slot freed by a node that disappeared, say).
const waiterRecheck = 30 * time.Second

func newWaiters() *waiters {
	return &waiters{byKey: map[string]map[string]time.Time{}, wake: make(chan event.GenericEvent, 1024)}
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

// notify wakes the longest-waiting nodes on key, other than the node that
// freed it. A full channel drops the wake-up: the recheck still comes.
func (w *waiters) notify(key, except string) {
	for _, node := range w.oldest(key, except) {
		select {
		case w.wake <- event.GenericEvent{Object: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}}:
		default:
		}
	}
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
