//go:build e2e

package image

import (
	"context"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// TestPodmanRunsTheImage loads an archive of the real pitstop binary into a
// throwaway podman store and runs it the way Kubernetes would: read-only root
// file system, no network, as the nonroot user. hack/ensure-deps.sh installs
// podman and runc, so a missing podman fails the test instead of skipping it.
func TestPodmanRunsTheImage(t *testing.T) {
	podman, err := exec.LookPath("podman")
	if err != nil {
		t.Fatalf("podman is not installed (make deps installs it): %v", err)
	}
	const (
		version = "v0.0.0-imagetest"
		commit  = "0123456789abcdef0123456789abcdef01234567"
	)
	ldflags := "-X github.com/pitstop-dev/pitstop/internal/version.Version=" + version +
		" -X github.com/pitstop-dev/pitstop/internal/version.Commit=" + commit
	platform := v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	binary := goBuild(t, "github.com/pitstop-dev/pitstop/cmd/pitstop", runtime.GOARCH, ldflags)
	ref := "ghcr.io/pitstop-dev/pitstop:imagetest"

	// The archive comes from hack/image, as in `make image`; built without
	// the race detector it also compresses the 80 MB binary ten times faster.
	archive := filepath.Join(t.TempDir(), "pitstop-image.tar")
	packer := goBuild(t, "github.com/pitstop-dev/pitstop/hack/image", runtime.GOARCH, "")
	cmd := exec.Command(packer, "-out", archive, "-binary", platform.String()+"="+binary,
		"-repo", "ghcr.io/pitstop-dev/pitstop", "-tag", "imagetest",
		"-version", version, "-revision", commit, "-created", strconv.FormatInt(created.Unix(), 10))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/image: %v\n%s", err, out)
	}

	// A store of its own keeps the host's images untouched, and vfs needs no
	// kernel overlay support. runc because crun refuses hybrid cgroup hosts.
	store := t.TempDir()
	global := []string{
		"--root", filepath.Join(store, "root"),
		"--runroot", filepath.Join(store, "run"),
		"--tmpdir", filepath.Join(store, "tmp"),
		"--storage-driver", "vfs",
		"--cgroup-manager", "cgroupfs",
		"--events-backend", "file",
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, podman, append(global, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	t.Cleanup(func() {
		// Removing the image frees what the store mounted, so the temporary
		// directory can go.
		out, err := exec.Command(podman, append(global, "rmi", "--all", "--force")...).CombinedOutput()
		if err != nil {
			t.Logf("podman rmi: %v\n%s", err, out)
		}
	})

	if out := run("load", "--input", archive); !strings.Contains(out, "Loaded image: "+ref) {
		t.Fatalf("podman load did not name the image %s:\n%s", ref, out)
	}
	out := run("run", "--rm", "--runtime", "runc",
		// The defaults exceed this host's hard limits.
		"--ulimit", "nofile=20000:20000", "--ulimit", "nproc=4096:4096",
		"--read-only", "--network", "none", "--user", "65532",
		ref, "version")
	if want := "pitstop " + version + " (commit " + commit; !strings.Contains(out, want) || !strings.Contains(out, platform.String()) {
		t.Errorf("pitstop version printed %q, want %q and %s", out, want, platform)
	}
}
