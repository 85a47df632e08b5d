package profile

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestTheEngineStartsFromItsOwnWriteUntilTheCacheShowsIt(t *testing.T) {
	node := func(rv, state string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-0", ResourceVersion: rv, Labels: map[string]string{"state": state}}}
	}
	cases := []struct {
		name      string
		cached    *corev1.Node
		want      string // the state of the node evaluated
		forgotten bool
	}{
		{"the cache is behind the write", node("99", "cached"), "written", false},
		{"the cache is far behind (shorter version)", node("9", "cached"), "written", false},
		{"the cache shows the write", node("100", "cached"), "cached", true},
		{"the cache shows a later write", node("101", "cached"), "cached", true},
		{"a version that does not parse", node("x7", "cached"), "cached", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWrittenNodes()
			w.remember(node("100", "written"))
			got := w.newest(tc.cached)
			if got.Labels["state"] != tc.want {
				t.Fatalf("evaluated the %s node, want the %s one", got.Labels["state"], tc.want)
			}
			if _, kept := w.nodes["worker-0"]; kept == tc.forgotten {
				t.Errorf("written node kept = %v, want %v", kept, !tc.forgotten)
			}
			if tc.want == "written" {
				got.Labels["state"] = "changed by the evaluation"
				if again := w.newest(tc.cached); again.Labels["state"] != "written" {
					t.Errorf("changing the node handed out changed the one kept")
				}
			}
		})
	}
	t.Run("another node", func(t *testing.T) {
		w := newWrittenNodes()
		w.remember(node("100", "written"))
		other := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1", ResourceVersion: "5"}}
		if got := w.newest(other); got != other {
			t.Errorf("another node's write was handed out")
		}
	})
	t.Run("a node that is gone", func(t *testing.T) {
		w := newWrittenNodes()
		w.remember(node("100", "written"))
		w.forget("worker-0")
		if got := w.newest(node("99", "cached")); got.Labels["state"] != "cached" {
			t.Errorf("a forgotten write was handed out")
		}
	})
}
