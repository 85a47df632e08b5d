package admission

import (
	"context"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/pitstop-dev/pitstop/internal/budget"
	"github.com/pitstop-dev/pitstop/internal/plugin/check"
)

// Wait makes node a waiter on exactly keys (none: not waiting), in line on
// those of them in inLine, as its evaluation found; it has waited since
// since. expire is when a slot of an in-line budget expires by itself,
// by wake key (the budget's check said so): the front of that line is
// woken then, rather than every node in it.
func (a *Admission) Wait(node string, keys, inLine []string, since time.Time, expire map[string]time.Time) {
	a.waiters.set(node, keys, inLine, since)
	for key, at := range expire {
		if slices.Contains(inLine, key) {
			a.waiters.expires(key, at)
		}
	}
}

// OutOfLine takes a node whose evaluation failed out of the lines it
// stands in, so that it does not hold the nodes behind it back; it is
// still woken when a slot frees.
func (a *Admission) OutOfLine(node string) { a.waiters.outOfLine(node) }

// Forget drops a node that is gone.
func (a *Admission) Forget(node string) { a.waiters.set(node, nil, nil, time.Time{}) }

// TakeWoken returns the nodes woken since it was last called, for a
// caller that evaluates nodes itself rather than through Run and Wakes.
func (a *Admission) TakeWoken() []string { return a.waiters.take() }

// Run hands the woken nodes on to Wakes and keeps the lines (a slot that
// expires, a look at each line's front every lineKeep) until ctx ends.
func (a *Admission) Run(ctx context.Context) error {
	go a.waiters.keep(ctx, a.clock.Now)
	a.waiters.pump(ctx)
	return nil
}

// NodeGone gives back every slot a deleted node held, at once rather
// than at the next sweep: a machine replaced in maintenance frees its
// budget for the next node as soon as it is gone. The caller has read
// from the API server that the node no longer exists.
func (a *Admission) NodeGone(ctx context.Context, node string) error {
	a.Forget(node)
	return a.slots.Sweep(ctx, func(_ budget.Key, holder string, _ *coordinationv1.Lease) bool { return holder == node })
}

// Wakes carries the nodes to evaluate at once, ahead of the rest: woken
// for a slot freed or handed to them. Nothing is sent on it unless Run
// runs.
func (a *Admission) Wakes() <-chan event.GenericEvent { return a.waiters.wake }

// WakeOnChange returns the longest-waiting nodes on key, other than
// except, for a change of what they wait for that the cache now shows: a
// node of the profile changed state, or a node left maintenance and the
// budget's slot it held (of wake key key) was not handed over already.
func (a *Admission) WakeOnChange(key, except string) []string {
	if a.waiters.handedOver(key, except, a.clock.Now()) {
		return nil // its waiters were woken when it was given back
	}
	return a.waiters.oldest(key, except)
}

// MaintenanceEnded wakes the longest-waiting nodes on every budget shared
// by every profile, once the cache sees a NodeMaintenance deleted or its
// deletion started: such budgets count every node under maintenance, a
// user's drain or a Machine's among them, which hold no slot whose release
// would wake anyone.
func (a *Admission) MaintenanceEnded() {
	for _, key := range a.waiters.keys("budget/" + check.AllProfilesBudget + "/") {
		a.waiters.notify(key, "")
	}
}

// SlotDeleted wakes the nodes waiting on a budget once the cache sees one
// of its slots given back.
func (a *Admission) SlotDeleted(lease *coordinationv1.Lease) {
	key, ok := budget.KeyOf(lease)
	if !ok || a.waiters.handedOver(budgetWakeKey(key), budget.HolderOf(lease), a.clock.Now()) {
		return // its waiters were woken when it was given back
	}
	a.waiters.notify(budgetWakeKey(key), "")
}

// SlotChanged wakes the nodes waiting on a budget once the cache sees one
// of its slots change hands or lose its holder.
func (a *Admission) SlotChanged(oldLease, newLease *coordinationv1.Lease) {
	if ptr.Deref(oldLease.Spec.HolderIdentity, "") == ptr.Deref(newLease.Spec.HolderIdentity, "") {
		return
	}
	key, ok := budget.KeyOf(newLease)
	if !ok || a.waiters.handedOver(budgetWakeKey(key), budget.HolderOf(oldLease), a.clock.Now()) {
		return // handed straight to the node first in line
	}
	a.waiters.notify(budgetWakeKey(key), "")
}
