package budget

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pitstop-dev/pitstop/internal/scheme"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

var env *testutil.Env

func TestMain(m *testing.M) { testutil.Main(m, &env) }

// TestBudgetHoldsUnderContention: 50 nodes want maintenance at once with a
// budget of 3, through two "replicas" (two clients of their own), each node
// holding its slot a little while and then releasing it. The number of
// nodes holding a slot at the same instant never exceeds 3, no node ever
// holds two slots, and every node gets its turn: with the slots read from
// the API server only, and with each replica's own informer cache in front
// (slots the cache shows free are taken with a create alone; the cache lags
// the writes of both replicas).
func TestBudgetHoldsUnderContention(t *testing.T) {
	listed := map[bool]int64{}
	for _, cached := range []bool{false, true} {
		t.Run(fmt.Sprintf("cached=%t", cached), func(t *testing.T) {
			ns := testutil.Namespace(t, env.Client, fmt.Sprintf("budget-contention-%t", cached))
			replicas := make([]*Slots, 2)
			lists := make([]*countingClient, 2)
			for i := range replicas {
				c, err := client.New(env.Config, client.Options{Scheme: scheme.New()})
				if err != nil {
					t.Fatal(err)
				}
				lists[i] = &countingClient{Client: c}
				replicas[i] = &Slots{Client: lists[i], Namespace: ns}
				if cached {
					replicas[i].Cache = leaseCache(t, ns)
				}
			}
			acquired := contend(t, replicas, 50, 3)
			listed[cached] = lists[0].lists.Load() + lists[1].lists.Load()
			t.Logf("%d slots taken and given back with %d lists of the API server", acquired, listed[cached])
		})
	}
	// Slots the cache shows free are taken, and slots it shows held given
	// back, without a list: in this race (nodes holding a slot for a few
	// milliseconds, so the cache is often behind) about 2.3 times fewer.
	if listed[true]*3 > listed[false]*2 {
		t.Errorf("with caches the slots took %d lists of the API server, without %d: the cache saved too few", listed[true], listed[false])
	}
}

