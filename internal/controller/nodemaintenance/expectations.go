package nodemaintenance

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pitstop-dev/pitstop/internal/drain"
)

// expectationTTL is how long an accepted eviction is trusted before the
// pod, shown by the cache in a newer version that is still not
// terminating, is evicted again; and how often a pod already terminating
// is deleted again once a drain's timeout force-deletes.
const expectationTTL = 10 * time.Second

// expectations remembers, per NodeMaintenance, the pods whose eviction or
// deletion the API server accepted, until the cache shows them terminating
// or gone. It only saves requests: losing it (a restart) costs one
// repeated eviction per pod.
//
// An accepted eviction is never asked again while the cache still shows
// the pod as it was when it was evicted: the cache has not caught up yet.
// On a fleet draining a hundred nodes at once the cache can lag the API
// server by more than expectationTTL, and asking again then would only add
// requests to an API server that is already behind.
type expectations struct {
	mu   sync.Mutex
	pods map[string]map[types.UID]expectation
	// refusals counts a drain's consecutive rounds with refused evictions,
	// for the retry backoff.
	refusals map[string]int
}

// expectation is one accepted eviction or deletion: when, and the version
// of the pod it was asked for.
type expectation struct {
	at      time.Time
	version string
}

func newExpectations() *expectations {
	return &expectations{pods: map[string]map[types.UID]expectation{}, refusals: map[string]int{}}
}

// backoff returns how long to wait before retrying refused evictions:
// interval after the first refused round, doubling with each further one up
// to 16 times interval, and 0 (with the count reset) when none was refused.
func (e *expectations) backoff(nm string, refused bool, interval time.Duration) time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !refused {
		delete(e.refusals, nm)
		return 0
	}
	n := min(e.refusals[nm], 4)
	e.refusals[nm]++
	return interval << n
}

// filter drops the pods asked for less than expectationTTL ago, and those
// not terminating that the cache still shows in the version they were
// asked for. It forgets the pods asked for that are no longer in pods
// (terminating, or gone) once expectationTTL has passed.
func (e *expectations) filter(nm string, pods []*corev1.Pod, now time.Time) []*corev1.Pod {
	e.mu.Lock()
	defer e.mu.Unlock()
	seen := e.pods[nm]
	out := make([]*corev1.Pod, 0, len(pods))
	listed := make(map[types.UID]bool, len(pods))
	for _, p := range pods {
		listed[p.UID] = true
		if x, ok := seen[p.UID]; ok && (now.Sub(x.at) < expectationTTL || unchanged(p, x)) {
			continue
		}
		out = append(out, p)
	}
	for uid, x := range seen {
		if !listed[uid] && now.Sub(x.at) >= expectationTTL {
			delete(seen, uid)
		}
	}
	return out
}

// unchanged says the cache still shows the pod as it was when it was asked
// for, not terminating: the API server's answer is not in the cache yet.
func unchanged(p *corev1.Pod, x expectation) bool {
	return p.DeletionTimestamp == nil && x.version != "" && p.ResourceVersion == x.version
}

// record remembers accepted evictions and deletions.
func (e *expectations) record(nm string, r drain.Result, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	seen := e.pods[nm]
	if seen == nil {
		seen = map[types.UID]expectation{}
		e.pods[nm] = seen
	}
	for _, p := range r.Pods {
		if p.Outcome == drain.Evicted || p.Outcome == drain.Deleted {
			seen[p.Pod.UID] = expectation{at: now, version: p.Pod.ResourceVersion}
		}
	}
}

// forget drops what is remembered for a NodeMaintenance.
func (e *expectations) forget(nm string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.pods, nm)
	delete(e.refusals, nm)
}

// Progress-only status writes are paced per NodeMaintenance, and the pace
// slows as more drains run at once: together they are kept to about
// progressWritesPerSecond, one drain at most every progressWriteInterval and
// at least every progressWriteIntervalMax. A drain of a few seconds still
// shows every second of it; a fleet draining a hundred nodes at once does
// not spend the API server on a hundred progress writes a second while its
// pods are being evicted and rescheduled. Changes of a condition's status or
// reason, of the phase and of the counts are never held back.
const (
	progressWriteInterval    = time.Second
	progressWriteIntervalMax = 15 * time.Second
	progressWritesPerSecond  = 10
)

// writePacer remembers when each NodeMaintenance's status was last written.
type writePacer struct {
	mu   sync.Mutex
	last map[string]time.Time
}

func newWritePacer() *writePacer { return &writePacer{last: map[string]time.Time{}} }

// wait returns how long until a progress-only write is due, 0 if now.
func (p *writePacer) wait(nm string, now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	last, ok := p.last[nm]
	if !ok {
		return 0
	}
	return max(0, last.Add(p.interval(now)).Sub(now))
}

// interval is the least time between two progress-only writes of one
// NodeMaintenance while the others written within the longest interval
// are writing too.
func (p *writePacer) interval(now time.Time) time.Duration {
	active := 0
	for _, at := range p.last {
		if now.Sub(at) < progressWriteIntervalMax {
			active++
		}
	}
	d := time.Duration(active) * time.Second / progressWritesPerSecond
	return min(max(d, progressWriteInterval), progressWriteIntervalMax)
}

func (p *writePacer) record(nm string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last[nm] = now
}

func (p *writePacer) forget(nm string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.last, nm)
}
