package manager

import (
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/pitstop-dev/pitstop/internal/drain"
	"github.com/pitstop-dev/pitstop/internal/podcache"
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
		pod("everywhere", func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists},
				{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)}}
		}),
		pod("not-ready-only", func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)}}
		}),
	}
	slim := make([]corev1.Pod, len(full))
	slimmer := newPodSlimmer()
	for i := range full {
		out, err := slimmer.slim(full[i].DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		slim[i] = *out.(*podcache.Pod).Expand()
		if len(slim[i].Spec.Containers) != 0 || slim[i].ManagedFields != nil || slim[i].Status.PodIP != "" ||
			slim[i].Annotations["kubectl.kubernetes.io/last-applied-configuration"] != "" {
			t.Errorf("slim pod %s still carries what pitstop never reads: %+v", full[i].Name, slim[i])
		}
		// The NoExecute tolerations the API server adds to every pod never
		// match the cordon's NoSchedule taints: not kept.
		for _, tol := range slim[i].Spec.Tolerations {
			if tol.Effect == corev1.TaintEffectNoExecute {
				t.Errorf("slim pod %s keeps the NoExecute toleration %+v", full[i].Name, tol)
			}
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

// TestSlimPodsShareEqualLabelsAndOwners: pods of one ReplicaSet share one
// copy of their labels and owner references in the cache; pods with other
// labels or owners get their own, with their own values; past the limit
// the kept copies are forgotten, not grown.
func TestSlimPodsShareEqualLabelsAndOwners(t *testing.T) {
	owner := func(name string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: name, UID: k8stypes.UID("uid-" + name), Controller: ptr.To(true)}}
	}
	pod := func(name string, labels map[string]string, owners []metav1.OwnerReference) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Labels: labels, OwnerReferences: owners}}
	}
	s := newPodSlimmer()
	slim := func(p *corev1.Pod) *podcache.Pod {
		out, err := s.slim(p)
		if err != nil {
			t.Fatal(err)
		}
		return out.(*podcache.Pod)
	}
	a := slim(pod("web-a", map[string]string{"app": "web", "pod-template-hash": "1"}, owner("web-1")))
	b := slim(pod("web-b", map[string]string{"pod-template-hash": "1", "app": "web"}, owner("web-1")))
	c := slim(pod("web-c", map[string]string{"app": "web", "pod-template-hash": "2"}, owner("web-2")))
	d := slim(pod("web-d", map[string]string{"app": "web", "pod-template-hash": "1"},
		[]metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: "uid-web-1", Controller: ptr.To(false)}}))
	e := slim(pod("bare", nil, nil))
	same := func(x, y *podcache.Pod) (labels, owners bool) {
		return reflect.ValueOf(x.Labels).UnsafePointer() == reflect.ValueOf(y.Labels).UnsafePointer(),
			len(x.OwnerReferences) > 0 && len(y.OwnerReferences) > 0 && &x.OwnerReferences[0] == &y.OwnerReferences[0]
	}
	if l, o := same(a, b); !l || !o {
		t.Errorf("pods of one ReplicaSet: labels shared %v, owners shared %v; want both", l, o)
	}
	if l, o := same(a, c); l || o {
		t.Errorf("pods of two ReplicaSets: labels shared %v, owners shared %v; want neither", l, o)
	}
	if l, o := same(a, d); !l || o {
		t.Errorf("equal labels, owners differing in controller: labels shared %v, owners shared %v", l, o)
	}
	if c.Labels["pod-template-hash"] != "2" || c.OwnerReferences[0].Name != "web-2" || *d.OwnerReferences[0].Controller {
		t.Errorf("shared copies changed values: %v %v %v", c.Labels, c.OwnerReferences, d.OwnerReferences)
	}
	if e.Labels != nil || e.OwnerReferences != nil {
		t.Errorf("a pod without labels or owners got some: %v %v", e.Labels, e.OwnerReferences)
	}
	for i := range internLimit + 10 {
		slim(pod(fmt.Sprintf("sts-%d", i), map[string]string{"statefulset.kubernetes.io/pod-name": fmt.Sprintf("sts-%d", i)}, owner("sts")))
	}
	if len(s.labels) > internLimit || len(s.owners) > internLimit {
		t.Errorf("kept %d label sets and %d owner lists, past the limit of %d", len(s.labels), len(s.owners), internLimit)
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
