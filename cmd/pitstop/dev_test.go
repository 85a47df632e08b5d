//go:build linux

package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pitstop-dev/pitstop/internal/localcluster"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// devEnv parses the export line `pitstop dev` prints into the environment
// the user would have in their second terminal, and returns the cluster's
// directory.
func devEnv(t *testing.T, exportLine string) (environ []string, dir string) {
	t.Helper()
	fields := strings.Fields(strings.TrimPrefix(exportLine, "export "))
	environ = os.Environ()
	for _, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			t.Fatalf("cannot parse %q in %q", f, exportLine)
		}
		v = strings.ReplaceAll(v, "$PATH", os.Getenv("PATH"))
		environ = append(environ, k+"="+v)
		if k == "KUBECONFIG" {
			dir = filepath.Dir(v)
		}
	}
	if dir == "" {
		t.Fatalf("no KUBECONFIG in %q", exportLine)
	}
	return environ, dir
}

// kubectl runs kubectl as the user would, with the printed environment.
func kubectl(t *testing.T, environ []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("kubectl", args...)
	cmd.Env = environ
	// exec.Command resolves kubectl from this process's PATH; resolve it from
	// the printed one instead, as the user's shell would.
	for _, kv := range environ {
		if path, ok := strings.CutPrefix(kv, "PATH="); ok {
			for _, dir := range filepath.SplitList(path) {
				if _, err := os.Stat(filepath.Join(dir, "kubectl")); err == nil {
					cmd.Path = filepath.Join(dir, "kubectl")
					break
				}
			}
		}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestDevBadFlagsExitWithOneLine checks that `pitstop dev` refuses bad
// flag values at start, before anything starts, with exit code 2 and one
// line naming the flag and the value.
func TestDevBadFlagsExitWithOneLine(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want []string // parts of the one line
	}{
		{"too few nodes", []string{"dev", "--nodes=0"}, []string{"--nodes", `"0"`}},
		{"no worker left", []string{"dev", "--nodes=3", "--control-plane-nodes=3"}, []string{"--control-plane-nodes", `"3"`}},
		{"bin dir without binaries", []string{"dev", "--bin-dir=/nonexistent"}, []string{"--bin-dir", `"/nonexistent"`, "make tools"}},
		{"an image without the real node", []string{"dev", "--load-image=dist/pitstop-image.tar"}, []string{"--load-image", `"dist/pitstop-image.tar"`, "--real-node"}},
		{"an image that is not there", []string{"dev", "--real-node", "--load-image=/nonexistent.tar"}, []string{"--load-image", `"/nonexistent.tar"`, "make image"}},
	} {
		t.Run(tc.name, func(t *testing.T) { assertUsageLine(t, tc.args, tc.want...) })
	}
}

// TestDemoComesUpAndCtrlCLeavesNothing is the demo as a user runs it: 20
// simulated nodes Ready, sample workloads Running, pitstop's CRDs installed,
// kubectl working with the printed KUBECONFIG, the dashboard at the printed
// URL; then Ctrl-C stops every process and removes the cluster's directory.
func TestDemoComesUpAndCtrlCLeavesNothing(t *testing.T) {
	dashboard := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	p := startPitstop(t, "dev", "--rolling=false", "--machines=false", "--metrics-bind-address=0", "--health-probe-bind-address=0", "--dashboard-addr="+dashboard, fmt.Sprintf("--webhook-port=%d", testutil.FreePort(t)))
	line, _ := p.awaitLine("export KUBECONFIG=", 3*time.Minute)
	environ, dir := devEnv(t, line)
	if line, _ := p.awaitLine("Dashboard: ", time.Second); !strings.HasPrefix(line, "Dashboard: http://"+dashboard+"/ ") {
		t.Errorf("dashboard line %q, want the URL of %s", line, dashboard)
	}
	fleet := awaitOK(t, "http://"+dashboard+"/api/v1/fleet")
	if !strings.Contains(fleet, `"nodes": 20,`) {
		t.Errorf("the dashboard does not count 20 nodes: %s", fleet)
	}

	nodes := strings.Split(strings.TrimSpace(kubectl(t, environ, "get", "nodes", "--no-headers")), "\n")
	if len(nodes) != 20 {
		t.Errorf("kubectl get nodes lists %d nodes, want 20", len(nodes))
	}
	for _, n := range nodes {
		if fields := strings.Fields(n); len(fields) < 2 || fields[1] != "Ready" {
			t.Errorf("node not Ready: %s", n)
		}
	}
	pods := strings.Split(strings.TrimSpace(kubectl(t, environ, "get", "pods", "-n", localcluster.SampleNamespace, "--no-headers")), "\n")
	if len(pods) < 20 {
		t.Errorf("only %d sample pods", len(pods))
	}
	for _, pod := range pods {
		if !strings.Contains(pod, " Running ") {
			t.Errorf("sample pod not Running: %s", pod)
		}
	}
	kubectl(t, environ, "get", "crd", "nodemaintenances.pitstop.dev")

	// The sample NodeMaintenance drains its node, and deleting it restores
	// the node, as the README's walkthrough shows.
	sample := filepath.Join("..", "..", "config", "samples", "nodemaintenance.yaml")
	kubectl(t, environ, "apply", "-f", sample)
	kubectl(t, environ, "wait", "--for=condition=Ready", "nodemaintenance/worker-003-kernel", "--timeout=60s")
	if out := kubectl(t, environ, "get", "nodemaintenance", "worker-003-kernel", "--no-headers"); !strings.Contains(out, "Succeeded") || !strings.Contains(out, "100") {
		t.Errorf("kubectl get nodemaintenance: %s, want phase Succeeded and progress 100", out)
	}
	left := kubectl(t, environ, "get", "pods", "-n", localcluster.SampleNamespace, "--field-selector=spec.nodeName=worker-003", "-o", "name")
	for _, pod := range strings.Fields(left) {
		if !strings.HasPrefix(pod, "pod/node-agent-") {
			t.Errorf("%s left on the drained node; only the DaemonSet's pod should stay", pod)
		}
	}
	kubectl(t, environ, "delete", "-f", sample, "--wait=true")
	if out := kubectl(t, environ, "get", "node", "worker-003", "--no-headers"); strings.Contains(out, "SchedulingDisabled") {
		t.Errorf("node still cordoned after the NodeMaintenance was deleted: %s", out)
	}

	if code := p.signal(syscall.SIGINT, 30*time.Second); code != 0 {
		t.Errorf("exit code %d after Ctrl-C, want 0", code)
	}
	if out := p.restOfStdout(); !strings.Contains(out, "nothing is left running") {
		t.Errorf("no goodbye after Ctrl-C; stdout after the export line:\n%s", out)
	}
	assertClusterGone(t, dir, true)
}

// TestDemoStopsEverythingOnSIGTERMAndSIGKILL checks the other two ways a
// demo ends: SIGTERM (a graceful stop like Ctrl-C) and SIGKILL, where
// pitstop runs no code at all and the kernel's parent-death signal must stop
// the control plane.
func TestDemoStopsEverythingOnSIGTERMAndSIGKILL(t *testing.T) {
	for _, tc := range []struct {
		sig      syscall.Signal
		wantCode int
		dirGone  bool
	}{
		{syscall.SIGTERM, 0, true},
		{syscall.SIGKILL, -1, false}, // nobody is left to remove the directory; the next start does
	} {
		t.Run(tc.sig.String(), func(t *testing.T) {
			p := startPitstop(t, "dev", "--nodes=2", "--control-plane-nodes=1", "--rolling=false", "--machines=false", "--metrics-bind-address=0", "--health-probe-bind-address=0", "--dashboard-addr=0", fmt.Sprintf("--webhook-port=%d", testutil.FreePort(t)))
			line, _ := p.awaitLine("export KUBECONFIG=", 2*time.Minute)
			_, dir := devEnv(t, line)
			t.Cleanup(func() { os.RemoveAll(dir) })
			if procs := localcluster.ProcessesUsing(dir); len(procs) != 5 {
				t.Fatalf("expected the 5 components running, found %d: %v", len(procs), procs)
			}
			if code := p.signal(tc.sig, 30*time.Second); code != tc.wantCode {
				t.Errorf("exit code %d, want %d", code, tc.wantCode)
			}
			assertClusterGone(t, dir, tc.dirGone)
		})
	}
}

// assertClusterGone waits briefly for every component of the cluster in dir
// to exit, then fails if any is left; with dirGone it also wants the
// directory removed.
func assertClusterGone(t *testing.T, dir string, dirGone bool) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, 100*time.Millisecond, func() error {
		if procs := localcluster.ProcessesUsing(dir); len(procs) > 0 {
			return errors.New("still running: " + strings.Join(procs, "; "))
		}
		return nil
	})
	if _, err := os.Stat(dir); dirGone && !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cluster directory %s still exists (err=%v)", dir, err)
	}
}
