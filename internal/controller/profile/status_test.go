package profile_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/scheme"
	"github.com/pitstop-dev/pitstop/internal/testutil"
	"github.com/pitstop-dev/pitstop/internal/testutil/clustertest"
)

// statusWrites counts the writes of a profile's status seen through a
// watch, and when they happened.
type statusWrites struct {
	mu    sync.Mutex
	times []time.Time
}

func watchStatusWrites(t *testing.T, name string) *statusWrites {
	t.Helper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(t.Context(), &pitstopv1alpha1.MaintenanceProfileList{}, client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", name)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	s := &statusWrites{}
	go func() {
		for range w.ResultChan() {
			s.mu.Lock()
			s.times = append(s.times, time.Now())
			s.mu.Unlock()
		}
	}()
	return s
}

// within counts the writes seen in the window [from, to].
func (s *statusWrites) within(from, to time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, at := range s.times {
		if !at.Before(from) && !at.After(to) {
			n++
		}
	}
	return n
}

// TestProfileStatusCountsNodesPerState: status.nodes follows the nodes'
// states and lastTransitionTime the latest move, while moves in quick
// succession are written at most once every two seconds.
func TestProfileStatusCountsNodesPerState(t *testing.T) {
	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{})
	writes := watchStatusWrites(t, "counted")
	testutil.Create(t, env.Client, rollingProfile("counted", "counted", 2))
	awaitProfileCondition(t, "counted", "Ready", metav1.ConditionTrue)

	start := time.Now()
	for i := range 5 {
		node := testutil.Node(fmt.Sprintf("counted-%d", i), testutil.WithLabels(map[string]string{"pool": "counted"}))
		if i < 3 {
			node.Annotations = map[string]string{"reboot-needed": "true"}
		}
		testutil.Create(t, env.Client, node)
	}
	awaitCounts(t, "counted", map[pitstopv1alpha1.MaintenanceState]int32{
		pitstopv1alpha1.StateOperational: 2, pitstopv1alpha1.StateMaintenanceRequired: 1, pitstopv1alpha1.StateInMaintenance: 2,
	})
	settled := time.Now()
	// Eight moves (five nodes selected, three needing maintenance, two let
	// in): at most one write when the first shows, then one per interval.
	if n, most := writes.within(start, settled), 2+int(settled.Sub(start)/(2*time.Second)); n > most {
		t.Errorf("%d status writes in %s, want at most %d", n, settled.Sub(start).Round(time.Millisecond), most)
	}

	for i := range 3 {
		node := testutil.GetNode(t, env.Client, fmt.Sprintf("counted-%d", i))
		patch := client.MergeFrom(node.DeepCopy())
		delete(node.Annotations, "reboot-needed")
		if err := env.Client.Patch(t.Context(), node, patch); err != nil {
			t.Fatal(err)
		}
	}
	p := awaitCounts(t, "counted", map[pitstopv1alpha1.MaintenanceState]int32{
		pitstopv1alpha1.StateOperational: 5, pitstopv1alpha1.StateMaintenanceRequired: 0, pitstopv1alpha1.StateInMaintenance: 0,
	})
	if p.Status.LastTransitionTime == nil || p.Status.LastTransitionTime.Time.Before(start.Truncate(time.Second)) {
		t.Errorf("lastTransitionTime = %v, want a time after %s", p.Status.LastTransitionTime, start.Format(time.RFC3339))
	}
}

// awaitCounts waits until the profile's status counts its nodes as want.
func awaitCounts(t *testing.T, name string, want map[pitstopv1alpha1.MaintenanceState]int32) *pitstopv1alpha1.MaintenanceProfile {
	t.Helper()
	p := &pitstopv1alpha1.MaintenanceProfile{}
	testutil.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		if err := env.Client.Get(t.Context(), client.ObjectKey{Name: name}, p); err != nil {
			return err
		}
		for state, n := range want {
			if p.Status.Nodes[state] != n {
				return fmt.Errorf("status.nodes = %v, want %v", p.Status.Nodes, want)
			}
		}
		return nil
	})
	return p
}
