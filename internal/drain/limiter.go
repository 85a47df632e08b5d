package drain

import (
	"context"

	"k8s.io/client-go/util/flowcontrol"
)

// Limiter bounds the pod evictions and deletions of a whole manager, every
// drain's together: at most InFlight requests at once, started at no more
// than Rate a second on average with bursts of up to Burst. Each drain's
// own bound (Executor.Concurrency) applies within it.
//
// Without it, ten drains of a hundred pods each sent a thousand requests
// at once; after an API server restart every drain that was waiting sent
// its whole node at the same instant, while the control plane was
// recovering and PodDisruptionBudget status was not yet recomputed.
//
// A Limiter is shared and safe for concurrent use. It is the bound a
// queue of evictions apart from the reconcile workers would take too:
// Acquire before each request, release after its answer.
type Limiter struct {
	slots chan struct{}
	rate  flowcontrol.RateLimiter
}

// LimiterOptions size a Limiter.
type LimiterOptions struct {
	// InFlight bounds the requests in flight at once (at least 1).
	InFlight int
	// Rate is how many requests may start a second, on average (above 0).
	Rate float64
	// Burst is how many may start at once after a quiet spell (at least 1).
	Burst int
}

// NewLimiter returns a Limiter; a bound below its least value (1, or any
// rate above 0) is raised to it. The manager checks its flags first.
func NewLimiter(o LimiterOptions) *Limiter {
	rate := o.Rate
	if rate <= 0 {
		rate = 1
	}
	return &Limiter{
		slots: make(chan struct{}, max(o.InFlight, 1)),
		rate:  flowcontrol.NewTokenBucketRateLimiter(float32(rate), max(o.Burst, 1)),
	}
}

// Acquire waits for a slot and then for the rate to allow one more
// request; it returns the function that gives the slot back, to be called
// once the request has its answer. It fails only when ctx ends first.
func (l *Limiter) Acquire(ctx context.Context) (release func(), err error) {
	select {
	case l.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	// The slot is taken before the token so that a request waiting for a
	// slot does not hold a token it cannot use yet.
	if err := l.rate.Wait(ctx); err != nil {
		<-l.slots
		return nil, err
	}
	return func() { <-l.slots }, nil
}

// InFlight says how many requests hold a slot: sent, or about to be once
// the rate allows, and not yet answered.
func (l *Limiter) InFlight() int { return len(l.slots) }
