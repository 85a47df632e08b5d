package drain

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// wakes records the owners a Queue wakes, in order.
type wakes chan string

func (w wakes) wake(owner string) { w <- owner }

func (w wakes) await(t *testing.T, owner string, within time.Duration) {
	t.Helper()
	select {
	case got := <-w:
		if got != owner {
			t.Fatalf("woken for %q, want %q", got, owner)
		}
	case <-time.After(within):
		t.Fatalf("%q not woken within %s", owner, within)
	}
}

func (w wakes) none(t *testing.T, within time.Duration) {
	t.Helper()
	select {
	case got := <-w:
		t.Fatalf("woken for %q, want no wake", got)
	case <-time.After(within):
	}
}

func gone(t *testing.T, pod *corev1.Pod) bool {
	t.Helper()
	err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(pod), &corev1.Pod{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return apierrors.IsNotFound(err)
}

// TestAQueueSendsApartFromItsCaller: a drain hands its pods to the queue and
// goes on at once, while every request takes a second; the pods are not
// sent twice while unanswered; the drain is woken when its batch is
// answered and takes the answers, once.
func TestAQueueSendsApartFromItsCaller(t *testing.T) {
	pods := createPods(t, "default", "queued-a", "queued-b", "queued-c")
	w := wakes(make(chan string, 10))
	q := NewQueue(t.Context(), &Executor{Client: slowClient(t, pods[0], time.Second), Concurrency: 10}, w.wake)

	start := time.Now()
	if n := q.Evict("node-a", pods[:2], nil); n != 2 {
		t.Errorf("handed over %d pods, want 2", n)
	}
	if n := q.Evict("node-a", pods, nil); n != 1 {
		t.Errorf("handed over %d pods again, with two of them unanswered: want only the third", n)
	}
	if took := time.Since(start); took > 200*time.Millisecond {
		t.Errorf("handing over pods took %s, with every request taking a second: the caller waited for them", took)
	}
	if res, unanswered := q.Take("node-a"); len(res.Pods) != 0 || unanswered != 3 {
		t.Errorf("before any answer: took %v, %d unanswered; want nothing and 3", res.Pods, unanswered)
	}
	if n := q.Unanswered(); n != 3 {
		t.Errorf("the queue holds %d unanswered pods, want 3", n)
	}

	// The pods go in one batch or two (the third joins the first if that
	// has not started yet): a wake for each.
	var res Result
	for unanswered := 3; unanswered > 0; {
		w.await(t, "node-a", 20*time.Second)
		var more Result
		more, unanswered = q.Take("node-a")
		res.Pods = append(res.Pods, more.Pods...)
	}
	_, unanswered := q.Take("node-a")
	if res.Count(Evicted) != 3 || unanswered != 0 {
		t.Errorf("answers %s, %d unanswered; want evicted 3 and none", res.Message(), unanswered)
	}
	if n := q.Unanswered(); n != 0 {
		t.Errorf("the queue holds %d unanswered pods once all are answered, want 0", n)
	}
	for _, p := range pods {
		if !gone(t, p) {
			t.Errorf("pod %s is still there after its eviction was answered", p.Name)
		}
	}
	if again, _ := q.Take("node-a"); len(again.Pods) != 0 {
		t.Errorf("answers taken twice: %s", again.Message())
	}
}

// TestAForgottenOwnerSendsNothingMore: a drain that ends while its batch is
// on its way (its NodeMaintenance deleted) has the pods not yet sent kept
// back, the one on its way let finish, and is not woken for the answers.
func TestAForgottenOwnerSendsNothingMore(t *testing.T) {
	pods := createPods(t, "default", "forgotten-sent", "forgotten-kept")
	w := wakes(make(chan string, 10))
	q := NewQueue(t.Context(), &Executor{Client: slowClient(t, pods[0], 1500*time.Millisecond), Concurrency: 1}, w.wake)

	q.Evict("node-b", pods, nil)
	time.Sleep(500 * time.Millisecond) // the first request is on its way
	q.Forget("node-b")

	w.none(t, 5*time.Second)
	if !gone(t, pods[0]) {
		t.Errorf("pod %s, whose eviction was on its way when its drain ended, was not evicted", pods[0].Name)
	}
	if gone(t, pods[1]) {
		t.Errorf("pod %s, not yet sent when its drain ended, was evicted", pods[1].Name)
	}
	if res, unanswered := q.Take("node-b"); len(res.Pods) != 0 || unanswered != 0 {
		t.Errorf("a forgotten drain's answers: %s, %d unanswered; want none", res.Message(), unanswered)
	}
}

// TestAQueueStopsWithTheManager: requests not yet sent when the manager
// stops fail with its context's error, and their drain is woken to see it.
func TestAQueueStopsWithTheManager(t *testing.T) {
	pods := createPods(t, "default", "stopping-sent", "stopping-kept")
	w := wakes(make(chan string, 10))
	ctx, stop := context.WithCancel(t.Context())
	q := NewQueue(ctx, &Executor{Client: slowClient(t, pods[0], 1500*time.Millisecond), Concurrency: 1}, w.wake)

	q.Evict("node-c", pods, nil)
	time.Sleep(500 * time.Millisecond)
	stop()
	w.await(t, "node-c", 10*time.Second)
	res, _ := q.Take("node-c")
	if res.Count(Evicted) != 1 || res.Count(Failed) != 1 {
		t.Errorf("answers %s, want the request on its way evicted and the other failed", res.Message())
	}
	if gone(t, pods[1]) {
		t.Errorf("pod %s, not yet sent when the manager stopped, was evicted", pods[1].Name)
	}
}
