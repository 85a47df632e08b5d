package nodemaintenance

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/maintenance"
	"github.com/pitstop-dev/pitstop/internal/podcache"
)

// TestPodUpdatesThatWakeADrain: the pod watch passes the updates a drain
// waits for, whether the cache hands over pods as it keeps them
// (podcache.Pod) or whole.
func TestPodUpdatesThatWakeADrain(t *testing.T) {
	now := metav1.Now()
	running := &podcache.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", ResourceVersion: "1"}, NodeName: "worker-0", Phase: corev1.PodRunning}
	with := func(change func(*podcache.Pod)) *podcache.Pod {
		p := *running
		p.ResourceVersion = "2"
		change(&p)
		return &p
	}
	pass := ctrlPredicate(podChanged)
	for name, tc := range map[string]struct {
		old, new client.Object
		want     bool
	}{
		"a pod starts terminating": {running, with(func(p *podcache.Pod) { p.DeletionTimestamp = &now }), true},
		"a pod finishes":           {running, with(func(p *podcache.Pod) { p.Phase = corev1.PodSucceeded }), true},
		"a pod is bound elsewhere": {running, with(func(p *podcache.Pod) { p.NodeName = "worker-1" }), true},
		"only the labels change":   {running, with(func(p *podcache.Pod) { p.Labels = map[string]string{"a": "b"} }), false},
		"whole pods, one finishing": {
			&corev1.Pod{Spec: corev1.PodSpec{NodeName: "worker-0"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
			&corev1.Pod{Spec: corev1.PodSpec{NodeName: "worker-0"}, Status: corev1.PodStatus{Phase: corev1.PodFailed}}, true,
		},
		"whole pods, only the conditions change": {
			&corev1.Pod{Spec: corev1.PodSpec{NodeName: "worker-0"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
			&corev1.Pod{Spec: corev1.PodSpec{NodeName: "worker-0"}, Status: corev1.PodStatus{Phase: corev1.PodRunning,
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}}}, false,
		},
	} {
		if got := pass.Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
			t.Errorf("%s: update passed %v, want %v", name, got, tc.want)
		}
	}
}

// TestStartAndRestoreGoFirst: a NodeMaintenance just created, or whose
// deletion just started, is worked on before the drains under way that
// are already queued; one found by the manager's first list, or changed in
// any other way, waits its turn.
func TestStartAndRestoreGoFirst(t *testing.T) {
	nm := func(name string, deleting bool) *pitstopv1alpha1.NodeMaintenance {
		o := &pitstopv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if deleting {
			o.DeletionTimestamp = ptr.To(metav1.Now())
		}
		return o
	}
	cases := []struct {
		name    string
		enqueue func(workqueue.TypedRateLimitingInterface[reconcile.Request])
		first   bool
	}{
		{"created", func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			startFirst(context.Background(), event.CreateEvent{Object: nm("new", false)}, q)
		}, true},
		{"found by the first list", func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			startFirst(context.Background(), event.CreateEvent{Object: nm("new", false), IsInInitialList: true}, q)
		}, false},
		{"deletion started", func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			restoreFirst(context.Background(), event.UpdateEvent{ObjectOld: nm("new", false), ObjectNew: nm("new", true)}, q)
		}, true},
		{"deleting, changed again", func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			restoreFirst(context.Background(), event.UpdateEvent{ObjectOld: nm("new", true), ObjectNew: nm("new", true)}, q)
		}, false},
		{"status changed", func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			restoreFirst(context.Background(), event.UpdateEvent{ObjectOld: nm("new", false), ObjectNew: nm("new", false)}, q)
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := priorityqueue.New[reconcile.Request]("test")
			defer q.ShutDown()
			for _, name := range []string{"draining-1", "draining-2"} {
				q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
			}
			tc.enqueue(q)
			var got []string
			for q.Len() > 0 {
				req, _, _ := q.GetWithPriority()
				got = append(got, req.Name)
				q.Done(req)
			}
			want := []string{"draining-1", "draining-2"} // the controller's own watch queues it behind them
			if tc.first {
				want = []string{"new", "draining-1", "draining-2"}
			}
			if !slices.Equal(got, want) {
				t.Errorf("queue order %v, want %v", got, want)
			}
		})
	}
}

