package profile

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/budget"
	"github.com/pitstop-dev/pitstop/internal/engine"
	"github.com/pitstop-dev/pitstop/internal/fleet"
	"github.com/pitstop-dev/pitstop/internal/plugin/check"
	"github.com/pitstop-dev/pitstop/internal/scheme"
)

func TestTheEngineStartsFromItsOwnWriteUntilTheCacheShowsIt(t *testing.T) {
	node := func(rv, state string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-0", ResourceVersion: rv, Labels: map[string]string{"state": state}}}
	}
	cases := []struct {
		name      string
		cached    *corev1.Node
		want      string // the state of the node evaluated
		forgotten bool
	}{
		{"the cache is behind the write", node("99", "cached"), "written", false},
		{"the cache is far behind (shorter version)", node("9", "cached"), "written", false},
		{"the cache shows the write", node("100", "cached"), "cached", true},
		{"the cache shows a later write", node("101", "cached"), "cached", true},
		{"a version that does not parse", node("x7", "cached"), "cached", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWrittenNodes()
			w.remember(node("100", "written"))
			got := w.newest(tc.cached)
			if got.Labels["state"] != tc.want {
				t.Fatalf("evaluated the %s node, want the %s one", got.Labels["state"], tc.want)
			}
			if _, kept := w.nodes["worker-0"]; kept == tc.forgotten {
				t.Errorf("written node kept = %v, want %v", kept, !tc.forgotten)
			}
			if tc.want == "written" {
				got.Labels["state"] = "changed by the evaluation"
				if again := w.newest(tc.cached); again.Labels["state"] != "written" {
					t.Errorf("changing the node handed out changed the one kept")
				}
			}
		})
	}
	t.Run("another node", func(t *testing.T) {
		w := newWrittenNodes()
		w.remember(node("100", "written"))
		other := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1", ResourceVersion: "5"}}
		if got := w.newest(other); got != other {
			t.Errorf("another node's write was handed out")
		}
	})
	t.Run("a node that is gone", func(t *testing.T) {
		w := newWrittenNodes()
		w.remember(node("100", "written"))
		w.forget("worker-0")
		if got := w.newest(node("99", "cached")); got.Labels["state"] != "cached" {
			t.Errorf("a forgotten write was handed out")
		}
	})
}

// TestTheBudgetCountsANodeWrittenOutOfMaintenanceAsOut: a node the engine
// wrote out of maintenance gave its slot back, and another node took it;
// the cache has seen the slot change hands but not yet the node's move.
// Counted from the cache alone, the node that left and the node let in
// both use the budget of 2, and the node holding the other slot, drained
// and due to enter maintenance, finds it exceeded. With the engine's own
// write in place of the cached node, it is let in.
func TestTheBudgetCountsANodeWrittenOutOfMaintenanceAsOut(t *testing.T) {
	ctx := t.Context()
	const profileName = "os"
	m := &pitstopv1alpha1.MaxMaintenanceCheck{Max: 2, ProfileScoped: true}
	node := func(name, rv string, state pitstopv1alpha1.MaintenanceState) *corev1.Node {
		rec := engine.Record{Profiles: map[string]engine.ProfileRecord{profileName: {Current: state}}}
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv,
			Labels:      map[string]string{"pool": "os"},
			Annotations: map[string]string{pitstopv1alpha1.AnnotationMaintenanceData: rec.Encode()}}}
	}
	leftCached := node("worker-left", "10", pitstopv1alpha1.StateInMaintenance)
	leftWritten := node("worker-left", "12", pitstopv1alpha1.StateOperational)
	letIn := node("worker-let-in", "11", pitstopv1alpha1.StateMaintenanceRequired)
	drained := node("worker-drained", "9", pitstopv1alpha1.StateMaintenanceRequired)

	leases := fake.NewClientBuilder().WithScheme(scheme.New()).Build()
	slots := &budget.Slots{Client: leases, Cache: leases, Namespace: "pitstop-system"}
	for _, holder := range []string{letIn.Name, drained.Name} {
		if _, ok, err := slots.Acquire(ctx, check.MaxMaintenanceKey(profileName, m, ""), int(m.Max), holder, time.Now(), nil); err != nil || !ok {
			t.Fatalf("taking a slot for %s: %v, %v", holder, ok, err)
		}
	}
	cached := func(context.Context) ([]*corev1.Node, error) {
		return []*corev1.Node{leftCached, letIn, drained}, nil
	}
	profiles := []pitstopv1alpha1.MaintenanceProfile{{
		ObjectMeta: metav1.ObjectMeta{Name: profileName},
		Spec:       pitstopv1alpha1.MaintenanceProfileSpec{NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "os"}}},
	}}
	used := func(list fleet.NodeLister) int {
		view := fleet.NewCluster(ctx, nil, list, profiles, fleet.NewRecords(), slots)
		return check.MaintenanceUsed(view, profileName, m, "", drained.Name, time.Now())
	}

	if got := used(cached); got != 2 {
		t.Fatalf("from the cache alone: %d slots used besides the drained node, want 2 (the test no longer shows the double count)", got)
	}
	w := newWrittenNodes()
	w.remember(leftWritten)
	if got := used(w.over(cached)); got != 1 {
		t.Errorf("with the engine's write: %d slots used besides the drained node, want 1", got)
	}
	if list, _ := cached(ctx); list[0] != leftCached {
		t.Errorf("the lister's nodes were changed")
	}
	w.remember(node("worker-left", "9", pitstopv1alpha1.StateOperational)) // older than the cache
	if got := used(w.over(cached)); got != 2 {
		t.Errorf("a write older than the cached node replaced it: %d used, want 2", got)
	}
}

