package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// TestKillNineAtAnyMoment runs a rolling maintenance of 16 nodes (budget 2)
// through a `pitstop run` process that is killed with SIGKILL at random
// moments and started again, as a crashing pod would be. Every node gets
// through maintenance; never more than 2 nodes are in maintenance at once;
// no node enters maintenance twice; no budget slot is left held.
func TestKillNineAtAnyMoment(t *testing.T) {
	const nodes, budget, kills = 16, 2, 8
	testutil.Create(t, env.Client, &pitstopv1alpha1.MaintenanceProfile{
		ObjectMeta: metav1.ObjectMeta{Name: "kill9"},
		Spec: pitstopv1alpha1.MaintenanceProfileSpec{
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "kill9"}},
			Checks: []pitstopv1alpha1.CheckInstance{
				{Name: "reboot_needed", HasAnnotation: &pitstopv1alpha1.KeyValueCheck{Key: "reboot-needed"}},
				{Name: "budget", MaxMaintenance: &pitstopv1alpha1.MaxMaintenanceCheck{Max: budget, ProfileScoped: true}},
			},
			Triggers: []pitstopv1alpha1.TriggerInstance{
				{Name: "mark", AlterLabel: &pitstopv1alpha1.AlterTrigger{Key: "maintained", Value: ptr.To("true")}},
			},
			States: pitstopv1alpha1.StatesSpec{
				Operational:         pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "reboot_needed", Next: pitstopv1alpha1.StateMaintenanceRequired}}},
				MaintenanceRequired: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "budget", Triggers: []string{"mark"}, Next: pitstopv1alpha1.StateInMaintenance}}},
				InMaintenance:       pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "!reboot_needed", Next: pitstopv1alpha1.StateOperational}}},
			},
		},
	})

	// Watch every change of the pool's nodes: the most in maintenance at
	// once, and each node's sequence of states. A node in maintenance is
	// "rebooted" (its annotation removed) a little later.
	w := testutil.WatchMaintenance(t, env.Clientset, "pool=kill9", func(ctx context.Context, name string) {
		time.Sleep(800 * time.Millisecond)
		patch := []byte(`{"metadata":{"annotations":{"reboot-needed":null}}}`)
		_, _ = env.Clientset.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	})
	for i := range nodes {
		testutil.Create(t, env.Client, testutil.Node(fmt.Sprintf("kill9-%02d", i),
			testutil.WithLabels(map[string]string{"pool": "kill9"}),
			func(n *corev1.Node) { n.Annotations = map[string]string{"reboot-needed": "true"} }))
	}
	args, _, health := runArgs(t, "pitstop-kill9")
	args = append(args, "--leader-elect=false")
	killedMidway := 0
	for i := range kills {
		p := startPitstop(t, args...)
		awaitOK(t, "http://"+health+"/readyz")
		time.Sleep(time.Duration(200+rand.IntN(1300)) * time.Millisecond)
		if done := w.Through(); done < nodes {
			killedMidway++
			t.Logf("kill %d: SIGKILL with %d of %d nodes through maintenance", i+1, done, nodes)
		}
		if code := p.signal(syscall.SIGKILL, 10*time.Second); code == 0 {
			t.Fatalf("kill %d: exit code 0 after SIGKILL", i+1)
		}
	}
	if killedMidway < kills/2 {
		t.Errorf("only %d of %d kills came while nodes were still to go: the test proves little", killedMidway, kills)
	}
	startPitstop(t, args...)
	testutil.Eventually(t, time.Minute, 200*time.Millisecond, func() error {
		if done := w.Through(); done < nodes {
			return fmt.Errorf("%d of %d nodes through maintenance", done, nodes)
		}
		return nil
	})

	mostAtOnce := w.MostAtOnce()
	if mostAtOnce > budget {
		t.Errorf("%d nodes were in maintenance at once; the budget is %d", mostAtOnce, budget)
	}
	want := []string{"operational", "maintenance-required", "in-maintenance", "operational"}
	for name, seq := range w.States() {
		// The first state seen may be maintenance-required: the node's first
		// write can carry both moves.
		got := strings.Join(seq, " → ")
		if got != strings.Join(want, " → ") && got != strings.Join(want[1:], " → ") {
			t.Errorf("node %s went through %s, want %s once", name, got, strings.Join(want, " → "))
		}
	}
	entries := map[string]int{}
	list := &eventsv1.EventList{}
	if err := env.Client.List(t.Context(), list); err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Items {
		if strings.HasPrefix(e.Regarding.Name, "kill9-") && e.Reason == "ChangedMaintenanceState" && strings.Contains(e.Note, "now in-maintenance") {
			entries[e.Regarding.Name]++
		}
	}
	for name, n := range entries {
		if n > 1 {
			t.Errorf("node %s was recorded entering maintenance %d times", name, n)
		}
	}
	leases := &coordinationv1.LeaseList{}
	if err := env.Client.List(t.Context(), leases, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.List(t.Context(), leases, client.InNamespace("default")); err == nil {
		for _, l := range leases.Items {
			if h := ptr.Deref(l.Spec.HolderIdentity, ""); strings.HasPrefix(h, "node/kill9-") {
				t.Logf("when every node is back, Lease %s is still held by %s (acquired %s)", l.Name, h, l.Spec.AcquireTime)
			}
		}
	}
	// A kill between writing a node out of maintenance and giving its
	// slot back leaves the slot held; the manager's sweep gives it back
	// once the slot's grace has passed.
	testutil.Eventually(t, 45*time.Second, 200*time.Millisecond, func() error {
		if err := env.Client.List(t.Context(), leases, client.InNamespace("default")); err != nil {
			return err
		}
		for _, l := range leases.Items {
			if h := ptr.Deref(l.Spec.HolderIdentity, ""); strings.HasPrefix(h, "node/kill9-") {
				return fmt.Errorf("Lease %s still held by %s after every node is back", l.Name, h)
			}
		}
		return nil
	})
	t.Logf("%d nodes through maintenance across %d kills, at most %d at once (budget %d)", nodes, kills, mostAtOnce, budget)
}
