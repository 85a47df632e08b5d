package nodemaintenance

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

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
