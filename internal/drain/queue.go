package drain

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Queue sends the evictions and deletions of every drain in the manager
// apart from the reconcile workers. A drain's reconcile hands the queue its
// pods and returns at once; the queue sends them through its Executor (so
// within the Executor's bound for one drain and its Limiter's for all),
// keeps the answers until the drain's next reconcile takes them, and calls
// Wake when answers are waiting. A restore or the start of another
// maintenance never waits for a worker held by a drain's requests.
//
// Each owner (a drain: a NodeMaintenance's name) has one batch in flight at
// a time; pods handed over meanwhile go in the next, and a pod already
// handed over and not yet answered is not sent twice. Forget ends an
// owner: its requests not yet sent are not sent, and answers still to come
// are dropped.
type Queue struct {
	executor *Executor
	wake     func(owner string)
	ctx      context.Context

	mu     sync.Mutex
	owners map[string]*owner
}

// owner is one drain's requests and answers.
type owner struct {
	// ctx ends when the owner is forgotten.
	ctx    context.Context
	cancel context.CancelFunc
	// asked holds the pods handed over and not yet answered; pending the
	// ones of them not yet in a batch.
	asked   map[types.UID]bool
	pending []request
	running bool
	answers []PodResult
}

// request is one pod to evict or delete.
type request struct {
	pod    *corev1.Pod
	delete bool
	grace  *int64
}

// NewQueue returns a Queue that sends through e until ctx ends (the
// manager's stop: requests not yet sent then fail with ctx's error, a
// request on its way is let finish, as Executor says) and calls wake, from
// its own goroutine, each time an owner's batch has been answered.
func NewQueue(ctx context.Context, e *Executor, wake func(owner string)) *Queue {
	return &Queue{executor: e, wake: wake, ctx: ctx, owners: map[string]*owner{}}
}

// Evict hands pods to the queue to be evicted on owner's behalf, with
// gracePeriod overriding their own when set; it returns how many were
// handed over, leaving out those already asked for and not yet answered.
func (q *Queue) Evict(ownerName string, pods []*corev1.Pod, gracePeriod *int64) int {
	return q.add(ownerName, pods, false, gracePeriod)
}

// Delete hands pods to the queue to be deleted directly, as Executor.Delete
// does; it returns how many were handed over.
func (q *Queue) Delete(ownerName string, pods []*corev1.Pod, gracePeriod *int64) int {
	return q.add(ownerName, pods, true, gracePeriod)
}

func (q *Queue) add(ownerName string, pods []*corev1.Pod, del bool, grace *int64) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	o := q.owners[ownerName]
	if o == nil {
		ctx, cancel := context.WithCancel(q.ctx)
		o = &owner{ctx: ctx, cancel: cancel, asked: map[types.UID]bool{}}
		q.owners[ownerName] = o
	}
	added := 0
	for _, p := range pods {
		if o.asked[p.UID] {
			continue
		}
		o.asked[p.UID] = true
		o.pending = append(o.pending, request{pod: p, delete: del, grace: grace})
		added++
	}
	if added > 0 && !o.running {
		o.running = true
		go q.run(ownerName, o)
	}
	return added
}

// run sends the owner's pending requests, a batch at a time, until none is
// left.
func (q *Queue) run(ownerName string, o *owner) {
	for {
		q.mu.Lock()
		batch := o.pending
		o.pending = nil
		if len(batch) == 0 {
			o.running = false
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()

		byPod := make(map[types.UID]request, len(batch))
		pods := make([]*corev1.Pod, len(batch))
		for i, req := range batch {
			byPod[req.pod.UID] = req
			pods[i] = req.pod
		}
		res := q.executor.each(o.ctx, pods, func(ctx context.Context, pod *corev1.Pod) PodResult {
			req := byPod[pod.UID]
			if req.delete {
				return q.executor.deleteOne(ctx, pod, req.grace)
			}
			return q.executor.evictOne(ctx, pod, req.grace)
		})

		q.mu.Lock()
		current := q.owners[ownerName] == o
		if current {
			for _, p := range res.Pods {
				delete(o.asked, p.Pod.UID)
			}
			o.answers = append(o.answers, res.Pods...)
		}
		q.mu.Unlock()
		if current {
			q.wake(ownerName)
		}
	}
}

// Take returns the answers that came for owner since its last Take, and
// how many of its pods are handed over and not yet answered.
func (q *Queue) Take(ownerName string) (Result, int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	o := q.owners[ownerName]
	if o == nil {
		return Result{}, 0
	}
	answers := o.answers
	o.answers = nil
	return Result{Pods: answers}, len(o.asked)
}

// Forget ends owner: its requests not yet sent are not sent, and the
// answers to those on their way are dropped.
func (q *Queue) Forget(ownerName string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if o := q.owners[ownerName]; o != nil {
		o.cancel()
		o.pending = nil
		delete(q.owners, ownerName)
	}
}

// Unanswered says how many pods, over every owner, are handed over and not
// yet answered: those waiting for the Limiter or their owner's batch, and
// those whose request is on its way.
func (q *Queue) Unanswered() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, o := range q.owners {
		n += len(o.asked)
	}
	return n
}
