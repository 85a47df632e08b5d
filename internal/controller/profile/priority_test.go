package profile

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/ctrlqueue"
	"github.com/pitstop-dev/pitstop/internal/engine"
	"github.com/pitstop-dev/pitstop/internal/fleet"
)

// TestNodesUnderWayGoFirst: with the fleet's nodes queued, a change of the
// NodeMaintenance of a node being drained queues that node ahead of them.
func TestNodesUnderWayGoFirst(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	for _, n := range []string{"waiting-0", "waiting-1", "waiting-2"} {
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: n}})
	}
	nm := &pitstopv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: "profile-draining", Labels: map[string]string{pitstopv1alpha1.LabelProfile: "rolling"}},
		Spec:       pitstopv1alpha1.NodeMaintenanceSpec{NodeName: "draining"},
	}
	firstFromMapFunc(nodeOfMaintenance).Update(t.Context(), event.UpdateEvent{ObjectOld: nm, ObjectNew: nm}, q)
	req, priority, _ := q.GetWithPriority()
	if req.Name != "draining" || priority != pipelinePriority {
		t.Fatalf("first out of the queue: %s with priority %d, want draining with %d", req.Name, priority, pipelinePriority)
	}
	if req, _, _ := q.GetWithPriority(); req.Name != "waiting-0" {
		t.Fatalf("then %s, want waiting-0", req.Name)
	}
}

// TestOnlyADrainsStepsWakeItsNode: the drain's progress (the Ready
// condition's message, about once a second) does not evaluate the node
// again; a change of step, its end or its deletion does.
func TestOnlyADrainsStepsWakeItsNode(t *testing.T) {
	nm := func(status metav1.ConditionStatus, reason, message string, deleting bool) *pitstopv1alpha1.NodeMaintenance {
		o := &pitstopv1alpha1.NodeMaintenance{}
		if status != "" {
			o.Status.Conditions = []metav1.Condition{{Type: pitstopv1alpha1.ConditionReady, Status: status, Reason: reason, Message: message}}
		}
		if deleting {
			o.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		}
		return o
	}
	draining := nm(metav1.ConditionFalse, "Draining", "10 of 30 pods evicted", false)
	for _, tc := range []struct {
		name string
		new  *pitstopv1alpha1.NodeMaintenance
		want bool
	}{
		{"progress", nm(metav1.ConditionFalse, "Draining", "20 of 30 pods evicted", false), false},
		{"drained", nm(metav1.ConditionTrue, "Drained", "", false), true},
		{"another step", nm(metav1.ConditionFalse, "WaitingForBudget", "", false), true},
		{"deleted", nm(metav1.ConditionFalse, "Draining", "10 of 30 pods evicted", true), true},
		{"condition gone", nm("", "", "", false), true},
	} {
		if got := maintenanceStepChanged(draining, tc.new); got != tc.want {
			t.Errorf("%s: changed %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestANodeInMaintenanceGoesFirstWhenItChanges: with the fleet's nodes
// queued, a change of a node in maintenance (its drain's restore
// uncordoning it) queues it ahead of them; a change of a node waiting for
// maintenance goes behind them.
func TestANodeInMaintenanceGoesFirstWhenItChanges(t *testing.T) {
	q := ctrlqueue.Wrap(priorityqueue.New[reconcile.Request]("test"))
	defer q.ShutDown()
	for _, n := range []string{"waiting-0", "waiting-1"} {
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: n}})
	}
	node := func(name string, state pitstopv1alpha1.MaintenanceState) *corev1.Node {
		record := engine.Record{Profiles: map[string]engine.ProfileRecord{"rolling": {Current: state}}}
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "2", Annotations: map[string]string{pitstopv1alpha1.AnnotationMaintenanceData: record.Encode()}}}
	}
	events := nodeEvents(fleet.NewRecords())
	for _, n := range []*corev1.Node{node("waiting-2", pitstopv1alpha1.StateMaintenanceRequired), node("restored", pitstopv1alpha1.StateInMaintenance)} {
		old := n.DeepCopy()
		old.ResourceVersion = "1"
		events.Update(t.Context(), event.UpdateEvent{ObjectOld: old, ObjectNew: n}, q)
	}
	var order []string
	for range 4 {
		req, priority, _ := q.GetWithPriority()
		order = append(order, fmt.Sprintf("%s/%d", req.Name, priority))
	}
	if want := []string{fmt.Sprintf("restored/%d", pipelinePriority), "waiting-0/0", "waiting-1/0", "waiting-2/0"}; !slices.Equal(order, want) {
		t.Errorf("out of the queue: %v, want %v", order, want)
	}
}
