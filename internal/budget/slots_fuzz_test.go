package budget

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/pitstop-dev/pitstop/internal/scheme"
)

// The rules of the model, as admission uses the slots (internal/admission:
// slotGrace, renewAfter): a slot is stale once the replica judging it has
// seen it unchanged for fuzzGrace on its own clock, and a holder confirms
// its slot (Renew) with fuzzFresh. A holder that confirms its slot at
// least every fuzzRenewEvery keeps renewing: fuzzFresh+fuzzRenewEvery <
// fuzzGrace, so its slot never looks unchanged for fuzzGrace.
const (
	fuzzGrace      = 15 * time.Second
	fuzzFresh      = fuzzGrace / 3
	fuzzRenewEvery = fuzzGrace - fuzzFresh - time.Second
	// fuzzMaxSkew bounds each replica's clock offset, more than the grace
	// (a skew past the grace is what freed slots in use when staleness was
	// judged by the times written in the Lease).
	fuzzMaxSkew = 20 * time.Second
	// fuzzMaxAdvance bounds how far the model's time moves in one run: the
	// slots lay their own writes over the cache for cacheLag of the wall
	// clock, which the model's time must not run far ahead of.
	fuzzMaxAdvance = 40 * time.Second
)

// snapshotCache is a replica's informer cache: the slot Leases as the API
// server had them when it last synced, which may be behind by any number
// of writes (of this replica or the others).
type snapshotCache struct {
	leases []coordinationv1.Lease
}

func (c *snapshotCache) sync(ctx context.Context, server client.Client) error {
	list := &coordinationv1.LeaseList{}
	if err := server.List(ctx, list); err != nil {
		return err
	}
	c.leases = list.Items
	return nil
}

func (c *snapshotCache) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	for i := range c.leases {
		if c.leases[i].Namespace == key.Namespace && c.leases[i].Name == key.Name {
			c.leases[i].DeepCopyInto(obj.(*coordinationv1.Lease))
			return nil
		}
	}
	return fmt.Errorf("lease %s not in the cache", key)
}

func (c *snapshotCache) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	o := (&client.ListOptions{}).ApplyOptions(opts)
	var items []coordinationv1.Lease
	for _, l := range c.leases {
		if o.Namespace != "" && l.Namespace != o.Namespace || o.LabelSelector != nil && !o.LabelSelector.Matches(labels.Set(l.Labels)) {
			continue
		}
		items = append(items, *l.DeepCopy())
	}
	return meta.SetList(list, toObjects(items))
}

