package image

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// created is the creation time of the test images, an arbitrary commit time.
var created = time.Unix(1795653994, 0)

// binDir holds the binaries the tests compile, shared by all tests of a run
// and removed by TestMain.
var (
	binDir   string
	binMu    sync.Mutex
	binBuilt = map[string]string{}
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "pitstop-image-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// goBuild compiles pkg the way `make image` does, static and stripped for
// linux/arch, and returns the binary's path. A package is built once per
// arch and ldflags per test run; the Go build cache makes later runs quick.
func goBuild(t *testing.T, pkg, arch, ldflags string) string {
	t.Helper()
	key := pkg + " " + arch + " " + ldflags
	binMu.Lock()
	defer binMu.Unlock()
	if path, ok := binBuilt[key]; ok {
		return path
	}
	out := filepath.Join(binDir, fmt.Sprintf("bin-%d", len(binBuilt)))
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false",
		"-ldflags", ldflags+" -s -w -buildid=", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	if output, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s for linux/%s: %v\n%s", pkg, arch, err, output)
	}
	binBuilt[key] = out
	return out
}

// helloOptions returns options for a two-platform image of the hello test
// program.
func helloOptions(t *testing.T) Options {
	t.Helper()
	return Options{
		Repository: "ghcr.io/pitstop-dev/pitstop",
		Tag:        "v1.2.3",
		Version:    "v1.2.3",
		Revision:   "ef3ab93f33ce90295ac1bafb80d9271dc2e65415",
		Created:    created,
		Binaries: []Binary{
			{Platform: v1.Platform{OS: "linux", Architecture: "amd64"}, Path: goBuild(t, "./testdata/hello", "amd64", "")},
			{Platform: v1.Platform{OS: "linux", Architecture: "arm64"}, Path: goBuild(t, "./testdata/hello", "arm64", "")},
		},
	}
}

// untar extracts the archive at path into a new temporary directory and
// returns the directory and the archive's headers in order.
func untar(t *testing.T, path string) (string, []*tar.Header) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dir := t.TempDir()
	var headers []*tar.Header
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return dir, headers
		}
		if err != nil {
			t.Fatalf("reading %s: %v", path, err)
		}
		headers = append(headers, hdr)
		target := filepath.Join(dir, filepath.FromSlash(hdr.Name))
		if hdr.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(target, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(target, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
