//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pitstop-dev/pitstop/config"
	"github.com/pitstop-dev/pitstop/internal/demo"
	"github.com/pitstop-dev/pitstop/internal/install"
	"github.com/pitstop-dev/pitstop/internal/localcluster"
	"github.com/pitstop-dev/pitstop/internal/logging"
	"github.com/pitstop-dev/pitstop/internal/manager"
	"github.com/pitstop-dev/pitstop/internal/scheme"
	"github.com/pitstop-dev/pitstop/internal/sim/ec2sim"
)

// devOptions are the flags of `pitstop dev`.
type devOptions struct {
	nodes         int
	controlPlanes int
	binDir        string
	keep          bool
	logFile       string
	rolling       bool
	machines      bool
	cloudEvents   bool
	nodeGrace     time.Duration
	realNode      bool
	loadImage     string
	runManager    bool
	log           logOptions
	manager       manager.Options
}

func newDevCommand() *cobra.Command {
	o := devOptions{manager: manager.DefaultOptions()}
	o.manager.LeaderElection = false // the demo is the only manager of its cluster
	o.manager.MetricsAddr = "127.0.0.1:8080"
	o.manager.HealthAddr = "127.0.0.1:8081"
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Start a local cluster of simulated nodes and run pitstop against it",
		Long: `Start a local Kubernetes control plane (etcd, kube-apiserver,
kube-controller-manager, kube-scheduler) with kwok simulating the nodes, put
sample workloads on it, install pitstop's CRDs and run the manager in this
process. It prints the KUBECONFIG to use from another terminal. Ctrl-C stops
everything and removes the cluster's directory.

It builds nothing: the binaries come from --bin-dir (make tools builds them).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return usageError{err}
			}
			return runDev(cmd.Context(), o, cmd.OutOrStdout())
		},
	}
	fs := cmd.Flags()
	fs.IntVar(&o.nodes, "nodes", 20, "number of simulated nodes, control-plane nodes included")
	fs.IntVar(&o.controlPlanes, "control-plane-nodes", 3, "how many of the nodes are control-plane nodes")
	fs.StringVar(&o.binDir, "bin-dir", localcluster.DefaultBinDir(), "directory with the control-plane binaries and kwok (make tools builds them)")
	fs.BoolVar(&o.keep, "keep", false, "keep the cluster's directory (data, logs, kubeconfig) after stopping")
	fs.BoolVar(&o.rolling, "rolling", true, "apply the sample rolling-reboot MaintenanceProfile and mark the workers reboot-needed a few at a time")
	fs.BoolVar(&o.machines, "machines", true, "run the Machine API on the kwok provider: scale a MachineSet to 3 and let a MachineHealthCheck replace a machine whose node stops its heartbeat")
	fs.BoolVar(&o.cloudEvents, "cloud-events-demo", true, "run the aws Machine provider and cloud events against a local EC2 endpoint: a MachineSet of 5, EC2 schedules retirements and a reboot, the cloud-events profile replaces and reboots the machines one at a time once its window opens (needs --machines)")
	fs.DurationVar(&o.nodeGrace, "node-monitor-grace-period", 40*time.Second, "how long a node may miss heartbeats before it is marked unreachable (kube-controller-manager's flag)")
	fs.StringVar(&o.logFile, "log-file", "", "where pitstop's own log goes: a path, or - for stderr (default: logs/pitstop.log in the cluster's directory)")
	fs.BoolVar(&o.realNode, "real-node", false, "join one real worker, "+localcluster.RealNodeName+" (labelled "+localcluster.LabelRealNode+"=true): a kubelet with containerd that runs pods for real; needs root and `make deps`")
	fs.StringVar(&o.loadImage, "load-image", "", "with --real-node, an image archive to import into the real node's containerd, such as dist/pitstop-image.tar (make image)")
	fs.BoolVar(&o.runManager, "manager", true, "run pitstop in this process; false: start only the cluster, to install pitstop into it (docs/install.md); the demos need the manager")
	o.log.addFlags(fs)
	addManagerFlags(fs, &o.manager)
	return cmd
}

func (o *devOptions) validate() error {
	switch {
	case o.nodes < 1:
		return &manager.FlagError{Flag: "nodes", Value: fmt.Sprint(o.nodes), Reason: "must be at least 1"}
	case o.nodeGrace <= 0:
		return &manager.FlagError{Flag: "node-monitor-grace-period", Value: o.nodeGrace.String(), Reason: "must be positive"}
	case o.controlPlanes < 0 || o.controlPlanes >= o.nodes:
		return &manager.FlagError{Flag: "control-plane-nodes", Value: fmt.Sprint(o.controlPlanes), Reason: fmt.Sprintf("must be from 0 to %d so that at least one worker is left of --nodes=%d", o.nodes-1, o.nodes)}
	}
	if o.loadImage != "" {
		if !o.realNode {
			return &manager.FlagError{Flag: "load-image", Value: o.loadImage, Reason: "needs --real-node: only the real node runs images"}
		}
		if _, err := os.Stat(o.loadImage); err != nil {
			return &manager.FlagError{Flag: "load-image", Value: o.loadImage, Reason: "cannot read the file (make image writes dist/pitstop-image.tar)"}
		}
	}
	if _, err := os.Stat(filepath.Join(o.binDir, "kube-apiserver")); err != nil {
		return &manager.FlagError{Flag: "bin-dir", Value: o.binDir, Reason: "has no kube-apiserver: run `make tools` first"}
	}
	if err := o.log.validate(); err != nil {
		return err
	}
	return o.manager.Validate()
}

// runDev brings the cluster up, runs the manager until ctx ends (Ctrl-C,
// SIGTERM) and then tears everything down.
func runDev(ctx context.Context, o devOptions, out io.Writer) (err error) {
	opts := localcluster.DefaultOptions()
	opts.BinDir = o.binDir
	opts.KeepDir = o.keep
	opts.ControlPlaneNodes = o.controlPlanes
	opts.Workers = o.nodes - o.controlPlanes
	opts.SampleWorkloads = true
	opts.NodeMonitorGracePeriod = o.nodeGrace
	opts.RealNode = o.realNode
	if !o.runManager {
		o.rolling, o.machines = false, false // the demos drive the manager
	}
	if !o.machines {
		o.cloudEvents = false // it runs on the Machine API
	}
	if o.machines {
		o.manager.MachineAPI = true
		if !slices.Contains(o.manager.MachineProviders, "kwok") {
			o.manager.MachineProviders = append(o.manager.MachineProviders, "kwok")
		}
	}

	fmt.Fprintf(out, "Starting a local cluster: %d nodes (%d control-plane, %d workers) with sample workloads...\n", o.nodes, opts.ControlPlaneNodes, opts.Workers)
	started := time.Now()
	cluster, err := localcluster.Start(ctx, opts)
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(out, "Stopping the local cluster...")
		if stopErr := cluster.Stop(); stopErr != nil && err == nil {
			err = stopErr
		}
		if o.keep {
			fmt.Fprintf(out, "Stopped. Its directory is kept: %s\n", cluster.Dir)
		} else {
			fmt.Fprintln(out, "Stopped; nothing is left running.")
		}
	}()

	if o.loadImage != "" {
		if err := cluster.LoadImage(ctx, o.loadImage); err != nil {
			return err
		}
	}
	binDir, _ := filepath.Abs(o.binDir)
	if !o.runManager {
		return awaitClusterOnly(ctx, out, cluster, o, started, binDir)
	}

	logPath, logOut, err := openDevLog(o.logFile, cluster.Dir)
	if err != nil {
		return err
	}
	defer logOut.Close()
	log, err := logging.New(logOut, o.log.level, o.log.format)
	if err != nil {
		return err
	}

	var cloudEC2 *ec2sim.Server
	c, err := client.New(cluster.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	crds, err := config.CRDs()
	if err != nil {
		return err
	}
	if o.machines {
		machineCRDs, err := config.MachineAPICRDs()
		if err != nil {
			return err
		}
		crds = append(crds, machineCRDs...)
	}
	if err := install.CRDs(ctx, c, crds); err != nil {
		return err
	}
	if o.cloudEvents {
		ec2 := demo.LocalEC2(c)
		defer ec2.Close()
		if !slices.Contains(o.manager.MachineProviders, "aws") {
			o.manager.MachineProviders = append(o.manager.MachineProviders, "aws")
		}
		o.manager.AWSEndpoint, o.manager.AWSRegion = ec2.URL, demo.CloudRegion
		o.manager.CloudEvents = []string{"aws"}
		o.manager.CloudEventsInterval = 10 * time.Second
		cloudEC2 = ec2
	}
	// The manager runs outside the cluster: the API server calls its webhook
	// on 127.0.0.1, and it keeps its certificate Secret in its own namespace.
	o.manager.Webhook.URL = fmt.Sprintf("https://127.0.0.1:%d", o.manager.Webhook.Port)
	o.manager.Webhook.Host = "127.0.0.1"
	o.manager.Webhook.CertDir = filepath.Join(cluster.Dir, "webhook-certs")
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.manager.LeaderElectionNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	mgr, err := manager.New(ctx, cluster.Config, o.manager, log)
	if err != nil {
		return err
	}
	mgrDone := make(chan error, 1)
	go func() { mgrDone <- mgr.Start(ctx) }()

	dashboard := ""
	if o.manager.DashboardAddr != "0" {
		dashboard = "\nDashboard: " + dashboardURL(o.manager.DashboardAddr) + " (the fleet and each node, live)\n"
		if !manager.IsLoopback(o.manager.DashboardAddr) {
			dashboard += "It listens off loopback, so it serves HTTPS only (the webhook's certificate) and every request needs a bearer token for audience " + o.manager.Tokens.Audience + " of a user allowed to get /pitstop/dashboard.\n"
		}
	}
	fmt.Fprintf(out, `Local cluster ready in %.1fs: %d nodes Ready, sample workloads running in namespace %s.
pitstop is running against it (log: %s).

Use it from another terminal:
  export KUBECONFIG=%s PATH=%s:$PATH
  kubectl get nodes
%s
Press Ctrl-C to stop.
`, time.Since(started).Seconds(), o.nodes, localcluster.SampleNamespace, logPath, cluster.KubeconfigPath, binDir, dashboard)

	if o.rolling {
		go func() {
			if err := demo.Rolling(ctx, c, out, 3, 4*time.Second); err != nil {
				fmt.Fprintf(out, "rolling demo: %v\n", err)
			}
		}()
	}
	if o.machines {
		go func() {
			if err := demo.Machines(ctx, c, out, 3, 20*time.Second); err != nil && ctx.Err() == nil {
				fmt.Fprintf(out, "machines demo: %v\n", err)
			}
		}()
	}
	if cloudEC2 != nil {
		go func() {
			if err := demo.CloudEvents(ctx, c, out, cloudEC2, 5); err != nil && ctx.Err() == nil {
				fmt.Fprintf(out, "cloud events demo: %v\n", err)
			}
		}()
	}
	select {
	case <-ctx.Done():
		return <-mgrDone // the manager stops on the same context
	case err := <-mgrDone:
		return err
	}
}

// awaitClusterOnly prints how to reach the cluster, in which pitstop does
// not run, and waits until ctx ends.
func awaitClusterOnly(ctx context.Context, out io.Writer, cluster *localcluster.Cluster, o devOptions, started time.Time, binDir string) error {
	real := ""
	if o.realNode {
		real = fmt.Sprintf(" and the real node %s", localcluster.RealNodeName)
	}
	fmt.Fprintf(out, `Local cluster ready in %.1fs: %d nodes%s Ready, sample workloads running in namespace %s.
pitstop is not running: install it into the cluster (docs/install.md).

Use it from another terminal:
  export KUBECONFIG=%s PATH=%s:$PATH
  kubectl get nodes

Press Ctrl-C to stop.
`, time.Since(started).Seconds(), o.nodes, real, localcluster.SampleNamespace, cluster.KubeconfigPath, binDir)
	<-ctx.Done()
	return nil
}

// dashboardURL is where a browser on this machine finds the dashboard
// served on addr.
func dashboardURL(addr string) string {
	host, port, _ := net.SplitHostPort(addr) // validated
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "localhost"
	}
	scheme := "http://"
	if !manager.IsLoopback(addr) {
		scheme = "https://" // off loopback it serves TLS only
	}
	return scheme + net.JoinHostPort(host, port) + "/"
}

// openDevLog opens where the manager's log goes: stderr for "-", the given
// path, or pitstop.log among the cluster's logs.
func openDevLog(logFile, clusterDir string) (string, io.WriteCloser, error) {
	switch logFile {
	case "-":
		return "stderr", nopCloser{os.Stderr}, nil
	case "":
		logFile = filepath.Join(clusterDir, "logs", "pitstop.log")
	}
	f, err := os.Create(logFile)
	if err != nil {
		return "", nil, fmt.Errorf("opening --log-file: %w", err)
	}
	return logFile, f, nil
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
