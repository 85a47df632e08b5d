package localcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/pitstop-dev/pitstop/internal/kwoknode"
)

// componentFiles are configuration files the components read.
type componentFiles struct {
	tokens          string
	schedulerConfig string
	kwokConfig      string
	auditPolicy     string // empty unless Options.AuditPodRemovals
	auditLog        string
}

// writeComponentConfigs writes the token file the API server authenticates
// with and the scheduler's configuration.
func (c *Cluster) writeComponentConfigs(keys *pki) (componentFiles, error) {
	f := componentFiles{
		tokens:          filepath.Join(c.Dir, "tokens.csv"),
		schedulerConfig: filepath.Join(c.Dir, "scheduler.yaml"),
		kwokConfig:      filepath.Join(c.Dir, "kwok.yaml"),
	}
	// token,user,uid,"group1,group2"
	if err := os.WriteFile(f.tokens, []byte(adminToken+`,admin,admin,"system:masters"`+"\n"), 0o600); err != nil {
		return f, err
	}
	// The scheduler's own client limit (50 QPS, one binding per pod) is what
	// bounds how fast evicted pods come back; raise it so the scheduler is not
	// the slowest part of a drain on a large simulated fleet.
	//
	// percentageOfNodesToScore is the setting Kubernetes documents for large
	// clusters: the scheduler stops looking once it has found 10% of the
	// nodes feasible (never fewer than 100), instead of 42% at 1,000 nodes.
	// Every component shares the machine's cores here; re-placing the 3,000
	// pods a round of a 1,000-node fleet's maintenance evicts otherwise keeps
	// a core busy and slows the API server everything else waits on.
	limits := "\n  qps: 500\n  burst: 1000"
	if c.opts.DefaultClientLimits {
		limits = ""
	}
	scheduler := fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: 10
clientConnection:
  kubeconfig: %q%s
leaderElection:
  leaderElect: false
`, c.KubeconfigPath, limits)
	if err := os.WriteFile(f.schedulerConfig, []byte(scheduler), 0o600); err != nil {
		return f, err
	}
	// kwok plays 4 pods' kubelets at a time by default: a drained node's
	// pods would then leave, and their replacements start, at the pace of
	// kwok rather than of the control plane. A real kubelet stops all of a
	// node's pods at once; one worker per pod of a full node (110) does the same.
	if c.opts.AuditPodRemovals {
		f.auditPolicy = filepath.Join(c.Dir, "audit-policy.yaml")
		f.auditLog = c.auditLogPath()
		if err := os.WriteFile(f.auditPolicy, []byte(podRemovalAuditPolicy), 0o600); err != nil {
			return f, err
		}
	}
	kwok := `apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  podPlayStageParallelism: 110
  nodePlayStageParallelism: 16
  nodeLeaseParallelism: 16
` + podReadyAgainStage
	return f, os.WriteFile(f.kwokConfig, []byte(kwok), 0o600)
}

func etcdArgs(dir string, clientPort, peerPort int) []string {
	client := "http://127.0.0.1:" + strconv.Itoa(clientPort)
	peer := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	return []string{
		"--name=default",
		"--data-dir=" + filepath.Join(dir, "etcd"),
		"--listen-client-urls=" + client,
		"--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=default=" + peer,
		// The data lives as long as one test: durability buys nothing here
		// and fsync is most of etcd's write latency.
		"--unsafe-no-fsync=true",
		"--quota-backend-bytes=" + strconv.Itoa(8<<30),
		"--log-level=warn",
	}
}

// serviceCIDR is the range of Service ClusterIPs; kubernetesServiceIP, its
// first address, is the kubernetes Service's, which in-cluster clients dial.
const (
	serviceCIDR         = "10.96.0.0/16"
	kubernetesServiceIP = "10.96.0.1"
)

// apiserverArgs are kube-apiserver's flags. It listens on host, 127.0.0.1
// unless the cluster has a real node (see prepareRealNode).
func apiserverArgs(keys *pki, files componentFiles, etcdPort, apiPort int, host string, realNode bool) []string {
	args := []string{
		"--etcd-servers=http://127.0.0.1:" + strconv.Itoa(etcdPort),
		"--bind-address=" + host,
		"--advertise-address=" + host,
		"--secure-port=" + strconv.Itoa(apiPort),
		"--tls-cert-file=" + keys.servingCert,
		"--tls-private-key-file=" + keys.servingKey,
		"--token-auth-file=" + files.tokens,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + keys.serviceAccPub,
		"--service-account-signing-key-file=" + keys.serviceAccount,
		"--service-cluster-ip-range=" + serviceCIDR,
		"--allow-privileged=true",
		"--profiling=false",
	}
	if files.auditPolicy != "" {
		args = append(args, "--audit-policy-file="+files.auditPolicy, "--audit-log-path="+files.auditLog,
			"--audit-log-format=json", "--audit-log-mode=blocking")
	}
	if !realNode {
		// Simulated kubelets mount no tokens, and without this plugin pods need
		// not wait for each namespace's default ServiceAccount to appear.
		return append(args, "--disable-admission-plugins=ServiceAccount")
	}
	// The real kubelet mounts the token this plugin adds to pods, with which
	// in-cluster clients authenticate. Webhooks and aggregated APIs are called
	// at an endpoint of their Service, picked from its EndpointSlices, rather
	// than at its ClusterIP: the pod's address on the node's bridge is
	// reachable from this machine, and the call does not depend on
	// kube-proxy's rules for traffic this machine sends itself.
	return append(args, "--enable-aggregator-routing=true")
}

func controllerManagerArgs(kubeconfig string, port int, nodeGrace time.Duration, defaultLimits bool) []string {
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--leader-elect=false",
		// The node lifecycle controller must run: it removes the not-ready
		// taint every new node gets, and marks nodes NotReady when their
		// heartbeat stops. nodeipam needs a cluster CIDR nobody uses here.
		"--controllers=*,-nodeipam",
		"--node-monitor-grace-period=" + nodeGrace.String(),
	}
	if !defaultLimits {
		args = append(args, "--kube-api-qps=500", "--kube-api-burst=1000",
			"--concurrent-deployment-syncs=10", "--concurrent-replicaset-syncs=10")
	}
	return args
}

func schedulerArgs(config string, port int) []string {
	return []string{
		"--config=" + config,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
	}
}

func kwokArgs(kubeconfig, stages, config string) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--config=" + stages,
		"--config=" + config,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + kwoknode.Annotation + "=" + kwoknode.AnnotationValue,
		"--cidr=10.128.0.0/9",
	}
}

// podReadyAgainStage makes kwok do what a kubelet does once it reaches the
// API server again: report its running pods Ready. When a heartbeat comes
// late (a loaded machine), the node lifecycle controller marks every pod of
// the node not Ready; kwok's own stages only ever make Pending pods Ready, so
// those pods would stay unready for good and every PodDisruptionBudget over
// them would refuse evictions forever.
const podReadyAgainStage = `---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-ready-again
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values:
      - 'Running'
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'NotIn'
      values:
      - 'True'
  delay:
    durationMilliseconds: 1000
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: Ready
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: ContainersReady
`
