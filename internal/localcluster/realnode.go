package localcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pitstop-dev/pitstop/internal/release/image"
)

const (
	// RealNodeName is the name of the real node Options.RealNode adds.
	RealNodeName = "real-node"

	// LabelRealNode marks the real node ("true"), so that pods can be sent to
	// it with a node selector when the cluster has simulated nodes too.
	LabelRealNode = "localcluster.pitstop.dev/real-node"

	// PauseImage is the image of the real node's pod sandboxes. Start builds
	// it from ./pause and loads it under the name the sample workloads' pods
	// use, so simulated workloads the scheduler puts on the real node run
	// there too.
	PauseImage = "registry.k8s.io/pause:3.10"
)

const (
	// realNodeBridge, with realNodeIP, is the real node's network: pods are
	// attached to it, it is their gateway, and the API server listens on it
	// so pods can reach it at the kubernetes Service (kube-proxy forwards the
	// ClusterIP to the address the API server advertises, which must not be
	// a loopback address).
	realNodeBridge    = "pitstop0"
	realNodeIP        = "10.100.0.1"
	realNodePrefixLen = 24
	realNodePodSubnet = "10.100.0.0/24"

	// cniBinDir is where Debian's containernetworking-plugins installs them.
	cniBinDir = "/usr/lib/cni"
)

// realNodeHostBinaries are the programs the real node needs from the
// machine, with the Debian package that has them.
var realNodeHostBinaries = []struct{ path, pkg string }{
	{"containerd", "containerd"},
	{"containerd-shim-runc-v2", "containerd"},
	{"ctr", "containerd"},
	{"runc", "runc"},
	{"ip", "iproute2"},
	{"iptables", "iptables"},
	{filepath.Join(cniBinDir, "bridge"), "containernetworking-plugins"},
	{filepath.Join(cniBinDir, "host-local"), "containernetworking-plugins"},
	{filepath.Join(cniBinDir, "loopback"), "containernetworking-plugins"},
}

// realNodeBinaries are the files Start needs in BinDir for the real node.
var realNodeBinaries = []string{"kubelet", "kube-proxy"}

// validateRealNodeHost reports the first thing the machine lacks to run the
// real node.
func validateRealNodeHost() error {
	if os.Geteuid() != 0 {
		return errors.New("RealNode needs root: the kubelet and containerd manage cgroups, mounts and network devices")
	}
	for _, b := range realNodeHostBinaries {
		if _, err := exec.LookPath(b.path); err != nil {
			return fmt.Errorf("RealNode needs %s from the Debian package %s (run `make deps`): %w", b.path, b.pkg, err)
		}
	}
	if _, err := exec.LookPath("go"); err != nil {
		return fmt.Errorf("RealNode builds its pause image from source and needs the go command: %w", err)
	}
	if _, ok := RepoRoot(); !ok {
		return errors.New("RealNode builds its pause image from source and must run inside the pitstop checkout")
	}
	return nil
}

// realNode is what the cluster runs and owns on the machine for its real node.
type realNode struct {
	paths    realNodePaths
	cgroup   string    // the node's cgroup subtree, the same name in every hierarchy
	lock     *os.File  // the machine's real-node lock, held until Stop
	watchdog *exec.Cmd // kills the node's processes once this process is gone
	pipe     *os.File  // the watchdog waits for this end to close
	ctr      []string  // ctr's global flags for the node's containerd
}

// buildPauseImage compiles ./pause for this machine and packs it into
// dir/pause.tar as PauseImage.
func buildPauseImage(ctx context.Context, dir string) error {
	root, _ := RepoRoot()
	binary := filepath.Join(dir, "pause")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w -buildid=",
		"-o", binary, "github.com/pitstop-dev/pitstop/internal/localcluster/pause")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building the pause image's program: %w\n%s", err, out)
	}
	repo, tag, _ := strings.Cut(PauseImage, ":")
	_, err := image.Write(image.Options{
		Repository: repo,
		Tag:        tag,
		Version:    tag,
		Revision:   "localcluster",
		Created:    time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC),
		Binaries:   []image.Binary{{Platform: v1.Platform{OS: "linux", Architecture: runtime.GOARCH}, Path: binary}},
	}, filepath.Join(dir, "pause.tar"))
	if err != nil {
		return fmt.Errorf("packing the pause image: %w", err)
	}
	return nil
}

// LoadImage imports an image archive (an OCI layout or `docker save` tar,
// such as `make image` writes) into the real node's containerd, under the
// name the archive gives it, for this machine's platform. Pods then run it
// without pulling, as long as their pull policy allows (not Always, which a
// :latest tag implies).
func (c *Cluster) LoadImage(ctx context.Context, archive string) error {
	if c.realNode == nil {
		return errors.New("LoadImage needs a cluster started with RealNode")
	}
	args := append(append([]string{}, c.realNode.ctr...), "images", "import", "--platform", "linux/"+runtime.GOARCH, archive)
	if out, err := exec.CommandContext(ctx, "ctr", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("importing %s into the real node: %w\n%s", archive, err, out)
	}
	return nil
}

// awaitRealNodeRegistered waits until the kubelet has registered the node,
// then gives it the labels of a simulated worker: the kubelet may not set
// node-role labels itself.
func (c *Cluster) awaitRealNodeRegistered(ctx context.Context) error {
	err := c.poll(ctx, 100*time.Millisecond, "the kubelet to register "+RealNodeName, func(ctx context.Context) (bool, error) {
		_, err := c.Clientset.CoreV1().Nodes().Get(ctx, RealNodeName, metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		return err
	}
	labels := map[string]string{LabelWorker: ""}
	for k, v := range c.opts.NodeLabels {
		labels[k] = v
	}
	if len(c.opts.Zones) > 0 {
		labels[LabelZone] = c.opts.Zones[c.opts.Workers%len(c.opts.Zones)]
		labels[corev1.LabelTopologyRegion] = "local"
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	if err != nil {
		return err
	}
	if _, err := c.Clientset.CoreV1().Nodes().Patch(ctx, RealNodeName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("labelling node %s: %w", RealNodeName, err)
	}
	return nil
}
