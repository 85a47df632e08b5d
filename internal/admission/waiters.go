package admission

import (
	"context"
	"sort"
	"strings"
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
//
// The waiters on a budget that wait for nothing else stand in line for
// it: a free slot goes to the longest waiting of them, and a node with as
// many in line ahead of it as there are free slots leaves the slots to
// them (ahead) rather than racing them for one. A node keeps its place
// until its next evaluation says otherwise, its evaluation fails
// (outOfLine) or it is gone: nothing evaluates the nodes in line again on
// a timer. What no event announces is kept per budget instead (keep): the
// time a slot expires (due), and a look at the front of each line every
// lineKeep.
//
// Wake-ups are never dropped: a node to wake is queued in pending (once,
// however often it is woken before it is evaluated) and Run hands it on.
type waiters struct {
	mu    sync.Mutex
	byKey map[string]map[string]*waiter // wake key → node → its wait
	wake  chan event.GenericEvent
	// pending are the nodes woken and not yet handed on, in order;
	// isPending the same as a set. signal says pending has grown.
	pending   []string
	isPending map[string]bool
	signal    chan struct{}
	// due is when a slot of a budget expires with nothing else changing
	// (a stagger's, a maxMaintenance slot with skipAfter), by wake key:
	// the front of its line is woken then. dueSet says due changed.
	due    map[string]time.Time
	dueSet chan struct{}
	// handed remembers, for handedOverFor, the slots handed over at once
	// (by wake key and the node that gave it back), so that the cache's
	// later sight of the same hand-over wakes nobody more.
	handed map[string]time.Time
	// claimed remembers the nodes a slot is being handed to (by wake key
	// and node, since when): until the hand-over is done, their own
	// admission must not take another slot (claimFront). Every claim ends
	// with gave or unclaim.
	claimed map[string]time.Time
}

// waiter is one node's wait on one key.
type waiter struct {
	since time.Time // waiting since (entered its state)
	// inLine: only this budget keeps the node from moving on.
	inLine bool
	// woken for a freed slot and not evaluated since: the next slot freed
	// wakes the next nodes, not these again.
	woken bool
}

// handedOverFor is how long a slot handed over at once keeps the cache's
// sight of the hand-over from waking more waiters: longer than the cache
// lags, shorter than the recheck of a waiter nothing woke.
const handedOverFor = 15 * time.Second

// wakeBatch is how many waiters one freed slot or state change wakes: the
// oldest takes the slot; the next is there in case the oldest cannot.
const wakeBatch = 2

// FleetRecheck is how often a node waiting on a check that reads other
// nodes (anyLabel, nodeCount, clusterSemver, affinity, kubernikusCount) is
// evaluated again: what changes their answer (another node's labels,
// version or count) sends no event pitstop follows. A node waiting only
// on budgets is not rechecked: it is woken.
const FleetRecheck = 30 * time.Second

// lineKeep is how often the front of every budget's line is woken when
// nothing else woke it: what a missed event would leave undone (a slot
// freed by a node that vanished, a woken node that no longer wanted the
// slot) waits at most this long, at a cost of one evaluation a budget,
// whatever the size of the fleet.
const lineKeep = 30 * time.Second

func newWaiters() *waiters {
	return &waiters{
		byKey: map[string]map[string]*waiter{}, wake: make(chan event.GenericEvent),
		isPending: map[string]bool{}, signal: make(chan struct{}, 1),
		due: map[string]time.Time{}, dueSet: make(chan struct{}, 1),
		handed: map[string]time.Time{}, claimed: map[string]time.Time{},
	}
}

// set makes node a waiter on exactly keys (none: not waiting), in line on
// those of them in inLine, as its evaluation found.
func (w *waiters) set(node string, keys, inLine []string, since time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	want := map[string]bool{}
	for _, k := range keys {
		want[k] = false
	}
	for _, k := range inLine {
		want[k] = true
	}
	for k, nodes := range w.byKey {
		if _, ok := want[k]; !ok {
			delete(nodes, node)
			if len(nodes) == 0 {
				delete(w.byKey, k)
			}
		}
	}
	for k, line := range want {
		if w.byKey[k] == nil {
			w.byKey[k] = map[string]*waiter{}
		}
		wt := w.byKey[k][node]
		if wt == nil {
			wt = &waiter{since: since}
			w.byKey[k][node] = wt
		}
		wt.inLine, wt.woken = line, false
	}
}

// outOfLine takes node out of every line it stands in, still waking it
// when what it waits for frees: its evaluation failed, and a node whose
// evaluations fail must not hold the nodes behind it back.
func (w *waiters) outOfLine(node string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, nodes := range w.byKey {
		if wt := nodes[node]; wt != nil {
			wt.inLine = false
		}
	}
}

// admitted takes node out of key's line: it holds a slot of it now.
func (w *waiters) admitted(key, node string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.byKey[key], node)
}

