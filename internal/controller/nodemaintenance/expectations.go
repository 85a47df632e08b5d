package nodemaintenance

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
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
	// setbacks holds each pod's last refused or failed answer until another
	// answer replaces it or the pod leaves: its blocker in status, and when
	// it is asked again.
	setbacks map[string]map[types.UID]setback
}

// setback is a refused or failed answer for one pod.
type setback struct {
	result drain.PodResult
	// retryAt is when the pod is asked again; a refused pod is asked
	// sooner when the PodDisruptionBudget that covered it changes, its
	// resourceVersion then being budget.
	retryAt time.Time
	budget  string
}

// expectation is one accepted eviction or deletion: when, and the version
// of the pod it was asked for.
type expectation struct {
	at      time.Time
	version string
}

func newExpectations() *expectations {
	return &expectations{pods: map[string]map[types.UID]expectation{}, refusals: map[string]int{}, setbacks: map[string]map[types.UID]setback{}}
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

// answered remembers a drain's answers: accepted evictions and deletions
// as expectations; refusals, to be asked again after refusedRetry or when
// their budget (in budgets, from the cache) changes; failures, after
// failedRetry. Any other answer clears the pod's setback.
func (e *expectations) answered(nm string, r drain.Result, budgets map[*corev1.Pod]*policyv1.PodDisruptionBudget, now time.Time, refusedRetry, failedRetry time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	seen := e.pods[nm]
	if seen == nil {
		seen = map[types.UID]expectation{}
		e.pods[nm] = seen
	}
	back := e.setbacks[nm]
	if back == nil {
		back = map[types.UID]setback{}
		e.setbacks[nm] = back
	}
	for _, p := range r.Pods {
		delete(back, p.Pod.UID)
		switch p.Outcome {
		case drain.Evicted, drain.Deleted:
			seen[p.Pod.UID] = expectation{at: now, version: p.Pod.ResourceVersion}
		case drain.Refused:
			sb := setback{result: p, retryAt: now.Add(refusedRetry)}
			if pdb := budgets[p.Pod]; pdb != nil {
				sb.budget = pdb.ResourceVersion
			}
			back[p.Pod.UID] = sb
		case drain.Failed:
			back[p.Pod.UID] = setback{result: p, retryAt: now.Add(failedRetry)}
		}
	}
}

// waiting says pod, covered by pdb (nil: none), is not to be asked again
// yet: it was refused and neither its retry time has come nor its budget
// changed since, or its request failed and its retry time has not come.
func (e *expectations) waiting(nm string, pod *corev1.Pod, pdb *policyv1.PodDisruptionBudget, now time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	sb, ok := e.setbacks[nm][pod.UID]
	if !ok || !now.Before(sb.retryAt) {
		return false
	}
	if sb.result.Outcome == drain.Refused && pdb != nil && pdb.ResourceVersion != sb.budget {
		return false
	}
	return true
}

// standing returns the setbacks of the pods still pending, and when the
// first of them is due to be asked again (zero: none); it forgets those of
// pods no longer pending.
func (e *expectations) standing(nm string, pending []*corev1.Pod) (drain.Result, time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	back := e.setbacks[nm]
	listed := make(map[types.UID]bool, len(pending))
	var out drain.Result
	var next time.Time
	for _, p := range pending {
		listed[p.UID] = true
		sb, ok := back[p.UID]
		if !ok {
			continue
		}
		out.Pods = append(out.Pods, sb.result)
		if next.IsZero() || sb.retryAt.Before(next) {
			next = sb.retryAt
		}
	}
	for uid := range back {
		if !listed[uid] {
			delete(back, uid)
		}
	}
	return out, next
}

// record remembers accepted evictions and deletions.
func (e *expectations) record(nm string, r drain.Result, now time.Time) {
	e.answered(nm, r, nil, now, 0, 0)
}

// forget drops what is remembered for a NodeMaintenance.
func (e *expectations) forget(nm string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.pods, nm)
	delete(e.refusals, nm)
	delete(e.setbacks, nm)
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
