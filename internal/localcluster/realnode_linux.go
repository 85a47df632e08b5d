package localcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// prepareRealNode takes the machine's real-node lock, removes what a cluster
// that died without stopping left of its real node, and makes the bridge the
// API server then listens on.
func (c *Cluster) prepareRealNode(ctx context.Context) error {
	lock, err := lockRealNode(ctx)
	if err != nil {
		return err
	}
	c.realNode = &realNode{
		paths:  newRealNodePaths(c.Dir),
		cgroup: filepath.Base(c.Dir),
		lock:   lock,
	}
	if err := sweepRealNodeLeftovers(c.opts.BinDir); err != nil {
		return fmt.Errorf("removing what an earlier real node left: %w", err)
	}
	return createBridge()
}

// sweepRealNodeLeftovers removes what a cluster whose process died left of
// its real node. It runs under the real-node lock, so none of it belongs to a
// live cluster: mounts under cluster directories, cgroups named after them
// (killing what still runs there), iptables chains and the bridge.
func sweepRealNodeLeftovers(binDir string) error {
	var errs []error
	if names, err := staleCgroups(); err != nil {
		errs = append(errs, err)
	} else {
		for _, name := range names {
			errs = append(errs, removeCgroups(name, 5*time.Second))
		}
	}
	errs = append(errs, unmountWhere(func(point string) bool { return strings.Contains(point, "/"+dirPrefix) }))
	if _, err := net.InterfaceByName(realNodeBridge); err == nil {
		errs = append(errs, removeIPTablesRules(binDir), deleteBridge())
	}
	return errors.Join(errs...)
}

// startRealNode starts containerd, loads the pause image, and starts the
// kubelet and kube-proxy. The node joins in the background; Start waits for
// it with the other nodes.
func (c *Cluster) startRealNode(ctx context.Context) error {
	n := c.realNode
	n.ctr = []string{"--address", n.paths.containerdSock, "--namespace", "k8s.io"}
	logDir := filepath.Join(c.Dir, "logs")
	if err := c.writeRealNodeConfigs(); err != nil {
		return err
	}
	if err := makeCgroups(n.cgroup); err != nil {
		return err
	}
	watchdog, pipe, err := startWatchdog(n.cgroup)
	if err != nil {
		return err
	}
	n.watchdog, n.pipe = watchdog, pipe

	// The pause image compiles while containerd starts.
	pauseArchive := make(chan error, 1)
	go func() { pauseArchive <- buildPauseImage(ctx, n.paths.dir) }()
	if err := c.startContainerd(ctx, logDir); err != nil {
		return err
	}
	if err := <-pauseArchive; err != nil {
		return err
	}
	if err := c.LoadImage(ctx, filepath.Join(n.paths.dir, "pause.tar")); err != nil {
		return err
	}
	if err := c.start("kubelet", kubeletArgs(n.paths, c.KubeconfigPath), logDir); err != nil {
		return err
	}
	return c.start("kube-proxy", kubeProxyArgs(n.paths), logDir)
}