func toObjects(items []coordinationv1.Lease) []runtime.Object {
	out := make([]runtime.Object, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}

// fuzzReplica is one manager replica: its own Slots (its sightings and
// writes), its clock's offset and, maybe, a cache.
type fuzzReplica struct {
	slots    *Slots
	cache    *snapshotCache
	skew     time.Duration
	syncedAt time.Duration // model time of the cache's last sync
}

// FuzzSlots drives a budget's slots through random interleavings of
// takes, confirmations, releases and sweeps, for three nodes, by three
// replicas whose clocks are offset by up to fuzzMaxSkew and whose caches
// lag by random numbers of writes, against one API server's store (the
// controller-runtime fake client: creates that fail on an existing name,
// updates and deletes that fail on a changed resourceVersion). A node
// holds a slot once Acquire and the confirmation that follows it (Renew,
// as admission confirms) both succeed, until it releases it or a Renew
// says it lost it. At no step do more nodes hold a slot than the budget's
// size, and the slot of a node that keeps confirming it (at least every
// fuzzRenewEvery) is never freed: neither deleted by a sweep nor taken
// over by another node.
//
// Each op is two bytes: the op and its argument (node, replica, or the
// seconds the model's time moves). The first byte is the budget's size
// and the caches; the next three the replicas' clock offsets.
func FuzzSlots(f *testing.F) {
	// take n0 via r1, tick, sweep via r2, renew, ...
	f.Add([]byte{0x02, 0x00, 0xff, 0x80, 0, 0x01, 4, 7, 3, 0x02, 1, 0x04, 0, 0x01, 4, 7, 3, 0x02, 2, 0x02})
	f.Add([]byte{0x01, 0x10, 0xf0, 0x80, 0, 0x00, 5, 0x01, 4, 7, 1, 0x00, 4, 7, 3, 0x01, 0, 0x11, 4, 7, 1, 0x00, 3, 0x00})
	f.Add([]byte{0x03, 0xff, 0x00, 0x7f, 0, 0x00, 0, 0x11, 0, 0x22, 2, 0x01, 4, 6, 5, 0x01, 3, 0x01, 1, 0x00, 4, 6, 3, 0x02, 0, 0x12})
	f.Add([]byte{0x00, 0x00, 0x00, 0x00, 0, 0x00, 4, 7, 4, 7, 4, 7, 3, 0x00, 0, 0x01})
	f.Fuzz(func(t *testing.T, program []byte) {
		if len(program) < 4 || len(program) > 4+2*200 {
			return
		}
		ctx := context.Background()
		key := Key{Name: "fuzz", Group: "zone-a"}
		size := 1 + int(program[0]%2)
		server := fake.NewClientBuilder().WithScheme(scheme.New()).Build()
		base := time.Now()
		var replicas []*fuzzReplica
		for i := range 3 {
			r := &fuzzReplica{slots: &Slots{Client: server, Namespace: "pitstop-system"}}
			r.skew = time.Duration(int(int8(program[1+i]))) * fuzzMaxSkew / 128
			if program[0]>>(1+i)&1 == 1 {
				r.cache = &snapshotCache{}
				r.slots.Cache = r.cache
			}
			replicas = append(replicas, r)
		}
		nodes := []string{"n0", "n1", "n2"}
		var at time.Duration // the model's time since base
		nowOf := func(r *fuzzReplica) time.Time { return base.Add(at + r.skew) }
		stale := func(r *fuzzReplica) Stale {
			now := nowOf(r)
			return func(_ string, l *coordinationv1.Lease) bool { return r.slots.Unchanged(l, now) >= fuzzGrace }
		}
		// holding: the nodes that hold a slot by what the slots told them,
		// and when they last confirmed it (model time).
		holding := map[string]time.Duration{}
		var trace []string
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("%s\nafter:\n%s", fmt.Sprintf(format, args...), strings.Join(trace, "\n"))
		}
		heldOnServer := func() map[string]int {
			list := &coordinationv1.LeaseList{}
			if err := server.List(ctx, list); err != nil {
				t.Fatal(err)
			}
			held := map[string]int{}
			for i := range list.Items {
				if h := HolderOf(&list.Items[i]); h != "" && isSlot(key, size, list.Items[i].Name) {
					held[h]++
				}
			}
			return held
		}
		for pc := 4; pc+1 < len(program); pc += 2 {
			op, arg := program[pc]%6, program[pc+1]
			n, r := nodes[int(arg)%len(nodes)], replicas[int(arg>>4)%len(replicas)]
			ri := int(arg>>4) % len(replicas)
			switch op {
			case 0: // take: Acquire, then confirm as admission does
				if _, ok := holding[n]; ok {
					continue
				}
				_, ok, err := r.slots.Acquire(ctx, key, size, n, nowOf(r), stale(r))
				if err != nil {
					fail("Acquire(%s) via r%d: %v", n, ri, err)
				}
				confirmed := false
				if ok {
					if confirmed, err = r.slots.Renew(ctx, key, n, nowOf(r), fuzzFresh); err != nil {
						fail("Renew(%s) via r%d: %v", n, ri, err)
					}
					if !confirmed {
						if err := r.slots.Release(ctx, key, n); err != nil {
							fail("Release(%s) via r%d: %v", n, ri, err)
						}
					}
				}
				trace = append(trace, fmt.Sprintf("t=%v take %s via r%d: acquired %t, confirmed %t", at, n, ri, ok, confirmed))
				if confirmed {
					if heldOnServer()[n] == 0 {
						fail("%s was given and confirmed a slot the API server shows it not holding", n)
					}
					holding[n] = at
				}
			case 1: // confirm
				last, ok := holding[n]
				if !ok {
					continue
				}
				still, err := r.slots.Renew(ctx, key, n, nowOf(r), fuzzFresh)
				if err != nil {
					fail("Renew(%s) via r%d: %v", n, ri, err)
				}
				trace = append(trace, fmt.Sprintf("t=%v renew %s via r%d (last %v): %t", at, n, ri, last, still))
				switch {
				case still && heldOnServer()[n] == 0:
					fail("Renew confirmed %s's slot, which the API server shows it not holding", n)
				case still:
					holding[n] = at
				default:
					delete(holding, n)
				}
			case 2: // release
				if err := r.slots.Release(ctx, key, n); err != nil {
					fail("Release(%s) via r%d: %v", n, ri, err)
				}
				trace = append(trace, fmt.Sprintf("t=%v release %s via r%d", at, n, ri))
				delete(holding, n)
			case 3: // sweep
				s := stale(r)
				if err := r.slots.Sweep(ctx, func(_ Key, holder string, l *coordinationv1.Lease) bool { return s(holder, l) }); err != nil {
					fail("Sweep via r%d: %v", ri, err)
				}
				trace = append(trace, fmt.Sprintf("t=%v sweep via r%d", at, ri))
			case 4: // time moves
				d := time.Duration(arg%8) * time.Second
				if at+d > fuzzMaxAdvance {
					return
				}
				at += d
				trace = append(trace, fmt.Sprintf("t=%v", at))
			case 5: // a cache catches up
				if r.cache == nil {
					continue
				}
				if err := r.cache.sync(ctx, server); err != nil {
					t.Fatal(err)
				}
				r.syncedAt = at
				trace = append(trace, fmt.Sprintf("t=%v r%d's cache syncs", at, ri))
			}
			// A cache lags by less than cacheLag: an informer that has not
			// caught up by then is not one the slots are built for.
			for i, rr := range replicas {
				if rr.cache != nil && at-rr.syncedAt >= cacheLag/2 {
					if err := rr.cache.sync(ctx, server); err != nil {
						t.Fatal(err)
					}
					rr.syncedAt = at
					trace = append(trace, fmt.Sprintf("t=%v r%d's cache syncs", at, i))
				}
			}

			held := heldOnServer()
			renewing := 0
			for node, last := range holding {
				if at-last > fuzzRenewEvery {
					continue // it stopped confirming: its slot may go
				}
				renewing++
				if held[node] == 0 {
					fail("%s, which confirmed its slot at t=%v, no longer holds one at t=%v: a slot in use was freed", node, last, at)
				}
			}
			if renewing > size {
				fail("%d nodes hold a slot of a budget of %d", renewing, size)
			}
			total := 0
			for _, c := range held {
				total += c
			}
			if total > size {
				fail("the API server shows %d slots of a budget of %d held", total, size)
			}
		}
	})
}
