package manager

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/pitstop-dev/pitstop/internal/drain"
)

// TestSlimPodsPlanTheSameDrain: a drain planned over the cache's slim pods
// is the drain planned over the full pods, for every kind of pod the plan
// tells apart.
func TestSlimPodsPlanTheSameDrain(t *testing.T) {
	controller := func(kind string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: "x", UID: "owner", Controller: ptr.To(true)}}
	}
	heavy := corev1.PodSpec{
		NodeName:   "worker-0",
		Containers: []corev1.Container{{Name: "app", Image: "app:1", Env: []corev1.EnvVar{{Name: "A", Value: "a long value"}}}},
		Volumes:    []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
	}
	pod := func(name string, mutate func(*corev1.Pod)) corev1.Pod {
		p := corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: k8stypes.UID("uid-" + name), ResourceVersion: "7",
				Labels:          map[string]string{"app": name},
				Annotations:     map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{...}"},
				OwnerReferences: controller("ReplicaSet"),
				ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager"}}},
			Spec:   *heavy.DeepCopy(),
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1", Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
		}
		if mutate != nil {
			mutate(&p)
		}
		return p
	}
	now := metav1.Now()
	full := []corev1.Pod{
		pod("web", nil),
		pod("agent", func(p *corev1.Pod) { p.OwnerReferences = controller("DaemonSet") }),
		pod("static", func(p *corev1.Pod) { p.Annotations[corev1.MirrorPodAnnotationKey] = "hash" }),
		pod("kept", func(p *corev1.Pod) { p.Labels["keep"] = "yes" }),
		pod("leaving", func(p *corev1.Pod) { p.DeletionTimestamp = &now }),
		pod("job", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
		pod("bare", func(p *corev1.Pod) { p.OwnerReferences = nil }),
		pod("dns", func(p *corev1.Pod) { p.Spec.PriorityClassName = "system-cluster-critical" }),
		pod("logger", func(p *corev1.Pod) { p.Spec.Priority = ptr.To[int32](2_000_001_000) }),
	}
	slim := make([]corev1.Pod, len(full))
	for i := range full {
		out, err := slimPod(full[i].DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		slim[i] = *out.(*corev1.Pod)
		if len(slim[i].Spec.Containers) != 0 || slim[i].ManagedFields != nil || slim[i].Status.PodIP != "" ||
			slim[i].Annotations["kubectl.kubernetes.io/last-applied-configuration"] != "" {
			t.Errorf("slim pod %s still carries what pitstop never reads: %+v", full[i].Name, slim[i])
		}
	}
	for _, opts := range []drain.Options{{}, {DeleteUnmanaged: true, Skip: labels.SelectorFromSet(labels.Set{"keep": "yes"})}} {
		want, got := drain.NewPlan(full, opts).String(), drain.NewPlan(slim, opts).String()
		if want != got {
			t.Errorf("options %+v: plan over slim pods %s, over full pods %s", opts, got, want)
		}
		wantPending, gotPending := names(drain.NewPlan(full, opts).Pending()), names(drain.NewPlan(slim, opts).Pending())
		if !equality.Semantic.DeepEqual(wantPending, gotPending) {
			t.Errorf("options %+v: pending over slim pods %v, over full pods %v", opts, gotPending, wantPending)
		}
	}
}

// TestSlimNodeKeepsWhatChecksRead: labels, annotations, taints,
// conditions, node info and addresses stay; images and volumes go.
func TestSlimNodeKeepsWhatChecksRead(t *testing.T) {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "worker-0", Labels: map[string]string{"zone": "a"}, Annotations: map[string]string{"reboot-needed": "true"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
		Spec: corev1.NodeSpec{Unschedulable: true, Taints: []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}, ProviderID: "kwok://worker-0"},
		Status: corev1.NodeStatus{
			Conditions:   []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			NodeInfo:     corev1.NodeSystemInfo{KubeletVersion: "v1.36.3"},
			Addresses:    []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}},
			Images:       []corev1.ContainerImage{{Names: []string{"app:1"}, SizeBytes: 1 << 20}},
			VolumesInUse: []corev1.UniqueVolumeName{"vol"},
		},
	}
	want := node.DeepCopy()
	want.ManagedFields, want.Status.Images, want.Status.VolumesInUse = nil, nil, nil
	got, err := slimNode(node)
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("slim node:\n%+v\nwant\n%+v", got, want)
	}
}

func names(pods []*corev1.Pod) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	return out
}