// TestMaintenanceChangesThatWakeItsReconcile: a NodeMaintenance's own
// status writes do not wake its reconcile again; a change to what it
// asks for, or its deletion, does.
func TestMaintenanceChangesThatWakeItsReconcile(t *testing.T) {
	base := &pitstopv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{
		Name: "worker-0-kernel", Generation: 1, ResourceVersion: "1",
		Finalizers: []string{pitstopv1alpha1.FinalizerNodeMaintenance},
	}}
	with := func(change func(*pitstopv1alpha1.NodeMaintenance)) *pitstopv1alpha1.NodeMaintenance {
		nm := base.DeepCopy()
		nm.ResourceVersion = "2"
		change(nm)
		return nm
	}
	pass := ctrlPredicate(maintenanceChanged)
	for name, tc := range map[string]struct {
		new  *pitstopv1alpha1.NodeMaintenance
		want bool
	}{
		"its status is written": {with(func(nm *pitstopv1alpha1.NodeMaintenance) {
			nm.Status.DrainProgress = 40
			nm.Status.Conditions = []metav1.Condition{{Type: pitstopv1alpha1.ConditionDrained, Status: metav1.ConditionFalse, Reason: pitstopv1alpha1.ReasonDraining}}
		}), false},
		"its spec changes": {with(func(nm *pitstopv1alpha1.NodeMaintenance) { nm.Generation = 2 }), true},
		"its deletion starts": {with(func(nm *pitstopv1alpha1.NodeMaintenance) {
			nm.DeletionTimestamp = ptr.To(metav1.Now())
		}), true},
		"its finalizer goes": {with(func(nm *pitstopv1alpha1.NodeMaintenance) { nm.Finalizers = nil }), true},
		"drains are excluded by annotation": {with(func(nm *pitstopv1alpha1.NodeMaintenance) {
			nm.Annotations = map[string]string{pitstopv1alpha1.AnnotationExcludeNodeDraining: ""}
		}), true},
		"a label is set": {with(func(nm *pitstopv1alpha1.NodeMaintenance) { nm.Labels = map[string]string{"team": "a"} }), true},
		"an owner is set": {with(func(nm *pitstopv1alpha1.NodeMaintenance) {
			nm.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "worker-0", UID: "u"}}
		}), true},
	} {
		if got := pass.Update(event.UpdateEvent{ObjectOld: base, ObjectNew: tc.new}); got != tc.want {
			t.Errorf("%s: update passed %v, want %v", name, got, tc.want)
		}
	}
}

// TestNodeChangesThatWakeADrain: the profile engine's record and state
// label, rewritten on every move and check result, do not wake the
// drains of the node; the rest of what maintenance sets and reads does.
func TestNodeChangesThatWakeADrain(t *testing.T) {
	base := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: "worker-0", ResourceVersion: "1",
			Labels:      map[string]string{"zone": "a", pitstopv1alpha1.LabelState: "maintenance-required"},
			Annotations: map[string]string{pitstopv1alpha1.AnnotationMaintenanceData: `{"a":1}`, pitstopv1alpha1.AnnotationCordonedBefore: "false"},
		},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
	with := func(change func(*corev1.Node)) *corev1.Node {
		n := base.DeepCopy()
		n.ResourceVersion = "2"
		change(n)
		return n
	}
	pass := ctrlPredicate(nodeChanged)
	for name, tc := range map[string]struct {
		new  *corev1.Node
		want bool
	}{
		"the engine rewrites its record": {with(func(n *corev1.Node) { n.Annotations[pitstopv1alpha1.AnnotationMaintenanceData] = `{"a":2}` }), false},
		"the engine moves the node":      {with(func(n *corev1.Node) { n.Labels[pitstopv1alpha1.LabelState] = "in-maintenance" }), false},
		"the engine's keys go": {with(func(n *corev1.Node) {
			delete(n.Annotations, pitstopv1alpha1.AnnotationMaintenanceData)
			delete(n.Labels, pitstopv1alpha1.LabelState)
		}), false},
		"a heartbeat": {with(func(n *corev1.Node) { n.Status.Conditions[0].LastHeartbeatTime = metav1.Now() }), false},
		"drains are excluded by annotation": {with(func(n *corev1.Node) {
			n.Annotations[pitstopv1alpha1.AnnotationExcludeNodeDraining] = ""
		}), true},
		"an annotation changes beside the record": {with(func(n *corev1.Node) {
			n.Annotations[pitstopv1alpha1.AnnotationMaintenanceData] = `{"a":2}`
			n.Annotations[pitstopv1alpha1.AnnotationCordonedBefore] = "true"
		}), true},
		"an annotation goes": {with(func(n *corev1.Node) { delete(n.Annotations, pitstopv1alpha1.AnnotationCordonedBefore) }), true},
		"a label is added":   {with(func(n *corev1.Node) { n.Labels[maintenance.LabelControlPlane] = "" }), true},
		"a label changes":    {with(func(n *corev1.Node) { n.Labels["zone"] = "b" }), true},
		"cordoned":           {with(func(n *corev1.Node) { n.Spec.Unschedulable = true }), true},
		"not ready":          {with(func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }), true},
	} {
		if got := pass.Update(event.UpdateEvent{ObjectOld: base, ObjectNew: tc.new}); got != tc.want {
			t.Errorf("%s: update passed %v, want %v", name, got, tc.want)
		}
	}
}
