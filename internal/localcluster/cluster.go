package localcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Version is the Kubernetes version of the control plane `make tools` builds.
const Version = "v1.36.3"

// adminToken authenticates every client of the cluster as a member of
// system:masters. The cluster listens on 127.0.0.1 only and lives as long
// as one test or demo.
const adminToken = "pitstop-localcluster-admin"

// dirPrefix names the directories clusters make under WorkDir; Start removes
// those whose owner has died (a test binary killed by its timeout).
const dirPrefix = "pitstop-localcluster-"

// Cluster is a running local control plane with simulated nodes.
type Cluster struct {
	// Dir holds the cluster's data, logs (logs/*.log) and kubeconfig.
	Dir string
	// KubeconfigPath is an admin kubeconfig for the cluster.
	KubeconfigPath string
	// Config is an admin client configuration without a client-side rate
	// limit, as controller-runtime gives its managers.
	Config *rest.Config
	// Clientset is a typed client built from Config.
	Clientset kubernetes.Interface

	opts     Options
	apiHost  string    // the address the API server listens on
	etcdURL  string    // etcd's client URL
	realNode *realNode // nil unless opts.RealNode
	mu       sync.Mutex
	procs    []*process     // in start order; StartComponent replaces one in place
	stopping bool           // Stop has begun: nothing starts any more
	restarts map[string]int // components started again after exiting on their own
	endWatch context.CancelFunc
	stopOnce sync.Once
	stopErr  error
}

// Start brings up a cluster as described by opts and returns once the API
// is healthy, every node is Ready and, if asked, the sample workloads run.
// On error, everything already started is stopped again. It runs only on
// Linux; elsewhere it returns an error wrapping errors.ErrUnsupported.
func Start(ctx context.Context, opts Options) (c *Cluster, err error) {
	if err := checkPlatform(); err != nil {
		return nil, err
	}
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("local cluster options: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()

	removeStaleDirs(opts.WorkDir)
	dir, err := os.MkdirTemp(opts.WorkDir, dirPrefix)
	if err != nil {
		return nil, err
	}
	c = &Cluster{Dir: dir, KubeconfigPath: filepath.Join(dir, "kubeconfig"), opts: opts, apiHost: "127.0.0.1"}
	defer func() {
		if err != nil {
			c.opts.KeepDir = true // the logs say why it failed
			_ = c.Stop()
			err = fmt.Errorf("%w (logs kept in %s)", err, filepath.Join(dir, "logs"))
		}
	}()
	if err := os.WriteFile(filepath.Join(dir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		return c, err
	}
	if opts.RealNode {
		if err := c.prepareRealNode(ctx); err != nil {
			return c, err
		}
		c.apiHost = realNodeIP
	}
	if err := c.startControlPlane(ctx); err != nil {
		return c, err
	}
	if opts.RealNode {
		if err := c.startRealNode(ctx); err != nil {
			return c, err
		}
	}
	if err := c.createNodes(ctx); err != nil {
		return c, err
	}
	if opts.RealNode {
		if err := c.awaitRealNodeRegistered(ctx); err != nil {
			return c, err
		}
	}
	if err := c.awaitNodesReady(ctx); err != nil {
		return c, err
	}
	if opts.SampleWorkloads {
		if err := c.ApplySampleWorkloads(ctx); err != nil {
			return c, err
		}
		if err := c.AwaitWorkloads(ctx, SampleNamespace); err != nil {
			return c, err
		}
	}
	if opts.RestartExited {
		c.superviseComponents()
	}
	return c, nil
}

// startControlPlane starts etcd and kube-apiserver, waits until the API
// answers /readyz, then starts the controller manager, the scheduler and
// kwok.
func (c *Cluster) startControlPlane(ctx context.Context) error {
	ports, err := freePorts(5)
	if err != nil {
		return err
	}
	etcdPort, peerPort, apiPort, kcmPort, schedPort := ports[0], ports[1], ports[2], ports[3], ports[4]
	logDir := filepath.Join(c.Dir, "logs")
	if err := os.MkdirAll(logDir, 0o700); err != nil {
		return err
	}
	keys, err := writePKI(filepath.Join(c.Dir, "pki"), net.ParseIP(c.apiHost))
	if err != nil {
		return fmt.Errorf("writing certificates: %w", err)
	}
	if err := c.writeKubeconfig(apiPort, keys.caCertPEM); err != nil {
		return err
	}
	files, err := c.writeComponentConfigs(keys)
	if err != nil {
		return err
	}

	c.etcdURL = "http://127.0.0.1:" + strconv.Itoa(etcdPort)
	if err := c.start("etcd", etcdArgs(c.Dir, etcdPort, peerPort), logDir); err != nil {
		return err
	}
	if err := c.start("kube-apiserver", apiserverArgs(keys, files, etcdPort, apiPort, c.apiHost, c.opts.RealNode), logDir); err != nil {
		return err
	}
	if err := c.awaitAPIServer(ctx); err != nil {
		return err
	}
	for _, p := range []struct {
		name string
		args []string
	}{
		{"kube-controller-manager", controllerManagerArgs(c.KubeconfigPath, kcmPort, c.opts.NodeMonitorGracePeriod, c.opts.DefaultClientLimits)},
		{"kube-scheduler", schedulerArgs(files.schedulerConfig, schedPort)},
		{"kwok", kwokArgs(c.KubeconfigPath, filepath.Join(c.opts.BinDir, "kwok-stages.yaml"), files.kwokConfig)},
	} {
		if err := c.start(p.name, p.args, logDir); err != nil {
			return err
		}
	}
	return nil
}

// start runs one component from BinDir and records it for Stop.
func (c *Cluster) start(name string, args []string, logDir string) error {
	return c.startBinary(name, filepath.Join(c.opts.BinDir, name), args, logDir)
}

// startBinary runs the program at path and records it for Stop.
func (c *Cluster) startBinary(name, path string, args []string, logDir string) error {
	p, err := startProcess(name, path, args, logDir)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.procs = append(c.procs, p)
	return nil
}

// checkProcesses returns the first component that has exited, with the end
// of its log, so a broken start fails at once instead of timing out. A
// component stopped on purpose (StopComponent, KillComponent) is no failure.
func (c *Cluster) checkProcesses() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.procs {
		if done, _ := p.exited(); done && !p.halted.Load() {
			return p.failure()
		}
	}
	return nil
}

// writeKubeconfig writes the admin kubeconfig and builds Config and
// Clientset from it.
func (c *Cluster) writeKubeconfig(apiPort int, caPEM []byte) error {
	const name = "pitstop-local"
	kubeconfig := clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{name: {
			Server:                   "https://" + net.JoinHostPort(c.apiHost, strconv.Itoa(apiPort)),
			CertificateAuthorityData: caPEM,
		}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"admin": {Token: adminToken}},
		Contexts:       map[string]*clientcmdapi.Context{name: {Cluster: name, AuthInfo: "admin"}},
		CurrentContext: name,
	}
	if err := clientcmd.WriteToFile(kubeconfig, c.KubeconfigPath); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	cfg, err := clientcmd.NewNonInteractiveClientConfig(kubeconfig, name, nil, nil).ClientConfig()
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = -1, -1 // no client-side limit; the server's flow control still applies
	cfg.UserAgent = "pitstop-localcluster"
	c.Config = cfg
	c.Clientset, err = kubernetes.NewForConfig(cfg)
	return err
}

