package install

import (
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/pitstop-dev/pitstop/internal/localcluster"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// namespace is where the tests install pitstop, as docs/install.md does.
const namespace = testutil.ChartNamespace

// repoPath is a path in the checkout.
func repoPath(t *testing.T, parts ...string) string {
	t.Helper()
	root, ok := localcluster.RepoRoot()
	if !ok {
		t.Fatal("not in a pitstop checkout")
	}
	return filepath.Join(append([]string{root}, parts...)...)
}

// decode reads a multi-document YAML stream into objects.
func decode(t *testing.T, stream string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := testutil.DecodeObjects(stream)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// find returns the object of that kind, namespace and name, or nil.
func find(objs []*unstructured.Unstructured, kind, namespace, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetNamespace() == namespace && o.GetName() == name {
			return o
		}
	}
	return nil
}

// ofKind returns the objects of one kind.
func ofKind(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}
