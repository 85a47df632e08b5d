package check

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

func TestKeyValue(t *testing.T) {
	kv := func(key string, value *string) *pitstopv1alpha1.KeyValueCheck {
		return &pitstopv1alpha1.KeyValueCheck{Key: key, Value: value}
	}
	cl := cluster(node("n1", "team", "a"), node("n2", "team", "b", "patch", "now"))
	annotated := node("n3")
	annotated.Annotations["example.com/ok"] = "yes"
	on := func(n *corev1.Node) Context { return Context{Node: n, Cluster: cl, Now: noon} }

	runCases(t, map[string]evalCase{
		"hasLabel passes when the label is set and no value is asked for": {
			inst: pitstopv1alpha1.CheckInstance{HasLabel: kv("team", nil)},
			ctx:  on(cl.nodeOf("n1")),
			want: Result{Passed: true, Reason: `label team is "a"`},
		},
		"hasLabel passes when the label has the value": {
			inst: pitstopv1alpha1.CheckInstance{HasLabel: kv("team", ptr.To("a"))},
			ctx:  on(cl.nodeOf("n1")),
			want: Result{Passed: true, Reason: `label team is "a"`},
		},
		"hasLabel fails when the label has another value": {
			inst: pitstopv1alpha1.CheckInstance{HasLabel: kv("team", ptr.To("a"))},
			ctx:  on(cl.nodeOf("n2")),
			want: Result{Reason: `label team is "b", want "a"`},
		},
		"hasLabel fails when the label is missing": {
			inst: pitstopv1alpha1.CheckInstance{HasLabel: kv("patch", nil)},
			ctx:  on(cl.nodeOf("n1")),
			want: Result{Reason: "label patch is not set"},
		},
		"hasLabel with an empty value wants the label set to the empty string": {
			inst: pitstopv1alpha1.CheckInstance{HasLabel: kv("team", ptr.To(""))},
			ctx:  on(cl.nodeOf("n1")),
			want: Result{Reason: `label team is "a", want ""`},
		},
		"hasAnnotation passes when the annotation has the value": {
			inst: pitstopv1alpha1.CheckInstance{HasAnnotation: kv("example.com/ok", ptr.To("yes"))},
			ctx:  on(&annotated),
			want: Result{Passed: true, Reason: `annotation example.com/ok is "yes"`},
		},
		"hasAnnotation does not read labels": {
			inst: pitstopv1alpha1.CheckInstance{HasAnnotation: kv("team", nil)},
			ctx:  on(cl.nodeOf("n1")),
			want: Result{Reason: "annotation team is not set"},
		},
		"anyLabel passes when another node has the label": {
			inst: pitstopv1alpha1.CheckInstance{AnyLabel: kv("patch", nil)},
			ctx:  on(cl.nodeOf("n1")),
			want: Result{Passed: true, Reason: "node n2 has label patch"},
		},
		"anyLabel passes when a node has the label with the value": {
			inst: pitstopv1alpha1.CheckInstance{AnyLabel: kv("team", ptr.To("b"))},
			ctx:  on(cl.nodeOf("n1")),
			want: Result{Passed: true, Reason: "node n2 has label team=b"},
		},
		"anyLabel fails when no node has the value": {
			inst: pitstopv1alpha1.CheckInstance{AnyLabel: kv("team", ptr.To("c"))},
			ctx:  on(cl.nodeOf("n1")),
			want: Result{Reason: "no node has label team=c"},
		},
	})
}

func TestCondition(t *testing.T) {
	ready := node("ready")
	ready.Status.Conditions = []corev1.NodeCondition{
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue},
	}
	silent := node("silent")
	cond := func(typ, status string) pitstopv1alpha1.CheckInstance {
		return pitstopv1alpha1.CheckInstance{Condition: &pitstopv1alpha1.ConditionCheck{Type: typ, Status: status}}
	}
	runCases(t, map[string]evalCase{
		"passes when the condition has the status": {
			inst: cond("Ready", "True"),
			ctx:  Context{Node: &ready, Now: noon},
			want: Result{Passed: true, Reason: "condition Ready is True"},
		},
		"fails when the condition has another status": {
			inst: cond("MemoryPressure", "True"),
			ctx:  Context{Node: &ready, Now: noon},
			want: Result{Reason: "condition MemoryPressure is False, want True"},
		},
		"reads a condition the node does not report as Unknown": {
			inst: cond("Ready", "Unknown"),
			ctx:  Context{Node: &silent, Now: noon},
			want: Result{Passed: true, Reason: "condition Ready is not reported (Unknown)"},
		},
		"fails when a condition the node does not report is wanted True": {
			inst: cond("example.com/Patched", "True"),
			ctx:  Context{Node: &silent, Now: noon},
			want: Result{Reason: "condition example.com/Patched is not reported (Unknown), want True"},
		},
	})
}

func TestNodeCount(t *testing.T) {
	cl := cluster(node("n1"), node("n2"), node("n3"))
	count := func(n int32) pitstopv1alpha1.CheckInstance {
		return pitstopv1alpha1.CheckInstance{NodeCount: &pitstopv1alpha1.NodeCountCheck{Count: n}}
	}
	runCases(t, map[string]evalCase{
		"passes when the cluster has exactly count nodes": {
			inst: count(3), ctx: Context{Node: cl.nodeOf("n1"), Cluster: cl, Now: noon},
			want: Result{Passed: true, Reason: "3 nodes, at least 3 wanted"},
		},
		"fails when the cluster has fewer nodes": {
			inst: count(4), ctx: Context{Node: cl.nodeOf("n1"), Cluster: cl, Now: noon},
			want: Result{Reason: "3 nodes, at least 4 wanted"},
		},
		"passes always with a count of zero": {
			inst: count(0), ctx: Context{Node: cl.nodeOf("n1"), Cluster: cluster(), Now: noon},
			want: Result{Passed: true, Reason: "0 nodes, at least 0 wanted"},
		},
	})
}
