// Package ctrlqueue is the work queue of pitstop's controllers:
// controller-runtime's priority queue, whose workers always stop when the
// controller does.
//
// The priority queue of controller-runtime v0.24 can deadlock when it is
// shut down while it hands an item to a worker (it sends on an unbuffered
// channel while holding its lock, and the worker has already left on the
// shutdown): every worker waiting for an item then waits forever, the
// controller never finishes stopping (a worker marking its item done waits
// for the same lock), and pitstop exits only when the
// manager's graceful shutdown timeout runs out, with an error and its
// leader Lease still held. The queue here returns "shut down" to a worker
// as soon as the controller shuts the queue down, whatever the queue
// inside does.
package ctrlqueue

import (
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// New returns a controller's NewQueue (controller.Options): the priority
// queue controller-runtime would make, logging through log, with workers
// that stop when it is shut down.
func New[T comparable](log logr.Logger) func(string, workqueue.TypedRateLimiter[T]) workqueue.TypedRateLimitingInterface[T] {
	return func(name string, rateLimiter workqueue.TypedRateLimiter[T]) workqueue.TypedRateLimitingInterface[T] {
		return Wrap(priorityqueue.New(name, func(o *priorityqueue.Opts[T]) {
			o.Log = log.WithValues("controller", name)
			o.RateLimiter = rateLimiter
		}))
	}
}

// Wrap returns q with workers that stop when it is shut down.
func Wrap[T comparable](q priorityqueue.PriorityQueue[T]) priorityqueue.PriorityQueue[T] {
	return &queue[T]{PriorityQueue: q, done: make(chan struct{})}
}

type queue[T comparable] struct {
	priorityqueue.PriorityQueue[T]
	once sync.Once
	done chan struct{}
}

// ShutDown shuts the queue down and lets every waiting worker go.
func (q *queue[T]) ShutDown() {
	q.once.Do(func() { close(q.done) })
	q.PriorityQueue.ShutDown()
}

// ShutDownWithDrain is ShutDown: the workers stop at once either way.
func (q *queue[T]) ShutDownWithDrain() { q.ShutDown() }

// Done marks the item processed, or gives up once the queue is shut down
// (the queue inside may be stuck holding its lock).
func (q *queue[T]) Done(item T) {
	finished := make(chan struct{})
	go func() {
		q.PriorityQueue.Done(item)
		close(finished)
	}()
	select {
	case <-finished:
	case <-q.done:
	}
}

// Get is GetWithPriority without the priority.
func (q *queue[T]) Get() (T, bool) {
	item, _, shutdown := q.GetWithPriority()
	return item, shutdown
}

// GetWithPriority waits for the next item, or for the queue to be shut
// down. An item the queue inside hands over after that is dropped: the
// controller is stopping.
func (q *queue[T]) GetWithPriority() (T, int, bool) {
	var zero T
	select {
	case <-q.done:
		return zero, 0, true
	default:
	}
	type result struct {
		item     T
		priority int
		shutdown bool
	}
	got := make(chan result, 1)
	go func() {
		item, priority, shutdown := q.PriorityQueue.GetWithPriority()
		got <- result{item, priority, shutdown}
	}()
	select {
	case r := <-got:
		return r.item, r.priority, r.shutdown
	case <-q.done:
		return zero, 0, true
	}
}

// ControllerOptions are the options every controller of pitstop is built
// with: workers reconciles at once (at least one), this package's queue,
// and no check that the controller's name is unique in the process (a
// process runs one manager, except tests that restart it).
func ControllerOptions(log logr.Logger, workers int) controller.Options {
	return controller.Options{
		MaxConcurrentReconciles: max(1, workers),
		SkipNameValidation:      ptr.To(true),
		NewQueue:                New[reconcile.Request](log),
	}
}
