package localcluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"
)

// Components are the names StopComponent, KillComponent and StartComponent
// accept: the control plane and kwok, which plays every simulated kubelet.
var Components = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}

// componentStopGrace is how long StopComponent lets a component shut down
// after SIGTERM: etcd and the API server take several seconds.
const componentStopGrace = 10 * time.Second

// errClusterStopped is returned by what cannot run once Stop has begun.
var errClusterStopped = errors.New("the local cluster is stopped")

// StopComponent stops one component as an administrator would: SIGTERM to
// its process group, up to 10 s to exit, then SIGKILL. It returns once the
// process is reaped, and the component stays stopped until StartComponent;
// meanwhile its exit is not reported as a failure. Stopping a component that
// is already stopped on purpose does nothing; one that exited on its own
// returns that failure.
func (c *Cluster) StopComponent(name string) error {
	return c.halt(name, componentStopGrace)
}

// KillComponent kills one component as a crash or the OOM killer would:
// SIGKILL to its process group, with no chance to shut down cleanly. It
// returns once the process is reaped; otherwise it behaves as StopComponent.
func (c *Cluster) KillComponent(name string) error {
	return c.halt(name, 0)
}

// halt stops the named component, with grace between SIGTERM and SIGKILL.
func (c *Cluster) halt(name string, grace time.Duration) error {
	c.mu.Lock()
	_, p, err := c.component(name)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if done, _ := p.exited(); done && !p.halted.Load() {
		return p.failure()
	}
	// Marked first, so that no poll in between takes the exit for a crash.
	p.halted.Store(true)
	p.stop(grace)
	return nil
}

// StartComponent starts a stopped component again, with the same binary,
// arguments and ports, appending to its log. For kube-apiserver it returns
// once /readyz answers ok; for etcd, once etcd's client port answers and,
// if the API server runs, /readyz answers ok again. The controller manager,
// the scheduler and kwok are only started: callers wait for the effect they
// need (a pod scheduled, a node's heartbeat). It fails for an unknown name,
// for a component that is still running and once Stop has begun.
func (c *Cluster) StartComponent(ctx context.Context, name string) error {
	if err := c.restart(name); err != nil {
		return err
	}
	switch name {
	case "kube-apiserver":
		return c.awaitAPIServer(ctx)
	case "etcd":
		return c.awaitEtcd(ctx)
	}
	return nil
}

// restart runs the named component again in place of its exited process.
// It holds the lock while it starts the process, so Stop, which takes the
// list under the same lock, either sees the new process or forbids it.
func (c *Cluster) restart(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	i, old, err := c.component(name)
	if err != nil {
		return err
	}
	if done, _ := old.exited(); !done {
		return fmt.Errorf("%s is still running (pid %d)", name, old.cmd.Process.Pid)
	}
	p, err := old.restart()
	if err != nil {
		return err
	}
	c.procs[i] = p
	return nil
}

// superviseComponents starts, until Stop, a loop that runs a component
// again a second after it exits on its own (see Options.RestartExited).
func (c *Cluster) superviseComponents() {
	ctx, cancel := context.WithCancel(context.Background())
	c.mu.Lock()
	c.endWatch = cancel
	c.restarts = map[string]int{}
	c.mu.Unlock()
	go func() {
		ticker := time.NewTicker(time.Second)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
			for _, name := range c.crashed() {
				if c.restart(name) == nil {
					c.mu.Lock()
					c.restarts[name]++
					c.mu.Unlock()
				}
			}
		}
	}()
}

// crashed names the components that exited without being stopped on purpose.
func (c *Cluster) crashed() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var names []string
	for _, p := range c.procs {
		if done, _ := p.exited(); done && !p.halted.Load() && slices.Contains(Components, p.name) {
			names = append(names, p.name)
		}
	}
	return names
}

// Restarts counts, per component, the times it exited on its own and was
// started again (Options.RestartExited).
func (c *Cluster) Restarts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.restarts)
}

// component returns the process of a component by name, and its index in
// c.procs. The caller holds c.mu.
func (c *Cluster) component(name string) (int, *process, error) {
	if c.stopping {
		return 0, nil, fmt.Errorf("component %s: %w", name, errClusterStopped)
	}
	if !slices.Contains(Components, name) {
		return 0, nil, fmt.Errorf("unknown component %q, want one of %v", name, Components)
	}
	i := slices.IndexFunc(c.procs, func(p *process) bool { return p.name == name })
	if i < 0 {
		return 0, nil, fmt.Errorf("component %s was never started", name)
	}
	return i, c.procs[i], nil
}

// awaitEtcd waits until etcd answers on its client port, then, if the API
// server runs, until the API server is ready again: its storage client
// reconnects on its own, with a backoff.
func (c *Cluster) awaitEtcd(ctx context.Context) error {
	client := &http.Client{Timeout: time.Second}
	err := c.poll(ctx, 50*time.Millisecond, "etcd to answer", func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.etcdURL+"/health", nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return err
	}
	c.mu.Lock()
	_, apiserver, err := c.component("kube-apiserver")
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if done, _ := apiserver.exited(); done {
		return nil
	}
	return c.awaitAPIServer(ctx)
}
