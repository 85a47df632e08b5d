package nodepatch

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const rec = "pitstop.dev/maintenance-data"

func node(labels, annotations map[string]string, change ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: labels, Annotations: annotations}}
	for _, c := range change {
		c(n)
	}
	return n
}

func cordon(n *corev1.Node) {
	n.Spec.Unschedulable = true
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "pitstop.dev/drain", Effect: corev1.TaintEffectNoSchedule})
}

func TestLockedOps(t *testing.T) {
	for _, tc := range []struct {
		name     string
		from, to *corev1.Node
		lock     Lock
		want     string // the patch; "" when it cannot be locked field by field
	}{{
		name: "a new record tests the old one and sets it; the state label tests its absence",
		from: node(map[string]string{"zone": "a"}, map[string]string{rec: "r0"}),
		to:   node(map[string]string{"zone": "a", "pitstop.dev/state": "maintenance-required"}, map[string]string{rec: "r1"}),
		lock: Lock{Annotations: []string{rec}},
		want: `[{"op":"test","path":"/metadata/annotations/pitstop.dev~1maintenance-data","value":"r0"},` +
			`{"op":"add","path":"/metadata/annotations/pitstop.dev~1maintenance-data","value":"r1"},` +
			`{"op":"test","path":"/metadata/labels/pitstop.dev~1state"},` +
			`{"op":"add","path":"/metadata/labels/pitstop.dev~1state","value":"maintenance-required"}]`,
	}, {
		name: "a locked key is tested even when it does not change, and a removed key is tested before it goes",
		from: node(map[string]string{}, map[string]string{rec: "r0", "reboot~needed": "true"}),
		to:   node(map[string]string{}, map[string]string{rec: "r0"}),
		lock: Lock{Annotations: []string{rec}},
		want: `[{"op":"test","path":"/metadata/annotations/pitstop.dev~1maintenance-data","value":"r0"},` +
			`{"op":"test","path":"/metadata/annotations/reboot~0needed","value":"true"},` +
			`{"op":"remove","path":"/metadata/annotations/reboot~0needed"}]`,
	}, {
		name: "a cordon tests that the node was schedulable and untainted, as read",
		from: node(map[string]string{}, map[string]string{}),
		to:   node(map[string]string{}, map[string]string{"cordoned-before": "false"}, cordon),
		lock: Lock{Annotations: []string{"cordoned-before"}, Unschedulable: true, Taints: true},
		want: `[{"op":"test","path":"/metadata/annotations/cordoned-before"},` +
			`{"op":"add","path":"/metadata/annotations/cordoned-before","value":"false"},` +
			`{"op":"test","path":"/spec/unschedulable"},` +
			`{"op":"add","path":"/spec/unschedulable","value":true},` +
			`{"op":"test","path":"/spec/taints"},` +
			`{"op":"add","path":"/spec/taints","value":[{"key":"pitstop.dev/drain","effect":"NoSchedule"}]}]`,
	}, {
		name: "a restore tests the cordon and the taints it read before lifting them",
		from: node(map[string]string{}, map[string]string{"cordoned-before": "false"}, cordon),
		to:   node(map[string]string{}, map[string]string{}),
		lock: Lock{Annotations: []string{"cordoned-before"}, Unschedulable: true, Taints: true},
		want: `[{"op":"test","path":"/metadata/annotations/cordoned-before","value":"false"},` +
			`{"op":"remove","path":"/metadata/annotations/cordoned-before"},` +
			`{"op":"test","path":"/spec/unschedulable","value":true},` +
			`{"op":"remove","path":"/spec/unschedulable"},` +
			`{"op":"test","path":"/spec/taints","value":[{"key":"pitstop.dev/drain","effect":"NoSchedule"}]},` +
			`{"op":"remove","path":"/spec/taints"}]`,
	}, {
		name: "a node without annotations is locked as a whole",
		from: node(map[string]string{}, nil),
		to:   node(map[string]string{}, map[string]string{rec: "r1"}),
	}, {
		name: "a finalizer change is locked as a whole",
		from: node(map[string]string{}, map[string]string{rec: "r0"}),
		to:   node(map[string]string{}, map[string]string{rec: "r1"}, func(n *corev1.Node) { n.Finalizers = []string{"example.com/hold"} }),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ops, ok := lockedOps(tc.from, tc.to, tc.lock)
			if tc.want == "" {
				if ok {
					t.Fatalf("locked field by field: %v", ops)
				}
				return
			}
			if !ok {
				t.Fatal("not locked field by field")
			}
			patch, err := json.Marshal(ops)
			if err != nil {
				t.Fatal(err)
			}
			if string(patch) != tc.want {
				t.Errorf("patch\n got %s\nwant %s", patch, tc.want)
			}
			if changed(ops, tc.from) {
				t.Error("the node read fails the patch's own tests")
			}
			if !changed(ops, tc.to) {
				t.Error("the written node passes the tests of a patch that changes what it tests")
			}
		})
	}
}
