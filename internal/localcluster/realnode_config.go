package localcluster

import (
	"fmt"
	"path/filepath"
	"strconv"
)

// realNodePaths are where the real node keeps its state, all under the
// cluster's directory so that Stop removes them with it.
type realNodePaths struct {
	dir             string // the node's own directory
	containerdConf  string
	containerdRoot  string
	containerdState string
	containerdSock  string
	cniConfDir      string
	kubeletConf     string
	kubeletRoot     string
	kubeProxyConf   string
}

func newRealNodePaths(clusterDir string) realNodePaths {
	dir := filepath.Join(clusterDir, "node")
	return realNodePaths{
		dir:             dir,
		containerdConf:  filepath.Join(dir, "containerd.toml"),
		containerdRoot:  filepath.Join(dir, "containerd", "root"),
		containerdState: filepath.Join(dir, "containerd", "state"),
		containerdSock:  filepath.Join(dir, "containerd.sock"),
		cniConfDir:      filepath.Join(dir, "cni", "net.d"),
		kubeletConf:     filepath.Join(dir, "kubelet.yaml"),
		kubeletRoot:     filepath.Join(dir, "kubelet"),
		kubeProxyConf:   filepath.Join(dir, "kube-proxy.yaml"),
	}
}

// containerdConfig is containerd's configuration for the real node: its own
// root, state and socket, so the machine's containerd (if any) and its images
// stay untouched, and Debian's runc and CNI plugins.
//
// restrict_oom_score_adj: the kubelet asks for oom_score_adj -998 for pod
// sandboxes, which needs CAP_SYS_RESOURCE; without it (a container, a
// sandboxed VM) runc fails with "can't get final child's PID from pipe".
// Restricting keeps the score at containerd's own. ShimCgroup puts the shims
// in the node's cgroup subtree, where the watchdog and Stop find them.
// netns_mounts_under_state_dir keeps the pods' network namespaces out of
// /var/run/netns.
func containerdConfig(p realNodePaths, cgroupName string) string {
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.internal.v1.tracing", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = %[5]q
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = %[6]q
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          BinaryName = "runc"
          Root = %[7]q
          ShimCgroup = %[8]q
          SystemdCgroup = false
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = %[9]q
      conf_dir = %[10]q
`, p.containerdRoot, p.containerdState, p.containerdSock, p.containerdSock+".ttrpc",
		filepath.Join(p.dir, "containerd", "opt"), PauseImage, filepath.Join(p.dir, "containerd", "runc"),
		"/"+cgroupName+"/shims", cniBinDir, p.cniConfDir)
}

// cniConfig attaches pods to the bridge Start made, with addresses from
// realNodePodSubnet and a default route through the node. isGateway is off
// because the bridge already has the node's address, and because with it on
// the plugin turns on IP forwarding for the whole machine; ipMasq is off
// because pods only talk to this machine.
func cniConfig(ipamDir string) string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "pitstop-localcluster",
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": false,
      "ipMasq": false,
      "ipam": {
        "type": "host-local",
        "dataDir": %q,
        "ranges": [[{"subnet": %q, "gateway": %q}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "loopback"}
  ]
}
`, realNodeBridge, ipamDir, realNodePodSubnet, realNodeIP)
}

// kubeletConfig is the real node's kubelet configuration.
//
// failCgroupV1 false lets the kubelet run on a cgroup v1 host, which it
// refuses by default since Kubernetes 1.35. Image garbage collection is off
// so the locally loaded images, which no registry can give back, stay.
// Eviction only starts when the machine's disk is nearly full: the node
// shares it with everything else on the machine. The API server is not given
// a client certificate for the kubelet, so logs and exec do not work.
func kubeletConfig(p realNodePaths, cgroupName string, port, healthzPort, maxPods int) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: %q
failSwapOn: false
containerRuntimeEndpoint: %q
podLogsDir: %q
address: %q
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
resolvConf: ""
maxPods: %d
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 2%%
  imagefs.available: 2%%
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
authorization:
  mode: Webhook
`, "/"+cgroupName, "unix://"+p.containerdSock, filepath.Join(p.dir, "pod-logs"), realNodeIP, port, healthzPort, maxPods)
}

// kubeProxyConfig is the real node's kube-proxy configuration: iptables mode,
// so pods reach the API server at the kubernetes Service's ClusterIP as
// in-cluster clients do. The conntrack settings are zero so kube-proxy leaves
// the machine's sysctls alone, and node ports are served on the node's
// address only, so kube-proxy does not turn on route_localnet.
func kubeProxyConfig(kubeconfig string, healthzPort, metricsPort int) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %q
hostnameOverride: %q
healthzBindAddress: %q
metricsBindAddress: %q
mode: iptables
clusterCIDR: %q
nodePortAddresses: [%q]
iptables:
  localhostNodePorts: false
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, kubeconfig, RealNodeName, "127.0.0.1:"+strconv.Itoa(healthzPort), "127.0.0.1:"+strconv.Itoa(metricsPort),
		realNodePodSubnet, realNodeIP+"/32")
}

func kubeletArgs(p realNodePaths, kubeconfig string) []string {
	return []string{
		"--config=" + p.kubeletConf,
		"--kubeconfig=" + kubeconfig,
		"--root-dir=" + p.kubeletRoot,
		"--hostname-override=" + RealNodeName,
		"--node-ip=" + realNodeIP,
		"--node-labels=" + LabelRealNode + "=true",
	}
}

func kubeProxyArgs(p realNodePaths) []string {
	return []string{"--config=" + p.kubeProxyConf}
}

func containerdArgs(p realNodePaths) []string {
	return []string{"--config=" + p.containerdConf}
}
