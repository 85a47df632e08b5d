//go:build !linux

package localcluster

import (
	"errors"
	"fmt"
	"runtime"
	"time"
)

// errNotLinux is what Start returns off Linux. The cluster relies on what
// only Linux offers: Pdeathsig, so that no component outlives a killed
// test, and /proc, to find leftovers. The package still builds here so that
// what only needs DefaultBinDir (testutil's envtest) builds too.
var errNotLinux = fmt.Errorf("the local cluster runs only on Linux, not %s: %w", runtime.GOOS, errors.ErrUnsupported)

// checkPlatform makes Start fail before it creates anything.
func checkPlatform() error { return errNotLinux }

// startProcess is never reached: Start fails first.
func startProcess(name, _ string, _ []string, _ string) (*process, error) {
	return nil, fmt.Errorf("starting %s: %w", name, errNotLinux)
}

// stop kills the process once; no process is started off Linux.
func (p *process) stop(time.Duration) {
	p.stopOnce.Do(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
}

// pidAlive cannot tell off Linux, so it says yes: a cluster directory is
// removed only when its owner is known to be gone.
func pidAlive(int) bool { return true }

// ProcessesUsing finds nothing off Linux, where no local cluster runs.
func ProcessesUsing(string) []string { return nil }
