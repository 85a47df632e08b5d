package drain

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Outcome is what happened to one pod.
type Outcome string

const (
	// Evicted: the API server accepted the eviction; the pod is terminating.
	Evicted Outcome = "evicted"
	// Deleted: the pod was deleted directly.
	Deleted Outcome = "deleted"
	// Gone: the pod no longer exists (or was replaced by a pod of the same
	// name, which the UID precondition protects).
	Gone Outcome = "gone"
	// Refused: the API server refused the eviction with 429 Too Many
	// Requests, because a PodDisruptionBudget allows no disruption now.
	Refused Outcome = "refused"
	// Failed: any other error.
	Failed Outcome = "failed"
)

// PodResult is the outcome for one pod; Err is set for Refused and Failed.
type PodResult struct {
	Pod     *corev1.Pod
	Outcome Outcome
	Err     error
}

// Result is what one round of evictions or deletions did.
type Result struct {
	Pods []PodResult
}

// Count returns how many pods had the outcome.
func (r Result) Count(o Outcome) int {
	n := 0
	for _, p := range r.Pods {
		if p.Outcome == o {
			n++
		}
	}
	return n
}

// With returns the results with the outcome.
func (r Result) With(o Outcome) []PodResult {
	var out []PodResult
	for _, p := range r.Pods {
		if p.Outcome == o {
			out = append(out, p)
		}
	}
	return out
}

// FirstError returns the first Failed result's error, or nil.
func (r Result) FirstError() error {
	for _, p := range r.Pods {
		if p.Outcome == Failed {
			return p.Err
		}
	}
	return nil
}

// Message summarises the result for people: "evicted 3, refused 2, failed 1".
func (r Result) Message() string {
	var parts []string
	for _, o := range []Outcome{Evicted, Deleted, Gone, Refused, Failed} {
		if n := r.Count(o); n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", o, n))
		}
	}
	if len(parts) == 0 {
		return "nothing to do"
	}
	return strings.Join(parts, ", ")
}

// requestTimeout bounds one eviction or deletion request, which runs on
// after its caller's context ends (Executor.each).
const requestTimeout = 30 * time.Second

// Executor evicts and deletes pods through the API, several at a time.
type Executor struct {
	// Client talks to the API server directly (writes are never cached).
	Client client.Client
	// Concurrency bounds the requests in flight for one call: one node.
	Concurrency int
	// Limiter, when set, bounds the requests of every Executor that shares
	// it: the whole manager's.
	Limiter *Limiter
}

// Evict asks the Eviction API to evict each pod, so PodDisruptionBudgets are
// obeyed. gracePeriod overrides the pods' own when set. The eviction carries
// the pod's UID as a precondition: a StatefulSet pod recreated under the same
// name is not evicted by mistake.
func (e *Executor) Evict(ctx context.Context, pods []*corev1.Pod, gracePeriod *int64) Result {
	return e.each(ctx, pods, func(ctx context.Context, pod *corev1.Pod) PodResult { return e.evictOne(ctx, pod, gracePeriod) })
}

func (e *Executor) evictOne(ctx context.Context, pod *corev1.Pod, gracePeriod *int64) PodResult {
	eviction := &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name},
		DeleteOptions: deleteOptions(pod, gracePeriod),
	}
	err := e.Client.SubResource("eviction").Create(ctx, pod, eviction)
	switch {
	case err == nil:
		return PodResult{Pod: pod, Outcome: Evicted}
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return PodResult{Pod: pod, Outcome: Gone}
	case apierrors.IsTooManyRequests(err):
		return PodResult{Pod: pod, Outcome: Refused, Err: err}
	default:
		return PodResult{Pod: pod, Outcome: Failed, Err: fmt.Errorf("evicting pod %s: %w", klog.KObj(pod), err)}
	}
}

// Delete deletes each pod directly, bypassing PodDisruptionBudgets: for
// finished pods, and for the force-delete a drain timeout may call for.
func (e *Executor) Delete(ctx context.Context, pods []*corev1.Pod, gracePeriod *int64) Result {
	return e.each(ctx, pods, func(ctx context.Context, pod *corev1.Pod) PodResult { return e.deleteOne(ctx, pod, gracePeriod) })
}

func (e *Executor) deleteOne(ctx context.Context, pod *corev1.Pod, gracePeriod *int64) PodResult {
	// Not DeleteOptions.Raw: controller-runtime overwrites its grace
	// period and preconditions with the (unset) typed fields.
	opts := deleteOptions(pod, gracePeriod)
	err := e.Client.Delete(ctx, pod, &client.DeleteOptions{GracePeriodSeconds: opts.GracePeriodSeconds, Preconditions: opts.Preconditions})
	switch {
	case err == nil:
		return PodResult{Pod: pod, Outcome: Deleted}
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return PodResult{Pod: pod, Outcome: Gone}
	default:
		return PodResult{Pod: pod, Outcome: Failed, Err: fmt.Errorf("deleting pod %s: %w", klog.KObj(pod), err)}
	}
}

func deleteOptions(pod *corev1.Pod, gracePeriod *int64) *metav1.DeleteOptions {
	return &metav1.DeleteOptions{
		GracePeriodSeconds: gracePeriod,
		Preconditions:      &metav1.Preconditions{UID: &pod.UID},
	}
}

// each runs do for every pod with at most Concurrency in flight, within the
// Limiter's bound, and returns the results in the pods' order.
func (e *Executor) each(ctx context.Context, pods []*corev1.Pod, do func(context.Context, *corev1.Pod) PodResult) Result {
	results := make([]PodResult, len(pods))
	limit := max(e.Concurrency, 1)
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for i, pod := range pods {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if e.Limiter != nil {
				release, err := e.Limiter.Acquire(ctx)
				if err != nil {
					results[i] = PodResult{Pod: pod, Outcome: Failed, Err: fmt.Errorf("pod %s not evicted or deleted: waiting for the manager's eviction bound: %w", klog.KObj(pod), err)}
					return
				}
				defer release()
			}
			if err := ctx.Err(); err != nil {
				results[i] = PodResult{Pod: pod, Outcome: Failed, Err: fmt.Errorf("pod %s not evicted or deleted: %w", klog.KObj(pod), err)}
				return
			}
			// A request once sent is let finish when ctx ends meanwhile (the
			// manager stopping gracefully, a drain cut short): the API server
			// abandons a request whose client goes, and an eviction abandoned
			// after its PodDisruptionBudget counted the pod, before the pod's
			// deletion, holds one of the budget's disruptions for two
			// minutes (docs/safety.md). requestTimeout bounds it instead.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), requestTimeout)
			defer cancel()
			results[i] = do(rctx, pod)
		})
	}
	wg.Wait()
	return Result{Pods: results}
}
