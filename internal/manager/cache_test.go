package manager

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pitstop-dev/pitstop/internal/podcache"
	"github.com/pitstop-dev/pitstop/internal/scheme"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// TestCachedPodsReadAsPods: the manager's cache keeps pods as
// podcache.Pods, which its event handlers see as stored, and a Get or a
// List through it (by the node index and by labels) still yields
// corev1.Pods with everything pitstop reads, each a copy of its own.
func TestCachedPodsReadAsPods(t *testing.T) {
	env, err := testutil.StartEnv()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	ns := testutil.Namespace(t, env.Client, "shop")
	affinity := []corev1.PreferredSchedulingTerm{{Weight: 10, Preference: corev1.NodeSelectorTerm{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}},
	}}}
	web := testutil.Pod(ns, "web", testutil.OnNode("worker-0"), testutil.OwnedBy("ReplicaSet", "web-1"),
		testutil.WithPodLabels(map[string]string{"app": "web"}), testutil.WithPhase(corev1.PodRunning))
	web.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "hash", "note": "not cached"}
	web.Spec.PriorityClassName = "system-cluster-critical"
	web.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: affinity}}
	other := testutil.Pod(ns, "db", testutil.OnNode("worker-1"), testutil.WithPodLabels(map[string]string{"app": "db"}))
	for _, p := range []*corev1.Pod{web, other} {
		status := p.Status
		if err := env.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		p.Status = status
		if err := env.Client.Status().Update(ctx, p); err != nil {
			t.Fatal(err)
		}
	}

	opts := cacheOptions("pitstop-system")
	opts.Scheme = scheme.New()
	c, err := cache.New(env.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.IndexField(ctx, &corev1.Pod{}, "spec.nodeName", func(o client.Object) []string {
		return []string{podcache.NodeName(o)}
	}); err != nil {
		t.Fatal(err)
	}
	informer, err := c.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan any, 10)
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(obj any) { seen <- obj }}); err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("cache did not sync")
	}
	select {
	case obj := <-seen:
		if _, ok := obj.(*podcache.Pod); !ok {
			t.Errorf("event handlers see a %T, want a *podcache.Pod", obj)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event for the pods")
	}

	list := &corev1.PodList{}
	if err := c.List(ctx, list, client.MatchingFields{"spec.nodeName": "worker-0"}); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "web" {
		t.Fatalf("pods on worker-0 by the index: %+v, want web", list.Items)
	}
	got := list.Items[0]
	want := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", UID: got.UID, ResourceVersion: got.ResourceVersion, CreationTimestamp: got.CreationTimestamp,
			Labels: web.Labels, Annotations: map[string]string{corev1.MirrorPodAnnotationKey: "hash"}, OwnerReferences: web.OwnerReferences},
		Spec: corev1.PodSpec{NodeName: "worker-0", PriorityClassName: "system-cluster-critical", Priority: ptr.To[int32](2_000_000_000),
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: affinity}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	got.TypeMeta = metav1.TypeMeta{}
	if got.UID == "" || got.ResourceVersion == "" {
		t.Errorf("pod read from the cache lost its identity: uid %q, resourceVersion %q", got.UID, got.ResourceVersion)
	}
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("pod read from the cache:\n%+v\nwant\n%+v", got, want)
	}

	byLabel := &corev1.PodList{}
	if err := c.List(ctx, byLabel, client.InNamespace(ns), client.MatchingLabels{"app": "db"}); err != nil {
		t.Fatal(err)
	}
	if len(byLabel.Items) != 1 || byLabel.Items[0].Spec.NodeName != "worker-1" {
		t.Errorf("pods labelled app=db: %+v, want db on worker-1", byLabel.Items)
	}

	// Changing what a read returned changes nothing in the cache (the
	// cached pods share their labels and owners with each other).
	got.Labels["app"] = "changed"
	got.OwnerReferences[0].Name = "changed"
	got.Spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].Weight = 99
	again := &corev1.Pod{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(web), again); err != nil {
		t.Fatal(err)
	}
	if again.Labels["app"] != "web" || again.OwnerReferences[0].Name != "web-1" ||
		again.Spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].Weight != 10 {
		t.Errorf("a change to a pod read from the cache reached the cache: %+v", again)
	}
	if again.Spec.PriorityClassName != "system-cluster-critical" || again.Status.Phase != corev1.PodRunning {
		t.Errorf("pod got from the cache: %+v", again)
	}
}