// ahead counts the nodes in key's line that have waited longer than node,
// which waits since since.
func (w *waiters) ahead(key, node string, since time.Time) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for other, wt := range w.byKey[key] {
		if other != node && wt.inLine && before(wt.since, other, since, node) {
			n++
		}
	}
	return n
}

// wakeFront wakes those of the first n nodes in key's line that are not
// woken yet: a node that leaves the free slots to them calls it, so that a
// slot their last evaluation did not see free does not wait for their
// recheck.
func (w *waiters) wakeFront(key string, n int) {
	w.mu.Lock()
	line := w.line(key)
	sort.Slice(line, func(i, j int) bool { return before(line[i].since, line[i].node, line[j].since, line[j].node) })
	var wake []string
	for _, c := range line[:min(n, len(line))] {
		if !c.woken {
			c.woken = true
			wake = append(wake, c.node)
		}
	}
	w.mu.Unlock()
	for _, node := range wake {
		w.send(node)
	}
}

// candidate is a node's wait on a key, named.
type candidate struct {
	node string
	*waiter
}

// line returns, in no order, the nodes in key's line. w.mu must be held.
func (w *waiters) line(key string) []candidate {
	var line []candidate
	for node, wt := range w.byKey[key] {
		if wt.inLine {
			line = append(line, candidate{node, wt})
		}
	}
	return line
}

// before orders waiters by how long they have waited, then by name.
func before(since time.Time, node string, otherSince time.Time, other string) bool {
	if !since.Equal(otherSince) {
		return since.Before(otherSince)
	}
	return node < other
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
	w.rememberHandOver(key, node, now)
}

// claimFor bounds how long a claim on a node (claimFront) holds back its
// own admission: longer than a hand-over's write takes.
const claimFor = 10 * time.Second

// claimFront takes the node first in key's line that is not woken yet,
// other than except, out of the line and claims it for the slot except is
// about to hand it, so that two slots given up at once go to two nodes.
// It returns "" when nobody is in line.
func (w *waiters) claimFront(key, except string, now time.Time) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var first candidate
	for _, c := range w.line(key) {
		if c.node == except || c.woken || w.isClaimed(key, c.node, now) {
			continue // a node back in line while a slot is handed to it is not claimed twice
		}
		if first.waiter == nil || before(c.since, c.node, first.since, first.node) {
			first = c
		}
	}
	if first.waiter == nil {
		return ""
	}
	delete(w.byKey[key], first.node)
	w.claimed[onKey(key, first.node)] = now
	return first.node
}

// admitting takes node out of key's line as it asks for a slot of key,
// unless a slot is being handed to it (claimFront): then it must not take
// another, and it reports false.
func (w *waiters) admitting(key, node string, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.isClaimed(key, node, now) {
		return false
	}
	delete(w.byKey[key], node)
	return true
}

// isClaimed says a slot of key is being handed to node. w.mu must be held.
func (w *waiters) isClaimed(key, node string, now time.Time) bool {
	at, ok := w.claimed[onKey(key, node)]
	return ok && now.Sub(at) < claimFor
}

// gave records that node from handed its slot of key straight to node to
// (Slots.HandOver): to is woken to go in, and the cache's later sight of
// the hand-over (from leaving maintenance, the slot changing holder) wakes
// nobody more.
func (w *waiters) gave(key, from, to string, now time.Time) {
	w.mu.Lock()
	delete(w.claimed, onKey(key, to))
	w.rememberHandOver(key, from, now)
	w.mu.Unlock()
	w.send(to)
}

// unclaim ends a claim whose hand-over did not happen, and wakes the node
// to ask for a slot itself.
func (w *waiters) unclaim(key, node string) {
	w.mu.Lock()
	delete(w.claimed, onKey(key, node))
	w.mu.Unlock()
	w.send(node)
}

