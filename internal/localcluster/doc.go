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
// death (Pdeathsig) and on test failure.
package localcluster