// TestTheIndexedFleetCountsTheEnginesOwnWrites: with an index of the
// nodes holding budget slots, the nodes under maintenance are found
// without listing every node, and the engine's own writes stand in for the
// cached nodes they are newer than, as in a list of every node: a node
// written out of maintenance no longer counts, a node written into it
// does, and a write older than the cache changes nothing.
func TestTheIndexedFleetCountsTheEnginesOwnWrites(t *testing.T) {
	const profileName = "os"
	node := func(name, rv string, state pitstopv1alpha1.MaintenanceState) *corev1.Node {
		rec := engine.Record{Profiles: map[string]engine.ProfileRecord{profileName: {Current: state}}}
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv,
			Annotations: map[string]string{pitstopv1alpha1.AnnotationMaintenanceData: rec.Encode()}}}
	}
	cached := map[string]*corev1.Node{
		"worker-left":     node("worker-left", "10", pitstopv1alpha1.StateInMaintenance),
		"worker-entering": node("worker-entering", "11", pitstopv1alpha1.StateMaintenanceRequired),
		"worker-other":    node("worker-other", "5", pitstopv1alpha1.StateOperational),
	}
	ix := &fleet.NodeIndex{
		Holding: func(context.Context) ([]*corev1.Node, error) {
			var out []*corev1.Node
			for _, n := range cached {
				if rec, err := engine.ReadRecord(n); err == nil && rec.Holding() {
					out = append(out, n)
				}
			}
			return out, nil
		},
		Get: func(_ context.Context, name string) (*corev1.Node, error) { return cached[name], nil },
	}
	// Budgets with no slot: a node in maintenance counts by its record.
	profiles := []pitstopv1alpha1.MaintenanceProfile{{
		ObjectMeta: metav1.ObjectMeta{Name: profileName},
		Spec: pitstopv1alpha1.MaintenanceProfileSpec{States: pitstopv1alpha1.StatesSpec{
			MaintenanceRequired: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "approved", Next: pitstopv1alpha1.StateInMaintenance}}},
		}},
	}}
	reader := fake.NewClientBuilder().WithScheme(scheme.New()).Build()
	occupied := func(ix *fleet.NodeIndex) []string {
		everyNode := func(context.Context) ([]*corev1.Node, error) {
			t.Error("every node was listed")
			return nil, nil
		}
		return fleet.NewCluster(t.Context(), reader, everyNode, profiles, fleet.NewRecords(), nil).WithIndex(ix).Occupied()
	}

	if got := occupied(ix); !slices.Equal(got, []string{"worker-left"}) {
		t.Fatalf("from the cache alone: %v under maintenance, want [worker-left]", got)
	}
	w := newWrittenNodes()
	w.remember(node("worker-left", "12", pitstopv1alpha1.StateOperational))
	w.remember(node("worker-entering", "13", pitstopv1alpha1.StateInMaintenance))
	w.remember(node("worker-other", "4", pitstopv1alpha1.StateInMaintenance)) // older than the cache
	if got := occupied(w.overIndex(ix)); !slices.Equal(got, []string{"worker-entering"}) {
		t.Errorf("with the engine's writes: %v under maintenance, want [worker-entering]", got)
	}
	if got, _ := w.overIndex(ix).Get(t.Context(), "worker-entering"); got.ResourceVersion != "13" {
		t.Errorf("the node by name is version %s, want the engine's write (13)", got.ResourceVersion)
	}
	if got, _ := w.overIndex(ix).Get(t.Context(), "worker-gone"); got != nil {
		t.Errorf("a node the cache does not have is %s", got.Name)
	}
}
