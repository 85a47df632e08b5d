package machineset_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pitstop-dev/pitstop/internal/machineapi"
	"github.com/pitstop-dev/pitstop/internal/machineapi/machineset"
	"github.com/pitstop-dev/pitstop/internal/scheme"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// machineCounter watches the Machines of a namespace from the API server
// and, at every event, counts those a MachineSet controls that are not
// being deleted: the number the set must never get wrong.
type machineCounter struct {
	mu    sync.Mutex
	owner types.UID
	alive map[types.UID]bool
	seen  map[types.UID]bool
	// atMost, atLeast and creationsAtMost are the bounds of the current
	// phase (see bound); violations are the first events that broke them.
	atMost, atLeast int
	creationsAtMost int
	violations      []string
	// created counts the set's machines the watch has seen appear.
	created int
}

// follow makes the counter count the Machines of the set with uid.
func (c *machineCounter) follow(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.owner = uid
}

func watchMachines(t *testing.T, ns string) *machineCounter {
	t.Helper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := wc.Watch(ctx, &machinev1beta1.MachineList{}, client.InNamespace(ns))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	c := &machineCounter{alive: map[types.UID]bool{}, seen: map[types.UID]bool{}, atMost: -1, creationsAtMost: -1}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range w.ResultChan() {
			if m, ok := e.Object.(*machinev1beta1.Machine); ok {
				c.observe(e.Type, m)
			}
		}
	}()
	t.Cleanup(func() { w.Stop(); cancel(); <-done })
	return c
}

func (c *machineCounter) observe(typ watch.EventType, m *machinev1beta1.Machine) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ref := metav1.GetControllerOf(m)
	owned := ref != nil && ref.UID == c.owner
	isNew := !c.seen[m.UID]
	c.seen[m.UID] = true
	if owned && isNew {
		c.created++
	}
	c.alive[m.UID] = owned && typ != watch.Deleted && m.DeletionTimestamp.IsZero()
	n := c.count()
	if len(c.violations) >= 5 {
		return // the first few tell the story
	}
	if c.atMost >= 0 && n > c.atMost {
		c.violations = append(c.violations, fmt.Sprintf("%d machines after %s %s, more than %d", n, typ, m.Name, c.atMost))
	}
	if n < c.atLeast {
		c.violations = append(c.violations, fmt.Sprintf("%d machines after %s %s, fewer than %d", n, typ, m.Name, c.atLeast))
	}
	if owned && isNew && c.creationsAtMost >= 0 && n > c.creationsAtMost {
		c.violations = append(c.violations, fmt.Sprintf("%d machines after creating %s, more than %d", n, m.Name, c.creationsAtMost))
	}
}

func (c *machineCounter) count() int {
	n := 0
	for _, alive := range c.alive {
		if alive {
			n++
		}
	}
	return n
}

// bound sets the bounds the count must stay within from now on: at most
// atMost live machines, at least atLeast, and no creation that leaves more
// than creationsAtMost (-1: no bound).
func (c *machineCounter) bound(atMost, atLeast, creationsAtMost int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.atMost, c.atLeast, c.creationsAtMost = atMost, atLeast, creationsAtMost
}

// state returns the live count, the number of machines created so far and
// the violations.
func (c *machineCounter) state() (live, created int, violations []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.count(), c.created, append([]string(nil), c.violations...)
}

// awaitCount waits until the watch has seen exactly n live machines.
func (c *machineCounter) awaitCount(t *testing.T, n int) {
	t.Helper()
	testutil.Eventually(t, timeout, interval, func() error {
		if live, _, _ := c.state(); live != n {
			return fmt.Errorf("the watch sees %d live machines, want %d", live, n)
		}
		return nil
	})
}

// TestNeverMoreOrFewerMachinesThanReplicas scales faster than the cache
// follows: the controller's watches deliver events 300ms late, so each
// creation or deletion wakes the set while its cache still lags behind its
// own writes. Counting from that cache would create or delete machines
// twice.
func TestNeverMoreOrFewerMachinesThanReplicas(t *testing.T) {
	ns := newNamespace(t, "ms-stress")
	startControllerWith(t, ns, withLaggingCache(env.Config, 300*time.Millisecond))
	ms := newSet(ns, "workers", 0)
	counter := watchMachines(t, ns)
	create(t, ms)
	awaitStatus(t, ms, counts(0, 0, 0, 0))
	counter.follow(ms.UID)

	// 0 → 20: never more than 20, and exactly 20 created.
	counter.bound(20, 0, 20)
	scale(t, ms, 20)
	awaitSettled(t, ms, 20)
	counter.awaitCount(t, 20)
	if _, created, violations := counter.state(); created != 20 || len(violations) > 0 {
		t.Fatalf("scaling to 20 created %d machines; violations: %v", created, violations)
	}

	// 20 → 5, and → 15 as soon as the first deletion shows: deletions are
	// still in flight when the set is asked for more. It may finish
	// scaling down, but never below 5, and must never create a machine
	// that makes more than 15.
	counter.bound(20, 5, 15)
	scale(t, ms, 5)
	testutil.Eventually(t, timeout, interval/10, func() error {
		if live, _, _ := counter.state(); live == 20 {
			return fmt.Errorf("no deletion yet")
		}
		return nil
	})
	scale(t, ms, 15)
	awaitSettled(t, ms, 15)
	counter.awaitCount(t, 15)
	live, created, violations := counter.state()
	if len(violations) > 0 {
		t.Errorf("violations: %v", violations)
	}
	if live != 15 || len(machinesOf(t, ms)) != 15 {
		t.Errorf("the watch sees %d machines, the API server has %d; want 15", live, len(machinesOf(t, ms)))
	}
	t.Logf("created %d machines in all", created)
}

