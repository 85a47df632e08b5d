// Package localcluster runs a real Kubernetes control plane on this machine
// for tests, the demo and benchmarks: etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler as child processes, and kwok
// playing the kubelet of every simulated node. ReplicaSets really recreate
// evicted pods and the scheduler really places them, so what runs against a
// local cluster behaves as it would against a cluster of real machines.
//
// The package owns the processes it starts and nothing else: it never
// touches the user's kubeconfig, binds only to 127.0.0.1 on ports it picked
// free, and stops every process group it started on Stop, on the parent's
// death (Pdeathsig) and on test failure. Fault tests stop, kill and start
// single components again (StopComponent, KillComponent, StartComponent);
// a restarted component is one of the processes Stop stops, and keeps the
// same guarantees. Those guarantees need Linux: on
// other systems the package builds, so that test helpers that only need
// DefaultBinDir build there too, but Start refuses to run.
//
// With Options.RealNode a cluster also runs one real node on this machine: a
// kubelet and kube-proxy with a containerd of their own, whose pods really
// run. That node owns a bridge (whose address the API server then listens on
// instead of 127.0.0.1), a cgroup subtree, mounts under the cluster's
// directory and the iptables chains of kube-proxy and the kubelet, and Stop
// removes them all. If the cluster's process dies without Stop, a watchdog
// kills the node's containers, and the next cluster with a real node removes
// the rest.
package localcluster
