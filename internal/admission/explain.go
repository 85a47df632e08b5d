package admission

import (
	"context"
	"time"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/budget"
)

// Explain says why a node whose transition into maintenance passes its
// checks waits for a budget slot, as the engine would find it from slots
// (read through the cache): every slot is taken, or as many nodes have
// waited longer for the free ones (ahead, by a budget's wake key) as there
// are. "" when it need not wait.
func Explain(ctx context.Context, slots *budget.Slots, req Request, ahead func(wakeKey string) int) string {
	t := req.Transition
	if t.Next != pitstopv1alpha1.StateInMaintenance {
		return ""
	}
	for _, name := range t.Expression.Names() {
		b, ok := BudgetOf(req.Profile, name, req.Node)
		if !ok {
			continue
		}
		free, holding := slots.Free(ctx, b.Key, b.Size, req.Node.Name, b.expired(slots, req.Now))
		switch {
		case holding:
			continue
		case free == 0:
			return slotsTaken(b)
		}
		if n := ahead(b.WakeKey()); n >= free {
			return linedUp(b, free, n)
		}
	}
	return ""
}

// Lines are the nodes in line for each budget, as their records show
// them: by wake key, each node with the time it has waited since. It is
// how Explain finds the nodes ahead of one where the waiters (which only
// the replica that evaluates the nodes has) are not at hand.
type Lines map[string]map[string]time.Time

// Add puts node in key's line, waiting since since; a node in line twice
// (for a budget two profiles share) keeps the earlier time.
func (l Lines) Add(key, node string, since time.Time) {
	if l[key] == nil {
		l[key] = map[string]time.Time{}
	}
	if at, ok := l[key][node]; !ok || since.Before(at) {
		l[key][node] = since
	}
}

// Ahead counts the nodes in key's line that have waited longer than node,
// which waits since since.
func (l Lines) Ahead(key, node string, since time.Time) int {
	n := 0
	for other, at := range l[key] {
		if other != node && before(at, other, since, node) {
			n++
		}
	}
	return n
}