// TestRemovesTheMachineMarkedJustBeforeAScaleDown: whoever shrinks a set
// to remove one Machine marks it, then lowers spec.replicas. The marks
// reach the controller's cache two seconds late here, after the new size:
// the set must still remove the marked Machine, and only it. The Machine
// marked is the one the Random policy would remove last, so a pick made
// from the cache removes another.
func TestRemovesTheMachineMarkedJustBeforeAScaleDown(t *testing.T) {
	ns := newNamespace(t, "ms-late-mark")
	startControllerWith(t, ns, withLaggingWatchOf(env.Config, "machines", 2*time.Second))
	ms := newSet(ns, "workers", 4)
	create(t, ms)
	machines := awaitSettled(t, ms, 4)
	var all []*machinev1beta1.Machine
	for i := range machines {
		all = append(all, &machines[i])
	}
	order := machineset.MachinesToDelete(all, len(all), "")
	marked := order[len(order)-1]

	patch(t, marked, false, func(m *machinev1beta1.Machine) { m.Annotations[machineapi.AnnotationDeleteMachine] = "yes" })
	scale(t, ms, 3)

	left := names(awaitSettled(t, ms, 3))
	if slices.Contains(left, marked.Name) {
		t.Errorf("after scaling to 3, %v are left: the marked machine %s stayed and another went", left, marked.Name)
	}
}

// laggingWatches makes every watch of the API server it carries deliver
// its events latency late: a manager using it has a cache that lags behind
// its own writes, as a busy API server or a slow network makes it.
type laggingWatches struct {
	next    http.RoundTripper
	latency time.Duration
	// resource, when set, is the only resource (plural) whose watches lag.
	resource string
}

// withLaggingCache returns a copy of cfg whose watches lag by latency.
func withLaggingCache(cfg *rest.Config, latency time.Duration) *rest.Config {
	return withLaggingWatchOf(cfg, "", latency)
}

// withLaggingWatchOf returns a copy of cfg whose watches of resource (all
// of them if "") lag by latency: the cache sees that resource's changes
// after changes made later to others.
func withLaggingWatchOf(cfg *rest.Config, resource string, latency time.Duration) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return &laggingWatches{next: next, latency: latency, resource: resource}
	})
	return cfg
}

func (l *laggingWatches) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(req)
	if err != nil || req.URL.Query().Get("watch") != "true" || l.resource != "" && !strings.HasSuffix(req.URL.Path, "/"+l.resource) {
		return resp, err
	}
	resp.Body = newLaggingBody(resp.Body, l.latency)
	return resp, nil
}

// laggingBody hands out what it reads from src latency after it arrived.
type laggingBody struct {
	src     io.ReadCloser
	chunks  chan chunk
	closed  chan struct{}
	close   sync.Once
	pending chunk
}

type chunk struct {
	data []byte
	err  error
	due  time.Time
}

func newLaggingBody(src io.ReadCloser, latency time.Duration) *laggingBody {
	b := &laggingBody{src: src, chunks: make(chan chunk, 1024), closed: make(chan struct{})}
	go func() {
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			select {
			case b.chunks <- chunk{data: buf[:n], err: err, due: time.Now().Add(latency)}:
			case <-b.closed:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return b
}

func (b *laggingBody) Read(p []byte) (int, error) {
	if len(b.pending.data) == 0 && b.pending.err == nil {
		select {
		case b.pending = <-b.chunks:
		case <-b.closed:
			return 0, io.ErrClosedPipe
		}
		// The injected latency: this is the network being slow, not a
		// wait for a condition.
		select {
		case <-time.After(time.Until(b.pending.due)):
		case <-b.closed:
			return 0, io.ErrClosedPipe
		}
	}
	n := copy(p, b.pending.data)
	b.pending.data = b.pending.data[n:]
	if len(b.pending.data) == 0 && b.pending.err != nil {
		err := b.pending.err
		return n, err
	}
	return n, nil
}

func (b *laggingBody) Close() error {
	b.close.Do(func() { close(b.closed) })
	return b.src.Close()
}