// contend runs nodes that each take a slot of budget through one of the
// replicas, hold it a moment and give it back, checking the budget's
// holders after every acquisition. It returns the number of slots taken.
func contend(t *testing.T, replicas []*Slots, nodes, budget int) int {
	key := Key{Name: "os-update", Group: "zone-a"}
	var holding, maxHolding atomic.Int32
	var wg sync.WaitGroup
	served := make([]bool, nodes)
	for n := range nodes {
		wg.Go(func() {
			node := fmt.Sprintf("node-%02d", n)
			slots := replicas[n%len(replicas)]
			for {
				// As the engine does: a budget the cache shows full is
				// not asked for a slot.
				if free, _ := slots.Free(t.Context(), key, budget, node, nil); free == 0 {
					time.Sleep(time.Duration(5+rand.IntN(20)) * time.Millisecond)
					continue
				}
				_, ok, err := slots.Acquire(t.Context(), key, budget, node, time.Now(), nil)
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					break
				}
				time.Sleep(time.Duration(5+rand.IntN(20)) * time.Millisecond)
			}
			now := holding.Add(1)
			for {
				m := maxHolding.Load()
				if now <= m || maxHolding.CompareAndSwap(m, now) {
					break
				}
			}
			if holders, err := (&Slots{Client: env.Client, Namespace: slots.Namespace}).Holders(t.Context(), key); err != nil {
				t.Error(err)
			} else if n := count(holders, node); n != 1 {
				t.Errorf("%s holds %d slots: %v", node, n, holders)
			}
			served[n] = true
			time.Sleep(time.Duration(5+rand.IntN(10)) * time.Millisecond)
			holding.Add(-1)
			if err := slots.Release(t.Context(), key, node); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := maxHolding.Load(); got > int32(budget) {
		t.Fatalf("%d nodes held a slot at once, budget %d", got, budget)
	}
	taken := 0
	for n, ok := range served {
		if !ok {
			t.Errorf("node-%02d never got a slot", n)
			continue
		}
		taken++
	}
	if holders, _ := (&Slots{Client: env.Client, Namespace: replicas[0].Namespace}).Holders(t.Context(), key); len(holders) != 0 {
		t.Errorf("slots still held after every node released: %v", holders)
	}
	t.Logf("at most %d nodes held a slot at once (budget %d)", maxHolding.Load(), budget)
	return taken
}

func count(names []string, name string) int {
	n := 0
	for _, x := range names {
		if x == name {
			n++
		}
	}
	return n
}

// countingClient counts the lists it sends to the API server.
type countingClient struct {
	client.Client
	lists atomic.Int64
}

func (c *countingClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	c.lists.Add(1)
	return c.Client.List(ctx, list, opts...)
}

// leaseCache is an informer cache of the namespace's Leases, as the
// manager's, started and synced.
func leaseCache(t *testing.T, ns string) cache.Cache {
	t.Helper()
	c, err := cache.New(env.Config, cache.Options{Scheme: scheme.New(), DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetInformer(t.Context(), &coordinationv1.Lease{}); err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(t.Context()) }()
	if !c.WaitForCacheSync(t.Context()) {
		t.Fatal("the lease cache did not sync")
	}
	return c
}

// TestCachedSlotsFallBackToTheAPIServer: when the cache is behind — a slot
// it shows free is taken, or a slot it shows held changed hands — Acquire
// and Release ask the API server, and nothing of another node's is freed.
func TestCachedSlotsFallBackToTheAPIServer(t *testing.T) {
	ns := testutil.Namespace(t, env.Client, "budget-fallback")
	key := Key{Name: "fleet"}
	live := &Slots{Client: env.Client, Namespace: ns}
	// A cache that never sees anything: every slot looks free.
	empty := &Slots{Client: env.Client, Cache: staticCache{}, Namespace: ns}
	if _, ok, err := live.Acquire(t.Context(), key, 2, "a", time.Now(), nil); err != nil || !ok {
		t.Fatalf("a: %v %v", ok, err)
	}
	name, ok, err := empty.Acquire(t.Context(), key, 2, "b", time.Now(), nil)
	if err != nil || !ok {
		t.Fatalf("b, its cache showing both slots free while a holds one: %v %v", ok, err)
	}
	if _, ok, _ := empty.Acquire(t.Context(), key, 2, "c", time.Now(), nil); ok {
		t.Fatal("c got a slot of a full budget through a cache that shows it empty")
	}
	// b asks again at once: its cache does not show b's slot, so the API
	// server is asked, and b keeps the one slot it has.
	again, ok, err := empty.Acquire(t.Context(), key, 2, "b", time.Now(), nil)
	if err != nil || !ok || again != name {
		t.Fatalf("b again: %q %v %v, want %q", again, ok, err, name)
	}
	if h, _ := live.Holders(t.Context(), key); len(h) != 2 {
		t.Fatalf("holders %v, want a and b", h)
	}

	// A cache showing a's slot as it was before a gave it back and c took
	// it: releasing a through it frees nothing of c's.
	stale := &coordinationv1.LeaseList{}
	if err := env.Client.List(t.Context(), stale, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if err := live.Release(t.Context(), key, "a"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := live.Acquire(t.Context(), key, 2, "c", time.Now(), nil); err != nil || !ok {
		t.Fatalf("c: %v %v", ok, err)
	}
	old := &Slots{Client: env.Client, Cache: staticCache{leases: stale.Items}, Namespace: ns}
	if err := old.Release(t.Context(), key, "a"); err != nil {
		t.Fatal(err)
	}
	holders, _ := live.Holders(t.Context(), key)
	if count(holders, "c") != 1 || count(holders, "b") != 1 {
		t.Fatalf("holders after a stale release of a: %v, want b and c", holders)
	}
	// b releasing through the same stale cache (b's slot unchanged) works.
	if err := old.Release(t.Context(), key, "b"); err != nil {
		t.Fatal(err)
	}
	if holders, _ := live.Holders(t.Context(), key); len(holders) != 1 || holders[0] != "c" {
		t.Fatalf("holders after b's release: %v, want [c]", holders)
	}
}

// TestTwoReplicasGiveANodeOneSlot: two replicas let the same node in at
// once, neither cache showing the other's slot: the second finds the slot
// it tries already the node's and takes no other, so a budget of two still
// has a slot for the next node.
func TestTwoReplicasGiveANodeOneSlot(t *testing.T) {
	ns := testutil.Namespace(t, env.Client, "budget-two-replicas")
	key := Key{Name: "replicas"}
	first := &Slots{Client: env.Client, Cache: staticCache{}, Namespace: ns}
	second := &Slots{Client: env.Client, Cache: staticCache{}, Namespace: ns}
	name, ok, err := first.Acquire(t.Context(), key, 2, "node-0", time.Now(), nil)
	if err != nil || !ok {
		t.Fatalf("first replica: %v %v", ok, err)
	}
	again, ok, err := second.Acquire(t.Context(), key, 2, "node-0", time.Now(), nil)
	if err != nil || !ok || again != name {
		t.Fatalf("second replica: %q %v %v, want the first's %q", again, ok, err, name)
	}
	live := &Slots{Client: env.Client, Namespace: ns}
	if h, _ := live.Holders(t.Context(), key); len(h) != 1 {
		t.Fatalf("holders %v, want node-0 once", h)
	}
	if _, ok, err := second.Acquire(t.Context(), key, 2, "node-1", time.Now(), nil); err != nil || !ok {
		t.Fatalf("node-1 finds the budget of two full: %v %v", ok, err)
	}
}

// TestALostRaceForAFreedSlotAsksNothingMore: nodes woken together for a
// freed slot race for it with a create each. A node whose cache shows a
// free slot another node has just taken goes on to the next slot its
// cache shows free, and when there is none it is told the budget is full
// without listing the Leases from the API server.
func TestALostRaceForAFreedSlotAsksNothingMore(t *testing.T) {
	ns := testutil.Namespace(t, env.Client, "budget-race")
	live := &Slots{Client: env.Client, Namespace: ns}
	for _, tc := range []struct {
		name, key string
		size      int
		want      bool
	}{
		{"one slot, taken", "one", 1, false},
		{"two slots, one taken", "two", 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := Key{Name: tc.key}
			if _, ok, err := live.Acquire(t.Context(), key, tc.size, "winner", time.Now(), nil); err != nil || !ok {
				t.Fatalf("winner: %v %v", ok, err)
			}
			counting := &countingClient{Client: env.Client}
			// Its cache has not seen the winner's slot yet.
			loser := &Slots{Client: counting, Cache: staticCache{}, Namespace: ns}
			_, ok, err := loser.Acquire(t.Context(), key, tc.size, "next", time.Now(), nil)
			if err != nil || ok != tc.want {
				t.Fatalf("got a slot: %v (%v), want %v", ok, err, tc.want)
			}
			if n := counting.lists.Load(); n != 0 {
				t.Errorf("%d lists of the API server, want none", n)
			}
			holders, _ := live.Holders(t.Context(), key)
			if count(holders, "winner") != 1 || len(holders) != map[bool]int{false: 1, true: 2}[tc.want] {
				t.Errorf("holders %v", holders)
			}
		})
	}
}

// TestASlotGivenBackIsFreeBeforeTheCacheSeesIt: once this process has
// given a slot back, its cache, still showing the slot held, is read
// without it: the next node takes it with a create alone. The slot then
// shows held by that node, before the cache shows it and after.
func TestASlotGivenBackIsFreeBeforeTheCacheSeesIt(t *testing.T) {
	ns := testutil.Namespace(t, env.Client, "budget-given-back")
	key := Key{Name: "given-back"}
	live := &Slots{Client: env.Client, Namespace: ns}
	if _, ok, err := live.Acquire(t.Context(), key, 1, "leaving", time.Now(), nil); err != nil || !ok {
		t.Fatalf("leaving: %v %v", ok, err)
	}
	held := &coordinationv1.LeaseList{}
	if err := env.Client.List(t.Context(), held, client.InNamespace(ns)); err != nil || len(held.Items) != 1 {
		t.Fatalf("slot Leases: %v (%d)", err, len(held.Items))
	}
	counting := &countingClient{Client: env.Client}
	s := &Slots{Client: counting, Cache: staticCache{leases: held.Items}, Namespace: ns}
	if free, _ := s.Free(t.Context(), key, 1, "next", nil); free != 0 {
		t.Fatal("the budget does not look full while the slot is held")
	}
	if err := s.Release(t.Context(), key, "leaving"); err != nil {
		t.Fatal(err)
	}
	if free, _ := s.Free(t.Context(), key, 1, "next", nil); free != 1 {
		t.Error("the budget looks full after its slot was given back")
	}
	if holders := s.CachedHolders(t.Context(), key, 1); len(holders) != 0 {
		t.Errorf("cached holders %v after the slot was given back", holders)
	}
	if _, ok, err := s.Acquire(t.Context(), key, 1, "next", time.Now(), nil); err != nil || !ok {
		t.Fatalf("next: %v %v", ok, err)
	}
	if n := counting.lists.Load(); n != 0 {
		t.Errorf("%d lists of the API server, want none", n)
	}
	// The cache still shows the slot held by leaving.
	if holders := s.CachedHolders(t.Context(), key, 1); !slices.Equal(holders, []string{"next"}) {
		t.Errorf("cached holders %v before the cache caught up, want [next]", holders)
	}
	if free, _ := s.Free(t.Context(), key, 1, "third", nil); free != 0 {
		t.Error("the budget does not look full to a third node after next took its slot")
	}
	// The cache catches up: the slot, created again, is held by next.
	again := &coordinationv1.LeaseList{}
	if err := env.Client.List(t.Context(), again, client.InNamespace(ns)); err != nil || len(again.Items) != 1 {
		t.Fatalf("slot Leases: %v (%d)", err, len(again.Items))
	}
	s.Cache = staticCache{leases: again.Items}
	if holders := s.CachedHolders(t.Context(), key, 1); !slices.Equal(holders, []string{"next"}) {
		t.Errorf("cached holders %v, want [next]", holders)
	}
	// Deleted by someone else: the cache shows the slot free, and so do the slots.
	if err := env.Client.Delete(t.Context(), &again.Items[0]); err != nil {
		t.Fatal(err)
	}
	s.Cache = staticCache{}
	if holders := s.CachedHolders(t.Context(), key, 1); len(holders) != 0 {
		t.Errorf("cached holders %v once the cache shows the slot deleted, want none", holders)
	}
}

// TestHandOver: a slot is handed from one node to another by one update of
// its Lease, without a list; the next node then holds it as far as the
// slots tell, before the cache shows it. A hand-over the cache cannot
// vouch for (from holds no slot, to holds one, the Lease changed since the
// cache saw it) changes nothing.
func TestHandOver(t *testing.T) {
	ns := testutil.Namespace(t, env.Client, "budget-hand-over")
	key := Key{Name: "hand-over"}
	live := &Slots{Client: env.Client, Namespace: ns}
	for _, node := range []string{"leaving", "other"} {
		if _, ok, err := live.Acquire(t.Context(), key, 3, node, time.Now(), nil); err != nil || !ok {
			t.Fatalf("%s: %v %v", node, ok, err)
		}
	}
	cached := &coordinationv1.LeaseList{}
	if err := env.Client.List(t.Context(), cached, client.InNamespace(ns)); err != nil || len(cached.Items) != 2 {
		t.Fatalf("slot Leases: %v (%d)", err, len(cached.Items))
	}
	counting := &countingClient{Client: env.Client}
	s := &Slots{Client: counting, Cache: staticCache{leases: cached.Items}, Namespace: ns}
	for _, refused := range []struct{ from, to string }{
		{"leaving", "other"}, // other holds a slot already
		{"nobody", "next"},   // nobody holds none
		{"leaving", "leaving"},
	} {
		if ok, err := s.HandOver(t.Context(), key, 3, refused.from, refused.to, time.Now()); err != nil || ok {
			t.Errorf("%s → %s: handed over %v (%v), want refused", refused.from, refused.to, ok, err)
		}
	}
	if holders, err := live.Holders(t.Context(), key); err != nil || !slices.Equal(sorted(holders), []string{"leaving", "other"}) {
		t.Fatalf("holders %v (%v) after refused hand-overs", holders, err)
	}

	ok, err := s.HandOver(t.Context(), key, 3, "leaving", "next", time.Now())
	if err != nil || !ok {
		t.Fatalf("leaving → next: %v %v", ok, err)
	}
	if holders, err := live.Holders(t.Context(), key); err != nil || !slices.Equal(sorted(holders), []string{"next", "other"}) {
		t.Errorf("holders %v (%v), want [next other]", holders, err)
	}
	if free, holding := s.Free(t.Context(), key, 3, "next", nil); !holding {
		t.Errorf("next does not hold a slot before the cache shows it (free %d)", free)
	}
	if free, _ := s.Free(t.Context(), key, 3, "third", nil); free != 1 {
		t.Errorf("%d slots free to a third node, want 1", free)
	}
	name, ok, err := s.Acquire(t.Context(), key, 3, "next", time.Now(), nil)
	if err != nil || !ok || name != cached.Items[slices.IndexFunc(cached.Items, func(l coordinationv1.Lease) bool { return HolderOf(&l) == "leaving" })].Name {
		t.Errorf("next's slot %q (%v %v), want the one handed to it", name, ok, err)
	}
	if n := counting.lists.Load(); n != 0 {
		t.Errorf("%d lists of the API server, want none", n)
	}

	// Another process, whose cache still shows the slot held by leaving,
	// cannot hand it over again: the Lease changed.
	behind := &Slots{Client: env.Client, Cache: staticCache{leases: cached.Items}, Namespace: ns}
	if ok, err := behind.HandOver(t.Context(), key, 3, "leaving", "fourth", time.Now()); err != nil || ok {
		t.Errorf("a hand-over from a stale cache: %v (%v), want refused", ok, err)
	}
	if holders, err := live.Holders(t.Context(), key); err != nil || !slices.Equal(sorted(holders), []string{"next", "other"}) {
		t.Errorf("holders %v (%v) after the stale hand-over, want [next other]", holders, err)
	}
}

func sorted(names []string) []string {
	out := slices.Clone(names)
	slices.Sort(out)
	return out
}

// staticCache answers lists with a fixed set of Leases.
type staticCache struct {
	client.Reader
	leases []coordinationv1.Lease
}

func (c staticCache) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	o := (&client.ListOptions{}).ApplyOptions(opts)
	out := list.(*coordinationv1.LeaseList)
	for _, l := range c.leases {
		if o.LabelSelector == nil || o.LabelSelector.Matches(labels.Set(l.Labels)) {
			out.Items = append(out.Items, l)
		}
	}
	return nil
}

// TestStaleSlotIsTakenOver: a slot whose holder no longer needs it is taken
// by the next node, with optimistic concurrency; a fresh holder keeps it.
func TestStaleSlotIsTakenOver(t *testing.T) {
	ns := testutil.Namespace(t, env.Client, "budget-stale")
	s := &Slots{Client: env.Client, Namespace: ns}
	key := Key{Name: "stagger"}
	t0 := time.Now()
	if _, ok, err := s.Acquire(t.Context(), key, 1, "a", t0, nil); err != nil || !ok {
		t.Fatalf("first node: %v %v", ok, err)
	}
	if _, ok, _ := s.Acquire(t.Context(), key, 1, "a", t0, nil); !ok {
		t.Fatal("a node holding a slot must be told it holds it")
	}
	notStale := func(string, *coordinationv1.Lease) bool { return false }
	if _, ok, _ := s.Acquire(t.Context(), key, 1, "b", t0, notStale); ok {
		t.Fatal("b took a slot that a holds")
	}
	staleAfter := func(d time.Duration, now time.Time) Stale {
		return func(_ string, l *coordinationv1.Lease) bool { return now.Sub(l.Spec.AcquireTime.Time) >= d }
	}
	if _, ok, err := s.Acquire(t.Context(), key, 1, "b", t0.Add(time.Hour), staleAfter(time.Minute, t0.Add(time.Hour))); err != nil || !ok {
		t.Fatalf("b could not take a's stale slot: %v %v", ok, err)
	}
	holders, err := s.Holders(t.Context(), key)
	if err != nil || len(holders) != 1 || holders[0] != "b" {
		t.Fatalf("holders = %v, %v; want [b]", holders, err)
	}
	// a releasing does not free b's slot.
	if err := s.Release(t.Context(), key, "a"); err != nil {
		t.Fatal(err)
	}
	if holders, _ := s.Holders(t.Context(), key); len(holders) != 1 {
		t.Fatalf("a's release freed b's slot: holders %v", holders)
	}
}

// TestRenew: a holder confirms its slot with a write of its renewTime,
// which Taken then gives, unless it took or confirmed it within fresh; a
// node holding no slot, or whose slot went, is told so. A sweep that
// judged the slot stale before the renewal deletes nothing.
func TestRenew(t *testing.T) {
	ns := testutil.Namespace(t, env.Client, "budget-renew")
	s := &Slots{Client: env.Client, Namespace: ns}
	key := Key{Name: "renew"}
	t0 := time.Now().Truncate(time.Microsecond)
	if _, ok, err := s.Acquire(t.Context(), key, 1, "a", t0, nil); err != nil || !ok {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	slot := func() *coordinationv1.Lease {
		t.Helper()
		list := &coordinationv1.LeaseList{}
		if err := env.Client.List(t.Context(), list, client.InNamespace(ns)); err != nil || len(list.Items) != 1 {
			t.Fatalf("slots: %v (%d)", err, len(list.Items))
		}
		return &list.Items[0]
	}
	taken := slot()
	if got := Taken(taken); !got.Equal(t0) {
		t.Errorf("Taken = %v, want the acquire time %v", got, t0)
	}
	if ok, err := s.Renew(t.Context(), key, "a", t0.Add(2*time.Second), 5*time.Second); err != nil || !ok {
		t.Fatalf("renewing a fresh slot: %v %v", ok, err)
	}
	if v := slot().ResourceVersion; v != taken.ResourceVersion {
		t.Error("a slot taken within fresh was written")
	}
	for _, c := range []struct {
		name string
		s    *Slots
	}{{"without a cache", s}, {"with a cache", &Slots{Client: env.Client, Cache: env.Client, Namespace: ns}}} {
		before := slot()
		at := Taken(before).Add(20 * time.Second)
		if ok, err := c.s.Renew(t.Context(), key, "a", at, 5*time.Second); err != nil || !ok {
			t.Fatalf("%s: renewing: %v %v", c.name, ok, err)
		}
		after := slot()
		if got := Taken(after); !got.Equal(at) {
			t.Errorf("%s: Taken = %v after the renewal, want %v", c.name, got, at)
		}
		if HolderOf(after) != "a" || !after.Spec.AcquireTime.Time.Equal(t0) {
			t.Errorf("%s: the renewal changed the holder or the acquire time: %q %v", c.name, HolderOf(after), after.Spec.AcquireTime)
		}
		// A sweep that judged the slot as it was before cannot delete it.
		if err := env.Client.Delete(t.Context(), before.DeepCopy(), client.Preconditions{ResourceVersion: &before.ResourceVersion}); !apierrors.IsConflict(err) {
			t.Errorf("%s: deleting the slot as it was before the renewal: %v, want a conflict", c.name, err)
		}
	}
	if ok, err := s.Renew(t.Context(), key, "b", t0.Add(time.Hour), 5*time.Second); err != nil || ok {
		t.Errorf("a node holding no slot renewed: %v %v", ok, err)
	}
	// The slot goes (a sweep) with the version the cache shows: the holder's
	// renewal from that cache fails, and it is told.
	stale := slot()
	cache := staticCache{leases: []coordinationv1.Lease{*stale}}
	if err := env.Client.Delete(t.Context(), stale.DeepCopy(), client.Preconditions{ResourceVersion: &stale.ResourceVersion}); err != nil {
		t.Fatal(err)
	}
	behind := &Slots{Client: env.Client, Cache: cache, Namespace: ns}
	if ok, err := behind.Renew(t.Context(), key, "a", t0.Add(2*time.Hour), 5*time.Second); err != nil || ok {
		t.Errorf("renewing a slot the sweep gave back: %v %v, want false", ok, err)
	}
}

// TestFree: the slots a budget's cache shows free to a node are those
// neither held by another node nor expired; a holder is told it holds one;
// without a cache every slot looks free.
func TestFree(t *testing.T) {
	ns := testutil.Namespace(t, env.Client, "budget-free")
	// The API server stands in for the informer cache: same reads.
	s := &Slots{Client: env.Client, Cache: env.Client, Namespace: ns}
	key := Key{Name: "fleet"}
	t0 := time.Now()
	free := func(size int, node string, expired Stale) string {
		n, holding := s.Free(t.Context(), key, size, node, expired)
		return fmt.Sprintf("%d %v", n, holding)
	}
	if got := free(2, "c", nil); got != "2 false" {
		t.Fatalf("an empty budget of 2: %s free, want 2", got)
	}
	for _, n := range []string{"a", "b"} {
		if _, ok, err := s.Acquire(t.Context(), key, 2, n, t0, nil); err != nil || !ok {
			t.Fatalf("%s: %v %v", n, ok, err)
		}
	}
	expiredA := func(holder string, _ *coordinationv1.Lease) bool { return holder == "a" }
	for _, tc := range []struct {
		name    string
		size    int
		node    string
		expired Stale
		want    string
	}{
		{"both slots held", 2, "c", nil, "0 false"},
		{"a holder", 2, "a", nil, "0 true"},
		{"two of three held", 3, "c", nil, "1 false"},
		{"a's slot expired", 2, "c", expiredA, "1 false"},
	} {
		if got := free(tc.size, tc.node, tc.expired); got != tc.want {
			t.Errorf("%s: free, holding = %s, want %s", tc.name, got, tc.want)
		}
	}
	if n, _ := (&Slots{Client: env.Client, Namespace: ns}).Free(t.Context(), key, 2, "c", nil); n != 2 {
		t.Errorf("without a cache %d of 2 slots look free, want 2", n)
	}
	lease := &coordinationv1.Lease{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: slotName(key, 0)}, lease); err != nil {
		t.Fatal(err)
	}
	if got, ok := KeyOf(lease); !ok || got != key {
		t.Errorf("KeyOf(slot) = %v, %v; want %v", got, ok, key)
	}
}

func TestKeyIDsAreValidAndDistinct(t *testing.T) {
	a := slotName(Key{Name: "OS.Update", Group: "zone/a b"}, 0)
	b := slotName(Key{Name: "OS.Update", Group: "zone/a c"}, 0)
	if a == b {
		t.Error("different groups share a slot name")
	}
	for _, n := range []string{a, b, slotName(Key{Name: "x-very-long-profile-name-that-goes-on-and-on-and-on-for-ever"}, 9)} {
		if len(n) > 253 || n != toLowerValid(n) {
			t.Errorf("slot name %q is not a valid object name", n)
		}
	}
}

func toLowerValid(s string) string {
	out := []rune{}
	for _, r := range s {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '-' || r == '.' {
			out = append(out, r)
		}
	}
	return string(out)
}

// TestSweepGivesBackStaleSlots: the sweep deletes exactly the slots whose
// holder stale names, across budgets and groups, and reports their keys.
func TestSweepGivesBackStaleSlots(t *testing.T) {
	ns := testutil.Namespace(t, env.Client, "budget-sweep")
	s := &Slots{Client: env.Client, Namespace: ns}
	zoneA, all := Key{Name: "os", Group: "zone=a"}, Key{Name: "all-profiles"}
	for _, take := range []struct {
		key  Key
		node string
	}{{zoneA, "left"}, {zoneA, "still-in"}, {all, "left"}} {
		if _, ok, err := s.Acquire(t.Context(), take.key, 2, take.node, time.Now(), nil); err != nil || !ok {
			t.Fatalf("%s taking %v: %v %v", take.node, take.key, ok, err)
		}
	}
	seen := map[Key]bool{}
	err := s.Sweep(t.Context(), func(key Key, holder string, _ *coordinationv1.Lease) bool {
		seen[key] = true
		return holder == "left"
	})
	if err != nil {
		t.Fatal(err)
	}
	if !seen[zoneA] || !seen[all] {
		t.Errorf("the sweep saw budgets %v, want both", seen)
	}
	if h, _ := s.Holders(t.Context(), zoneA); len(h) != 1 || h[0] != "still-in" {
		t.Errorf("zone a holders after the sweep: %v, want [still-in]", h)
	}
	if h, _ := s.Holders(t.Context(), all); len(h) != 0 {
		t.Errorf("all-profiles holders after the sweep: %v, want none", h)
	}
}

// TestSlotIndex: a Lease is slot i of a budget only under the budget's own
// name for i, and only for i below the budget's size.
func TestSlotIndex(t *testing.T) {
	key, other := Key{Name: "fleet"}, Key{Name: "fleet", Group: "zone-a"}
	for name, want := range map[string]int{
		slotName(key, 0): 0, slotName(key, 9): 9,
		slotName(key, 10): -1, slotName(other, 1): -1, slotName(key, 1) + "0": -1, // slot 10, past the size
		"pitstop-slot-" + key.id() + "-01": -1, "pitstop-slot-" + key.id() + "--1": -1, "pitstop-slot-" + key.id() + "-": -1,
	} {
		i, ok := slotIndex(key, 10, name)
		if (want < 0 && ok) || (want >= 0 && (!ok || i != want)) {
			t.Errorf("slotIndex(%q) = %d, %t; want %d", name, i, ok, want)
		}
	}
}

// TestCachedUse: the slots a budget's cache shows taken are those held and
// not expired, of the first size; CachedKeys names every budget, group by
// group, that has a slot Lease, and nothing else.
func TestCachedUse(t *testing.T) {
	ns := testutil.Namespace(t, env.Client, "budget-cached-use")
	// The API server stands in for the informer cache: same reads.
	s := &Slots{Client: env.Client, Cache: env.Client, Namespace: ns}
	zoneA, zoneB, other := Key{Name: "fleet", Group: "zone=a"}, Key{Name: "fleet", Group: "zone=b"}, Key{Name: "pace"}
	t0 := time.Now()
	// Zone a's two nodes take slots 0 and 1 of a budget of 2.
	for _, take := range []struct {
		key  Key
		node string
	}{{zoneA, "a-0"}, {zoneA, "a-1"}, {zoneB, "b-0"}, {other, "c-0"}} {
		if _, ok, err := s.Acquire(t.Context(), take.key, 2, take.node, t0, nil); err != nil || !ok {
			t.Fatalf("%s in %v: %v %v", take.node, take.key, ok, err)
		}
	}
	// A Lease of the budget that is no slot of its (a larger budget's,
	// say) or that nobody holds takes up nothing.
	extra := s.newLease(zoneA, 5, "a-5", t0)
	unheld := s.newLease(zoneA, 2, "", t0)
	unheld.Spec.HolderIdentity = nil
	testutil.Create(t, env.Client, extra, unheld)

	expiredA0 := func(holder string, _ *coordinationv1.Lease) bool { return holder == "a-0" }
	for _, tc := range []struct {
		name    string
		key     Key
		size    int
		expired Stale
		want    int
	}{
		{"two slots of a group held", zoneA, 3, nil, 2},
		{"one of them expired", zoneA, 3, expiredA0, 1},
		{"a smaller budget counts its own slots only", zoneA, 1, nil, 1},
		{"another group", zoneB, 3, nil, 1},
		{"a budget without slots", Key{Name: "fleet", Group: "zone=c"}, 3, nil, 0},
	} {
		if got, err := s.CachedUsed(t.Context(), tc.key, tc.size, tc.expired); err != nil || got != tc.want {
			t.Errorf("%s: CachedUsed = %d, %v; want %d", tc.name, got, err, tc.want)
		}
	}
	keys, err := s.CachedKeys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(keys, func(a, b Key) int { return strings.Compare(a.Name+"/"+a.Group, b.Name+"/"+b.Group) })
	if want := []Key{zoneA, zoneB, other}; !slices.Equal(keys, want) {
		t.Errorf("CachedKeys = %v, want %v", keys, want)
	}
	if n, err := (&Slots{Client: env.Client, Namespace: ns}).CachedUsed(t.Context(), zoneA, 3, nil); n != 0 || err != nil {
		t.Errorf("without a cache CachedUsed = %d, %v; want 0", n, err)
	}
}
