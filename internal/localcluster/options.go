package localcluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Options describes a local cluster. Start from DefaultOptions and change
// what the caller cares about: zero values mean zero, not "default".
type Options struct {
	// BinDir holds etcd, kube-apiserver, kube-controller-manager,
	// kube-scheduler, kwok and kwok-stages.yaml, as `make tools` builds them.
	BinDir string

	// WorkDir is where the cluster's own directory is made.
	WorkDir string

	// KeepDir leaves the cluster's directory (logs, data, kubeconfig) in
	// place after Stop.
	KeepDir bool

	// ControlPlaneNodes is how many simulated control-plane nodes to make:
	// labelled node-role.kubernetes.io/control-plane and tainted NoSchedule,
	// as kubeadm does.
	ControlPlaneNodes int

	// Workers is how many simulated worker nodes to make.
	Workers int

	// Zones are spread round-robin over the nodes as
	// topology.kubernetes.io/zone.
	Zones []string

	// NodeLabels are added to every worker node.
	NodeLabels map[string]string

	// PodsPerNode is each node's pod capacity.
	PodsPerNode int

	// RealNode adds one real worker, RealNodeName, to the simulated nodes: a
	// kubelet and kube-proxy from BinDir with containerd, runc and the CNI
	// plugins of this machine (`make deps` installs them). Pods the scheduler
	// puts on it really run, from images loaded with Cluster.LoadImage; they
	// reach the API server through the kubernetes Service as in-cluster
	// clients do, and this machine and the API server reach them at their
	// pod IP. The API server then listens on the node's bridge address
	// instead of 127.0.0.1. It needs root, and one cluster a machine has a
	// real node at a time: Start waits while another one has.
	RealNode bool

	// SampleWorkloads applies the sample workloads (see SampleWorkloads) once
	// the nodes are Ready and waits until they run.
	SampleWorkloads bool

	// RestartExited starts a component that exits on its own (not by
	// StopComponent or KillComponent) again, a second after it exited, as
	// the kubelet restarts a crashed static pod. Restarts counts them. Off,
	// a component that exits stays down, and Start fails if one exits while
	// it waits.
	RestartExited bool

	// AuditPodRemovals makes the API server write an audit log of every
	// request that removes a pod, a delete or an eviction, with who asked
	// (user agent) and the answer: see PodRemovals.
	AuditPodRemovals bool

	// NodeMonitorGracePeriod is how long the node lifecycle controller waits
	// for a heartbeat before it marks a node NotReady.
	NodeMonitorGracePeriod time.Duration

	// StartTimeout bounds Start.
	StartTimeout time.Duration

	// DefaultClientLimits runs kube-controller-manager and kube-scheduler
	// at their own defaults, as a cluster set up with them does: client
	// limits of 20 and 50 requests a second instead of 500, and 5
	// Deployment and ReplicaSet workers instead of 10. The replacements of
	// evicted pods then come at those components' pace.
	DefaultClientLimits bool
}

// DefaultOptions is three control-plane nodes and three workers over three
// zones, 110 pods a node, binaries from DefaultBinDir.
func DefaultOptions() Options {
	return Options{
		BinDir:                 DefaultBinDir(),
		WorkDir:                os.TempDir(),
		ControlPlaneNodes:      3,
		Workers:                3,
		Zones:                  []string{"zone-a", "zone-b", "zone-c"},
		PodsPerNode:            110,
		NodeMonitorGracePeriod: 40 * time.Second,
		StartTimeout:           2 * time.Minute,
	}
}

// Validate reports the first option that cannot work, naming it.
func (o Options) Validate() error {
	switch {
	case o.ControlPlaneNodes < 0:
		return fmt.Errorf("ControlPlaneNodes must not be negative, got %d", o.ControlPlaneNodes)
	case o.Workers < 0:
		return fmt.Errorf("Workers must not be negative, got %d", o.Workers)
	case o.ControlPlaneNodes+o.Workers == 0 && !o.RealNode && o.SampleWorkloads:
		return errors.New("SampleWorkloads needs at least one worker node to run on")
	case o.PodsPerNode < 1:
		return fmt.Errorf("PodsPerNode must be at least 1, got %d", o.PodsPerNode)
	case o.NodeMonitorGracePeriod <= 0:
		return fmt.Errorf("NodeMonitorGracePeriod must be positive, got %s", o.NodeMonitorGracePeriod)
	case o.StartTimeout <= 0:
		return fmt.Errorf("StartTimeout must be positive, got %s", o.StartTimeout)
	}
	required := requiredBinaries
	if o.RealNode {
		required = append(required[:len(required):len(required)], realNodeBinaries...)
	}
	for _, name := range required {
		if _, err := os.Stat(filepath.Join(o.BinDir, name)); err != nil {
			return fmt.Errorf("BinDir %q has no %s (run `make tools`): %w", o.BinDir, name, err)
		}
	}
	if o.RealNode {
		return validateRealNodeHost()
	}
	return nil
}

// requiredBinaries are the files Start needs in BinDir.
var requiredBinaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "kwok-stages.yaml"}

// moduleMarker is the line of pitstop's go.mod that tells its root directory
// apart from hack/tools and any other module beneath it.
const moduleMarker = "module github.com/pitstop-dev/pitstop\n"

// DefaultBinDir is $PITSTOP_BIN_DIR if set, else the bin/ directory at the
// root of the pitstop checkout that holds the working directory, so tests
// find it from any package directory. It is "bin" when neither is found.
func DefaultBinDir() string {
	if dir := os.Getenv("PITSTOP_BIN_DIR"); dir != "" {
		return dir
	}
	if root, ok := RepoRoot(); ok {
		return filepath.Join(root, "bin")
	}
	return "bin"
}

// RepoRoot walks up from the working directory to the root of the pitstop
// checkout.
func RepoRoot() (string, bool) {
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && len(data) >= len(moduleMarker) && string(data[:len(moduleMarker)]) == moduleMarker {
			return dir, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}
