package localcluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// checkPlatform lets Start run: Linux has everything the cluster needs.
func checkPlatform() error { return nil }

// startProcess runs bin with args in its own process group, its output
// appended to logDir/name.log. Pdeathsig kills the child if this process
// dies without running Stop (a test binary killed by its timeout, kill -9):
// nothing is left behind even then.
func startProcess(name, bin string, args []string, logDir string) (*process, error) {
	logPath := filepath.Join(logDir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, bin: bin, args: args, logDir: logDir, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// stop sends SIGTERM to the process group, waits up to grace, then sends
// SIGKILL to whatever is left of the group and waits until the child is
// reaped (a zombie still answers kill -0). With no grace it sends SIGKILL
// only. The first call does this; a later one waits for it to finish, so
// the cluster's Stop neither signals a group reaped long ago nor returns
// before a component StopComponent is stopping has exited.
func (p *process) stop(grace time.Duration) {
	p.stopOnce.Do(func() {
		pgid := p.cmd.Process.Pid
		if grace > 0 {
			_ = syscall.Kill(-pgid, syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(grace):
			}
		}
		// The group may hold grandchildren even after the leader exited.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	})
}

// pidAlive reports whether a process with this pid exists (and is not a
// zombie we could still reap: signal 0 succeeds for zombies too, so the
// caller only uses this for processes that are not our children).
func pidAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// ProcessesUsing returns "pid: command line" for every process on the
// machine whose command line mentions path. Every component gets files under
// its cluster's directory as arguments, so this finds leftovers of a cluster
// even after their parent is gone.
func ProcessesUsing(path string) []string {
	entries, _ := os.ReadDir("/proc")
	var found []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte(path)) {
			continue
		}
		if isZombie(pid) {
			continue
		}
		found = append(found, fmt.Sprintf("%d: %s", pid, bytes.ReplaceAll(bytes.TrimRight(cmdline, "\x00"), []byte{0}, []byte{' '})))
	}
	return found
}

// isZombie reports whether pid has exited and only waits to be reaped.
func isZombie(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return true // gone already
	}
	// The state follows the command name, which is in parentheses.
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}
