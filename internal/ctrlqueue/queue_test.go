package ctrlqueue

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/util/workqueue"
)

// TestWorkersStopWhenTheQueueIsShutDownWhileItHandsOutItems: a controller's
// workers take items while items keep coming, and the queue is shut down
// in the middle; every worker stops within a second, in every round. (The
// priority queue of controller-runtime v0.24 alone deadlocks here within a
// few rounds.)
func TestWorkersStopWhenTheQueueIsShutDownWhileItHandsOutItems(t *testing.T) {
	const rounds, workers, items = 300, 10, 200
	newQueue := New[string](logr.Discard())
	for round := range rounds {
		q := newQueue(fmt.Sprintf("round-%d", round), workqueue.DefaultTypedControllerRateLimiter[string]())
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for {
					item, _, shutdown := q.(interface {
						GetWithPriority() (string, int, bool)
					}).GetWithPriority()
					if shutdown {
						return
					}
					q.Done(item)
				}
			})
		}
		go func() {
			for i := range items {
				q.Add(fmt.Sprintf("item-%d", i))
			}
		}()
		time.Sleep(time.Duration(round%5) * 100 * time.Microsecond)
		q.ShutDown()
		stopped := make(chan struct{})
		go func() { wg.Wait(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(time.Second):
			t.Fatalf("round %d: workers still waiting for an item a second after the queue was shut down", round)
		}
	}
}
