package testutil

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CreateNode creates the node and deletes it when the test ends.
func CreateNode(t testing.TB, c client.Client, n *corev1.Node) {
	t.Helper()
	Create(t, c, n)
	t.Cleanup(func() {
		_ = c.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name}})
	})
}

// SetNodeLabel sets the node's label key to value, or removes it when
// value is nil, retrying on conflicts.
func SetNodeLabel(t testing.TB, c client.Client, node, key string, value *string) {
	t.Helper()
	Eventually(t, 30*time.Second, 50*time.Millisecond, func() error {
		n := &corev1.Node{}
		if err := c.Get(t.Context(), client.ObjectKey{Name: node}, n); err != nil {
			return err
		}
		base := n.DeepCopy()
		if value == nil {
			delete(n.Labels, key)
		} else {
			if n.Labels == nil {
				n.Labels = map[string]string{}
			}
			n.Labels[key] = *value
		}
		return c.Patch(t.Context(), n, client.MergeFrom(base))
	})
}

// AwaitNodeLabel waits up to 30 s for the node's label key to be value
// ("" also when it is absent).
func AwaitNodeLabel(t testing.TB, c client.Client, node, key, value string) {
	t.Helper()
	Eventually(t, 30*time.Second, 50*time.Millisecond, func() error {
		if got := GetNode(t, c, node).Labels[key]; got != value {
			return fmt.Errorf("node %s: label %s is %q, want %q", node, key, got, value)
		}
		return nil
	})
}

// NodeEventReasons are the reasons, starting with prefix, of the Events
// about the node, in the order listed.
func NodeEventReasons(t testing.TB, c client.Client, node, prefix string) []string {
	t.Helper()
	var list eventsv1.EventList
	if err := c.List(t.Context(), &list, client.InNamespace(metav1.NamespaceDefault)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Kind == "Node" && e.Regarding.Name == node && strings.HasPrefix(e.Reason, prefix) {
			out = append(out, e.Reason)
		}
	}
	return out
}

// WriteFile writes content to a file name in a directory of the test's
// own and returns its path.
func WriteFile(t testing.TB, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