// writeRealNodeConfigs writes the configuration of containerd, the CNI
// plugins, the kubelet and kube-proxy, on ports picked free.
func (c *Cluster) writeRealNodeConfigs() error {
	p := c.realNode.paths
	// Unix socket paths are limited to 108 bytes.
	if len(p.containerdSock)+len(".ttrpc") > 100 {
		return fmt.Errorf("WorkDir %q is too long for containerd's socket path %s", c.opts.WorkDir, p.containerdSock)
	}
	for _, dir := range []string{p.dir, p.cniConfDir, p.kubeletRoot} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
	}
	kubeletPort, err := freePortsOn(realNodeIP, 1)
	if err != nil {
		return err
	}
	local, err := freePorts(3)
	if err != nil {
		return err
	}
	files := map[string]string{
		p.containerdConf: containerdConfig(p, c.realNode.cgroup),
		filepath.Join(p.cniConfDir, "10-pitstop-localcluster.conflist"): cniConfig(filepath.Join(p.dir, "cni", "ipam")),
		p.kubeletConf:   kubeletConfig(p, c.realNode.cgroup, kubeletPort[0], local[0], c.opts.PodsPerNode),
		p.kubeProxyConf: kubeProxyConfig(c.KubeconfigPath, local[1], local[2]),
	}
	for path, content := range files {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// startContainerd starts the node's containerd and waits until it listens.
func (c *Cluster) startContainerd(ctx context.Context, logDir string) error {
	sock := c.realNode.paths.containerdSock
	containerd, err := exec.LookPath("containerd")
	if err != nil {
		return err
	}
	if err := c.startBinary("containerd", containerd, containerdArgs(c.realNode.paths), logDir); err != nil {
		return err
	}
	return c.poll(ctx, 50*time.Millisecond, "containerd to listen", func(context.Context) (bool, error) {
		conn, err := net.Dial("unix", sock)
		if err == nil {
			conn.Close()
		}
		return err == nil, nil
	})
}

// stopRealNode removes everything the real node made, once its kubelet,
// kube-proxy and containerd have stopped: the pods' processes and
// containerd's shims, the mounts under the cluster's directory, the cgroups,
// the iptables chains and the bridge. Then it releases the machine's lock.
func (c *Cluster) stopRealNode() error {
	n := c.realNode
	var errs []error
	if n.watchdog != nil {
		// Stop does the watchdog's work itself, and checks it.
		_ = n.watchdog.Process.Kill()
		_ = n.watchdog.Wait()
		n.pipe.Close()
	}
	errs = append(errs, removeCgroups(n.cgroup, 10*time.Second))
	removeShimSockets(n.paths.containerdState)
	errs = append(errs, unmountUnder(c.Dir), removeIPTablesRules(c.opts.BinDir), deleteBridge())
	n.lock.Close()
	return errors.Join(errs...)
}

// removeIPTablesRules removes the chains kube-proxy and the kubelet add:
// kube-proxy removes its own with --cleanup; the kubelet's (a firewall chain
// and canaries other components watch) are removed by name.
func removeIPTablesRules(binDir string) error {
	var errs []error
	if out, err := exec.Command(filepath.Join(binDir, "kube-proxy"), "--cleanup").CombinedOutput(); err != nil {
		errs = append(errs, fmt.Errorf("kube-proxy --cleanup: %w\n%s", err, out))
	}
	for _, tool := range []string{"iptables", "ip6tables"} {
		if _, err := exec.LookPath(tool); err != nil {
			continue
		}
		for _, args := range [][]string{
			{"-t", "filter", "-D", "INPUT", "-j", "KUBE-FIREWALL"},
			{"-t", "filter", "-D", "OUTPUT", "-j", "KUBE-FIREWALL"},
			{"-t", "filter", "-F", "KUBE-FIREWALL"},
			{"-t", "filter", "-X", "KUBE-FIREWALL"},
			{"-t", "mangle", "-X", "KUBE-IPTABLES-HINT"},
			{"-t", "mangle", "-X", "KUBE-KUBELET-CANARY"},
			{"-t", "nat", "-X", "KUBE-KUBELET-CANARY"},
			{"-t", "filter", "-X", "KUBE-KUBELET-CANARY"},
		} {
			// A rule or chain that is not there is what we want.
			_ = exec.Command(tool, append([]string{"-w"}, args...)...).Run()
		}
	}
	return errors.Join(errs...)
}

// releaseLeftovers is what removeStaleDirs does for a dead cluster's
// directory before removing it: detach its mounts, so the removal does not
// descend into a container's root file system or stop at a busy mount, and
// remove its shims' sockets.
func releaseLeftovers(dir string) {
	removeShimSockets(newRealNodePaths(dir).containerdState)
	_ = unmountUnder(dir)
}
