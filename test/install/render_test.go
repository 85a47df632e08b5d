package install

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/pitstop-dev/pitstop/internal/localcluster"
)

// namespace is where the tests install pitstop, as docs/install.md does.
const namespace = "pitstop-system"

// repoPath is a path in the checkout.
func repoPath(t *testing.T, parts ...string) string {
	t.Helper()
	root, ok := localcluster.RepoRoot()
	if !ok {
		t.Fatal("not in a pitstop checkout")
	}
	return filepath.Join(append([]string{root}, parts...)...)
}

// tool is a binary that `make tools` builds into bin/.
func tool(t *testing.T, name string) string {
	t.Helper()
	path := filepath.Join(localcluster.DefaultBinDir(), name)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s is missing: `make tools` builds it (%v)", name, err)
	}
	return path
}

// helm runs bin/helm and returns its standard output, or its error with
// what it printed.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(tool(t, "helm"), args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// render runs `helm template` on the chart with the values given as --set
// pairs, and decodes every object.
func render(t *testing.T, set ...string) []*unstructured.Unstructured {
	t.Helper()
	args := []string{"template", "pitstop", repoPath(t, "charts", "pitstop"), "--namespace", namespace, "--include-crds"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := helm(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, out)
}

// decode reads a multi-document YAML stream into objects, skipping empty
// documents.
func decode(t *testing.T, stream string) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(stream), 4096)
	for {
		obj := &unstructured.Unstructured{}
		err := dec.Decode(&obj.Object)
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatalf("decoding the rendered chart: %v", err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		objs = append(objs, obj)
	}
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