// onKey names a node's entry on a wake key in handed and claimed.
func onKey(key, node string) string { return key + "\x00" + node }

// rememberHandOver remembers, for handedOverFor, that the slot node gave
// back was handed over. w.mu must be held.
func (w *waiters) rememberHandOver(key, node string, now time.Time) {
	for k, at := range w.handed { // bounded: old entries go
		if now.Sub(at) >= handedOverFor {
			delete(w.handed, k)
		}
	}
	w.handed[onKey(key, node)] = now
}

// handedOver says the waiters on key were already woken for the slot node
// gave back (handOver).
func (w *waiters) handedOver(key, node string, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	at, ok := w.handed[onKey(key, node)]
	return ok && now.Sub(at) < handedOverFor
}

// keys names the wake keys with waiters that start with prefix.
func (w *waiters) keys(prefix string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for k := range w.byKey {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	return out
}

// notify wakes the longest-waiting nodes on key, other than the node that
// freed it, and says how many it woke.
func (w *waiters) notify(key, except string) int {
	nodes := w.oldest(key, except)
	for _, node := range nodes {
		w.send(node)
	}
	return len(nodes)
}

// send queues node's evaluation ahead of the rest: Run hands it on. A
// node already queued is queued once.
func (w *waiters) send(node string) {
	w.mu.Lock()
	if !w.isPending[node] {
		w.isPending[node] = true
		w.pending = append(w.pending, node)
	}
	w.mu.Unlock()
	select {
	case w.signal <- struct{}{}:
	default:
	}
}

// take returns the nodes woken since the last take, in order.
func (w *waiters) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.pending
	w.pending = nil
	clear(w.isPending)
	return out
}

// pump hands the woken nodes on to wake until ctx ends.
func (w *waiters) pump(ctx context.Context) {
	for {
		for _, node := range w.take() {
			select {
			case w.wake <- event.GenericEvent{Object: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}}:
			case <-ctx.Done():
				return
			}
		}
		select {
		case <-w.signal:
		case <-ctx.Done():
			return
		}
	}
}

// expires records that a slot of key's budget expires at at, with nothing
// else changing: keep wakes the front of its line then.
func (w *waiters) expires(key string, at time.Time) {
	w.mu.Lock()
	if d, ok := w.due[key]; ok && !at.Before(d) {
		w.mu.Unlock()
		return
	}
	w.due[key] = at
	w.mu.Unlock()
	select {
	case w.dueSet <- struct{}{}:
	default:
	}
}

// keep wakes, until ctx ends, the front of a budget's line when one of
// its slots expires (expires), and the front of every line every
// lineKeep. now is the clock the slots are judged by.
func (w *waiters) keep(ctx context.Context, now func() time.Time) {
	every := time.NewTicker(lineKeep)
	defer every.Stop()
	next := time.NewTimer(time.Hour)
	defer next.Stop()
	for {
		next.Reset(w.wakeDue(now()))
		select {
		case <-every.C:
			for _, key := range w.keys("") {
				w.wakeFront(key, 1)
			}
		case <-next.C:
		case <-w.dueSet:
		case <-ctx.Done():
			return
		}
	}
}

// wakeDue wakes the front of the lines whose slot expired by now, and
// says how long until the next one does (an hour when none is due).
func (w *waiters) wakeDue(now time.Time) time.Duration {
	w.mu.Lock()
	var keys []string
	wait := time.Hour
	for key, at := range w.due {
		if d := at.Sub(now); d > 0 {
			wait = min(wait, d)
			continue
		}
		keys = append(keys, key)
		delete(w.due, key)
	}
	w.mu.Unlock()
	for _, key := range keys {
		w.wakeFront(key, wakeBatch)
	}
	return wait
}

// oldest returns the longest-waiting nodes on key not woken yet, other
// than except: those in line first, then those that wait for more than
// the key.
func (w *waiters) oldest(key, except string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var list []candidate
	for n, wt := range w.byKey[key] {
		if n != except && !wt.woken {
			list = append(list, candidate{n, wt})
		}
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].inLine != list[j].inLine {
			return list[i].inLine
		}
		return before(list[i].since, list[i].node, list[j].since, list[j].node)
	})
	out := make([]string, 0, wakeBatch)
	for _, c := range list[:min(wakeBatch, len(list))] {
		out = append(out, c.node)
		c.woken = true
	}
	return out
}
