package check

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

// pod builds a pod with a preferred node affinity expression, when key is
// set.
func pod(name, key string, op corev1.NodeSelectorOperator, values ...string) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if key == "" {
		return p
	}
	p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
			Weight: 1,
			Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: "kubernetes.io/arch", Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
				{Key: key, Operator: op, Values: values},
			}},
		}},
	}}
	return p
}

func TestAffinity(t *testing.T) {
	const sapKey, pitstopKey = "cloud.sap/maintenance-state", "pitstop.dev/state"
	critical := pod("critical", sapKey, corev1.NodeSelectorOpIn, "operational")
	criticalPitstop := pod("critical-pitstop", pitstopKey, corev1.NodeSelectorOpIn, "operational")
	plain := pod("plain", "", "")
	twoValues := pod("two-values", sapKey, corev1.NodeSelectorOpIn, "operational", "maintenance-required")
	notIn := pod("not-in", sapKey, corev1.NodeSelectorOpNotIn, "in-maintenance")
	completed := pod("completed", sapKey, corev1.NodeSelectorOpIn, "operational")
	completed.Status.Phase = corev1.PodSucceeded

	// Profile os: n1 and n2 wait in maintenance-required, n3 and n4 are
	// operational; n5 waits for profile fw only.
	fresh := func() *fakeCluster {
		return cluster(node("n1"), node("n2"), node("n3"), node("n4"), node("n5")).
			with("os", required, "n1", "n2").with("os", operational, "n3", "n4").
			with("fw", required, "n5")
	}
	affinity := func(minOperational int32) pitstopv1alpha1.CheckInstance {
		return pitstopv1alpha1.CheckInstance{Affinity: &pitstopv1alpha1.AffinityCheck{MinOperational: minOperational}}
	}
	on := func(cl *fakeCluster, name string) Context {
		return Context{Node: cl.nodeOf(name), Profile: "os", State: required, Cluster: cl, Now: noon}
	}
	runCases(t, map[string]evalCase{
		"passes for a node none of whose pods prefer operational nodes": {
			inst: affinity(0), ctx: on(fresh().withPods("n1", plain).withPods("n2", plain), "n1"),
			want: Result{Passed: true, Reason: "no pod on the node prefers operational nodes"},
		},
		"fails for a node with such pods while another waiting node has none": {
			inst: affinity(0), ctx: on(fresh().withPods("n1", plain, critical).withPods("n2", plain), "n1"),
			want: Result{Reason: "pods prefer operational nodes here; waiting nodes without such pods go first: n2"},
		},
		"reads pitstop's state label like the seed's": {
			inst: affinity(0), ctx: on(fresh().withPods("n1", criticalPitstop), "n1"),
			want: Result{Reason: "pods prefer operational nodes here; waiting nodes without such pods go first: n2"},
		},
		"passes for every node once every waiting node has such pods": {
			inst: affinity(0), ctx: on(fresh().withPods("n1", critical).withPods("n2", criticalPitstop), "n1"),
			want: Result{Passed: true, Reason: "pods prefer operational nodes here, and on every other node waiting"},
		},
		"ignores nodes of the profile that are not waiting, and nodes waiting for another profile": {
			inst: affinity(0), ctx: on(fresh().withPods("n1", critical).withPods("n2", critical), "n1"),
			want: Result{Passed: true, Reason: "pods prefer operational nodes here, and on every other node waiting"},
		},
		"only counts the exact expression In [operational]": {
			inst: affinity(0), ctx: on(fresh().withPods("n1", twoValues, notIn).withPods("n2", plain), "n1"),
			want: Result{Passed: true, Reason: "no pod on the node prefers operational nodes"},
		},
		"names at most three of the nodes that go first": {
			inst: affinity(0),
			ctx: on(cluster(node("n1"), node("a"), node("b"), node("c"), node("d"), node("e")).
				with("os", required, "n1", "e", "d", "c", "b", "a").withPods("n1", critical), "n1"),
			want: Result{Reason: "pods prefer operational nodes here; waiting nodes without such pods go first: a, b, c and 2 more"},
		},
		"ignores completed pods": {
			inst: affinity(0), ctx: on(fresh().withPods("n1", completed).withPods("n2", plain), "n1"),
			want: Result{Passed: true, Reason: "no pod on the node prefers operational nodes"},
		},
		"passes while at least minOperational nodes are operational, as the seed's": {
			inst: affinity(2), ctx: on(fresh().withPods("n1", critical), "n1"),
			want: Result{Passed: true, Reason: "2 nodes operational, at least minOperational 2"},
		},
		"orders nodes once fewer than minOperational nodes are operational": {
			inst: affinity(3), ctx: on(fresh().withPods("n1", critical), "n1"),
			want: Result{Reason: "pods prefer operational nodes here; waiting nodes without such pods go first: n2"},
		},
	})
}

func TestAffinityRefusesOtherStates(t *testing.T) {
	c, err := New(pitstopv1alpha1.CheckInstance{Affinity: &pitstopv1alpha1.AffinityCheck{}}, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	cl := cluster(node("n1")).with("os", operational, "n1")
	_, err = c.Evaluate(context.Background(), Context{Node: cl.nodeOf("n1"), Profile: "os", State: operational, Cluster: cl, Now: noon})
	if err == nil || !strings.Contains(err.Error(), "affinity orders nodes in maintenance-required only, node n1 is operational") {
		t.Errorf("got error %v", err)
	}
}
