package profile

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/plugin/trigger"
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
		ObjectMeta: metav1.ObjectMeta{Name: "profile-draining", Labels: map[string]string{trigger.LabelProfile: "rolling"}},
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
