package localcluster

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// process is one child of the cluster: a control-plane component or kwok.
// It keeps what it was started with, so that StartComponent can run it again.
type process struct {
	name    string
	bin     string
	args    []string
	logDir  string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed once the process has exited and been reaped
	err     error         // exit status, valid after done is closed

	stopOnce sync.Once   // only the first stop signals; later ones wait for it
	halted   atomic.Bool // stopped on purpose: its exit is no failure
}

// restart starts the same binary with the same arguments again, appending
// to the same log after a line that marks the restart.
func (p *process) restart() (*process, error) {
	if f, err := os.OpenFile(p.logPath, os.O_WRONLY|os.O_APPEND, 0); err == nil {
		fmt.Fprintf(f, "--- localcluster: starting %s again at %s ---\n", p.name, time.Now().Format(time.RFC3339Nano))
		f.Close()
	}
	return startProcess(p.name, p.bin, p.args, p.logDir)
}

// exited reports whether the process has ended, and how.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// failure describes an early exit of the process with the end of its log,
// which is where the reason is.
func (p *process) failure() error {
	return fmt.Errorf("%s exited early (%v); last lines of %s:\n%s", p.name, p.err, p.logPath, tail(p.logPath, 15))
}

// tail returns the last n lines of a file, or a note that it cannot be read.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// freePorts returns n distinct TCP ports on 127.0.0.1 that were free a moment
// ago.
func freePorts(n int) ([]int, error) { return freePortsOn("127.0.0.1", n) }

// freePortsOn returns n distinct TCP ports on host that were free a moment
// ago. The listeners are held until all are chosen so no port repeats.
func freePortsOn(host string, n int) ([]int, error) {
	ports := make([]int, 0, n)
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func itoa(i int) string { return strconv.Itoa(i) }
