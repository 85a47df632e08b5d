package profile

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pitstop-dev/pitstop/internal/engine"
)

func TestFieldLockedPatch(t *testing.T) {
	node := func(labels, annotations map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: labels, Annotations: annotations}}
	}
	rec := engine.AnnotationData
	for _, tc := range []struct {
		name     string
		from, to *corev1.Node
		want     string // the patch; "" when it cannot be locked field by field
	}{{
		name: "a new record tests the old one and sets it; the state label tests its absence",
		from: node(map[string]string{"zone": "a"}, map[string]string{rec: "r0"}),
		to:   node(map[string]string{"zone": "a", engine.LabelState: "maintenance-required"}, map[string]string{rec: "r1"}),
		want: `[{"op":"test","path":"/metadata/annotations/pitstop.dev~1maintenance-data","value":"r0"},` +
			`{"op":"add","path":"/metadata/annotations/pitstop.dev~1maintenance-data","value":"r1"},` +
			`{"op":"test","path":"/metadata/labels/pitstop.dev~1state"},` +
			`{"op":"add","path":"/metadata/labels/pitstop.dev~1state","value":"maintenance-required"}]`,
	}, {
		name: "the record is tested even when only a trigger's annotation changes, and a removed key is tested before it goes",
		from: node(map[string]string{}, map[string]string{rec: "r0", "reboot~needed": "true"}),
		to:   node(map[string]string{}, map[string]string{rec: "r0"}),
		want: `[{"op":"test","path":"/metadata/annotations/pitstop.dev~1maintenance-data","value":"r0"},` +
			`{"op":"test","path":"/metadata/annotations/reboot~0needed","value":"true"},` +
			`{"op":"remove","path":"/metadata/annotations/reboot~0needed"}]`,
	}, {
		name: "a node without a record yet tests that it has none",
		from: node(map[string]string{}, map[string]string{}),
		to:   node(map[string]string{}, map[string]string{rec: "r1"}),
		want: `[{"op":"test","path":"/metadata/annotations/pitstop.dev~1maintenance-data"},` +
			`{"op":"add","path":"/metadata/annotations/pitstop.dev~1maintenance-data","value":"r1"}]`,
	}, {
		name: "a node without annotations is locked as a whole",
		from: node(map[string]string{}, nil),
		to:   node(map[string]string{}, map[string]string{rec: "r1"}),
	}, {
		name: "a finalizer change is locked as a whole",
		from: node(map[string]string{}, map[string]string{rec: "r0"}),
		to: func() *corev1.Node {
			n := node(map[string]string{}, map[string]string{rec: "r1"})
			n.Finalizers = []string{"example.com/hold"}
			return n
		}(),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			patch, ok := fieldLockedPatch(tc.from, tc.to)
			if tc.want == "" {
				if ok {
					t.Fatalf("locked field by field: %s", patch)
				}
				return
			}
			if !ok {
				t.Fatal("not locked field by field")
			}
			if string(patch) != tc.want {
				t.Errorf("patch\n got %s\nwant %s", patch, tc.want)
			}
			var ops []map[string]any
			if err := json.Unmarshal(patch, &ops); err != nil {
				t.Fatal(err)
			}
		})
	}
}
