package machineset_test

import (
	"context"
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/pitstop-dev/pitstop/internal/machineapi/machineset"
)

// lateEventClient lists Machines as a cache that has not seen the newest
// one yet, and lets that Machine's watch event arrive just after the list
// returns.
type lateEventClient struct {
	client.Client
	arrived func()
}

func (c *lateEventClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	machines, ok := list.(*machinev1beta1.MachineList)
	if !ok || c.arrived == nil || len(machines.Items) == 0 {
		return nil
	}
	newest := 0
	for i, m := range machines.Items {
		if machines.Items[newest].CreationTimestamp.Before(&m.CreationTimestamp) ||
			m.CreationTimestamp.Equal(&machines.Items[newest].CreationTimestamp) && m.Name > machines.Items[newest].Name {
			newest = i
		}
	}
	machines.Items = append(machines.Items[:newest], machines.Items[newest+1:]...)
	c.arrived()
	c.arrived = nil
	return nil
}

// TestSetCountsOnlyFromAListTakenAfterItsCacheCaughtUp lets the event of
// the set's last creation arrive between the list of its Machines and the
// decision: the list misses that Machine, yet the expectations are met by
// the time they are asked. The set must not trust that list, or it creates
// the Machine a second time.
func TestSetCountsOnlyFromAListTakenAfterItsCacheCaughtUp(t *testing.T) {
	ns := newNamespace(t, "ms-late-event")
	ms := newSet(ns, "workers", 2)
	create(t, ms)
	for range 2 {
		create(t, machineset.NewMachine(ms))
	}
	c := &lateEventClient{Client: env.Client}
	r := machineset.NewTestReconciler(c)
	r.ExpectCreations(ms, 1)
	c.arrived = func() { r.CreationObserved(ms) }

	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(ms)}
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if got := machinesOf(t, ms); len(got) != 2 {
		t.Fatalf("after a reconcile that listed before the last event arrived: %d machines, want 2", len(got))
	}
	// The next reconcile lists everything and finds nothing to do.
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if got := machinesOf(t, ms); len(got) != 2 {
		t.Fatalf("after a reconcile with the cache caught up: %d machines, want 2", len(got))
	}
}
