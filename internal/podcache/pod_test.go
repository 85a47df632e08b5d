package podcache

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNodeNameAndPhaseReadEitherForm(t *testing.T) {
	for name, tc := range map[string]struct {
		obj   any
		node  string
		phase corev1.PodPhase
	}{
		"a cached pod":                    {&Pod{NodeName: "worker-0", Phase: corev1.PodRunning}, "worker-0", corev1.PodRunning},
		"a pod":                           {&corev1.Pod{Spec: corev1.PodSpec{NodeName: "worker-1"}, Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}, "worker-1", corev1.PodSucceeded},
		"a pending pod, bound to no node": {&Pod{Phase: corev1.PodPending}, "", corev1.PodPending},
		"something else":                  {&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-0"}}, "", ""},
	} {
		if got := NodeName(tc.obj); got != tc.node {
			t.Errorf("%s: NodeName = %q, want %q", name, got, tc.node)
		}
		if got := Phase(tc.obj); got != tc.phase {
			t.Errorf("%s: Phase = %q, want %q", name, got, tc.phase)
		}
	}
}

func TestDeepCopyObjectExpandsIntoAPodOfItsOwn(t *testing.T) {
	priority := int32(7)
	cached := &Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", Labels: map[string]string{"app": "web"}},
		NodeName:   "worker-0", Phase: corev1.PodRunning, Priority: &priority, PriorityClassName: "high",
		PreferredAffinity: []corev1.PreferredSchedulingTerm{{Weight: 1}},
		Tolerations:       []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
	}
	pod, ok := cached.DeepCopyObject().(*corev1.Pod)
	if !ok {
		t.Fatalf("DeepCopyObject returned %T, want *corev1.Pod", cached.DeepCopyObject())
	}
	if pod.Name != "web" || pod.Spec.NodeName != "worker-0" || pod.Status.Phase != corev1.PodRunning || *pod.Spec.Priority != 7 ||
		pod.Spec.PriorityClassName != "high" || pod.Spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].Weight != 1 {
		t.Fatalf("expanded pod: %+v", pod)
	}
	if len(pod.Spec.Tolerations) != 1 || pod.Spec.Tolerations[0].Operator != corev1.TolerationOpExists {
		t.Fatalf("expanded pod's tolerations: %+v, want the cached pod's", pod.Spec.Tolerations)
	}
	pod.Labels["app"] = "changed"
	pod.Spec.Tolerations[0].Key = "changed"
	*pod.Spec.Priority = 8
	pod.Spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].Weight = 2
	if cached.Labels["app"] != "web" || *cached.Priority != 7 || cached.PreferredAffinity[0].Weight != 1 || cached.Tolerations[0].Key != "" {
		t.Errorf("a change to the expanded pod reached the cached one: %+v", cached)
	}
	if bare := (&Pod{}).Expand(); bare.Spec.Affinity != nil || bare.Spec.Priority != nil {
		t.Errorf("a pod without affinity or priority expanded into %+v", bare)
	}
}