// awaitAPIServer polls /readyz until the API server is ready.
func (c *Cluster) awaitAPIServer(ctx context.Context) error {
	return c.poll(ctx, 50*time.Millisecond, "kube-apiserver to become ready", func(ctx context.Context) (bool, error) {
		body, err := c.Clientset.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok", nil
	})
}

// poll runs cond every interval until it is true, it fails, a component
// exits or ctx ends; what names what is being waited for in the error.
func (c *Cluster) poll(ctx context.Context, interval time.Duration, what string, cond func(context.Context) (bool, error)) error {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		if err := c.checkProcesses(); err != nil {
			return err
		}
		ok, err := cond(ctx)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-ticker.C:
		}
	}
}

// PIDs returns the process IDs of the components this cluster started. For
// a component started again by StartComponent it is the latest one; for a
// stopped component, that of the process that has exited.
func (c *Cluster) PIDs() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	pids := make([]int, 0, len(c.procs))
	for _, p := range c.procs {
		pids = append(pids, p.cmd.Process.Pid)
	}
	return pids
}

// Stop stops every component, newest first, and removes the cluster's
// directory unless KeepDir is set. It is safe to call more than once.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		c.mu.Lock()
		c.stopping = true
		if c.endWatch != nil {
			c.endWatch()
		}
		procs := slices.Clone(c.procs)
		c.mu.Unlock()
		// kwok, the scheduler and the controller manager go first so they do
		// not spend their last second logging a vanished API server; then the
		// API server and etcd. Those two are slow to exit on SIGTERM and their
		// data is thrown away, so they get a short grace before SIGKILL.
		first := min(len(procs), 2) // etcd and kube-apiserver start first
		stopAll(procs[first:])
		var errs []error
		if c.realNode != nil {
			// The kubelet is gone, so nothing restarts the pods it ran.
			errs = append(errs, c.stopRealNode())
		}
		stopAll(procs[:first])
		if c.opts.KeepDir {
			errs = append(errs, os.WriteFile(filepath.Join(c.Dir, "keep"), nil, 0o600))
		} else {
			errs = append(errs, os.RemoveAll(c.Dir))
		}
		c.stopErr = errors.Join(errs...)
	})
	return c.stopErr
}

// stopAll stops processes in parallel and returns once all are reaped.
func stopAll(procs []*process) {
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Go(func() { p.stop(time.Second) })
	}
	wg.Wait()
}

// removeStaleDirs deletes cluster directories under workDir whose owning
// process is gone and that nobody asked to keep.
func removeStaleDirs(workDir string) {
	dirs, _ := filepath.Glob(filepath.Join(workDir, dirPrefix+"*"))
	for _, dir := range dirs {
		data, err := os.ReadFile(filepath.Join(dir, "owner.pid"))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil || pidAlive(pid) {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, "keep")); errors.Is(err, os.ErrNotExist) {
			releaseLeftovers(dir)
			_ = os.RemoveAll(dir)
		}
	}
}
