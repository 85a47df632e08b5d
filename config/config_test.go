package config_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/pitstop-dev/pitstop/config"
)

// TestCRDsMatchTheBases checks that the embedded CRDs are every file of
// crd/bases and that kustomize lists each of them.
func TestCRDsMatchTheBases(t *testing.T) {
	crds, err := config.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("crd/bases/*.yaml")
	if len(crds) == 0 || len(crds) != len(files) {
		t.Fatalf("embedded %d CRDs, crd/bases has %d files", len(crds), len(files))
	}
	kustomization, err := os.ReadFile("crd/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !bytes.Contains(kustomization, []byte(f[len("crd/"):])) {
			t.Errorf("crd/kustomization.yaml does not list %s", f)
		}
	}
}
