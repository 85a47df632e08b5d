package localcluster

import (
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestWatchdogKillsTheNodesProcesses checks the guard for an owner that dies
// without Stop (Ctrl-C, a test timeout): once the pipe from the cluster's
// process closes, the watchdog kills what runs in the node's cgroups, as
// containerd's shims and the pods' containers do.
func TestWatchdogKillsTheNodesProcesses(t *testing.T) {
	// The lock keeps a real node's start in another test binary from sweeping
	// the cgroup away as a leftover.
	lock, err := lockRealNode(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Close() })
	name := dirPrefix + "watchdog-test"
	if err := makeCgroups(name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := removeCgroups(name, 5*time.Second); err != nil {
			t.Error(err)
		}
	})
	roots, _, err := cgroupRoots()
	if err != nil {
		t.Fatal(err)
	}
	// A process that stands for a container: it joins the node's cgroup
	// before it execs, as runc puts containers there.
	sleeper := exec.Command("/bin/sh", "-c", `echo $$ > "$1/cgroup.procs" && exec sleep 300`, "sh", filepath.Join(roots[0], name, "shims"))
	sleeper.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- sleeper.Wait() }()
	t.Cleanup(func() { _ = sleeper.Process.Kill() })

	watchdog, pipe, err := startWatchdog(name)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		t.Fatalf("the process ended before the pipe closed: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	pipe.Close()
	select {
	case err := <-exited:
		if status, ok := err.(*exec.ExitError); !ok || status.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Errorf("the process ended with %v, want SIGKILL", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the process still runs 5s after the pipe closed")
	}
	if err := watchdog.Wait(); err != nil {
		t.Errorf("the watchdog failed: %v", err)
	}
}
