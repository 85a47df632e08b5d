package budget

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pitstop-dev/pitstop/internal/scheme"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

var env *testutil.Env

func TestMain(m *testing.M) { testutil.Main(m, &env) }

// TestBudgetHoldsUnderContention: 50 nodes want maintenance at once with a
// budget of 3, through two "replicas" (two clients of their own), each node
// holding its slot a little while and then releasing it. The number of
// nodes holding a slot at the same instant never exceeds 3, and every node
// gets its turn.
func TestBudgetHoldsUnderContention(t *testing.T) {
	ns := testutil.Namespace(t, env.Client, "budget-contention")
	replicas := make([]*Slots, 2)
	for i := range replicas {
		c, err := client.New(env.Config, client.Options{Scheme: scheme.New()})
		if err != nil {
			t.Fatal(err)
		}
		replicas[i] = &Slots{Client: c, Namespace: ns}
	}
	key := Key{Name: "os-update", Group: "zone-a"}
	const budget = 3
	var holding, maxHolding atomic.Int32
	var wg sync.WaitGroup
	served := make([]bool, 50)
	for n := range 50 {
		wg.Go(func() {
			node := fmt.Sprintf("node-%02d", n)
			slots := replicas[n%2]
			for {
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
			served[n] = true
			time.Sleep(time.Duration(5+rand.IntN(10)) * time.Millisecond)
			holding.Add(-1)
			if err := slots.Release(t.Context(), key, node); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := maxHolding.Load(); got > budget {
		t.Fatalf("%d nodes held a slot at once, budget %d", got, budget)
	}
	for n, ok := range served {
		if !ok {
			t.Errorf("node-%02d never got a slot", n)
		}
	}
	t.Logf("at most %d nodes held a slot at once (budget %d)", maxHolding.Load(), budget)
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

// TestLooksFull: a budget looks full to a node when every slot is held by
// another and none has expired, never to a holder, and not at all without
// a cache.
func TestLooksFull(t *testing.T) {
	ns := testutil.Namespace(t, env.Client, "budget-looks-full")
	// The API server stands in for the informer cache: same reads.
	s := &Slots{Client: env.Client, Cache: env.Client, Namespace: ns}
	key := Key{Name: "fleet"}
	t0 := time.Now()
	if s.LooksFull(t.Context(), key, 2, "c", nil) {
		t.Fatal("an empty budget looks full")
	}
	for _, n := range []string{"a", "b"} {
		if _, ok, err := s.Acquire(t.Context(), key, 2, n, t0, nil); err != nil || !ok {
			t.Fatalf("%s: %v %v", n, ok, err)
		}
	}
	if !s.LooksFull(t.Context(), key, 2, "c", nil) {
		t.Error("both slots held: the budget must look full to c")
	}
	if s.LooksFull(t.Context(), key, 2, "a", nil) {
		t.Error("the budget looks full to a, which holds a slot")
	}
	if s.LooksFull(t.Context(), key, 3, "c", nil) {
		t.Error("two of three slots held: the budget looks full")
	}
	expiredA := func(holder string, _ *coordinationv1.Lease) bool { return holder == "a" }
	if s.LooksFull(t.Context(), key, 2, "c", expiredA) {
		t.Error("a's slot has expired: the budget must not look full")
	}
	if (&Slots{Client: env.Client, Namespace: ns}).LooksFull(t.Context(), key, 2, "c", nil) {
		t.Error("without a cache the budget looked full")
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
