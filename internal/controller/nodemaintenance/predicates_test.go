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
