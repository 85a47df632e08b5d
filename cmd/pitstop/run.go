package main

import (
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/pitstop-dev/pitstop/internal/logging"
	"github.com/pitstop-dev/pitstop/internal/manager"
)

// runOptions are the flags of `pitstop run`.
type runOptions struct {
	kubeconfig string
	log        logOptions
	manager    manager.Options
}

func newRunCommand() *cobra.Command {
	o := runOptions{manager: manager.DefaultOptions()}
	o.manager.LeaderElectionNamespace = ownNamespace(o.manager.LeaderElectionNamespace)
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the pitstop manager against a cluster",
		Long: `Run the pitstop manager: the controllers that take nodes through maintenance.

The cluster is the one in --kubeconfig if given, else the one the pod runs in,
else the one in $KUBECONFIG (or ~/.kube/config). With leader election on (the
default) only one replica acts at a time; the others wait on the Lease.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			log, err := logging.New(cmd.ErrOrStderr(), o.log.level, o.log.format)
			if err != nil {
				return err
			}
			cfg, err := loadConfig(o.kubeconfig)
			if err != nil {
				return err
			}
			// Before anything is registered: a webhook the API server cannot
			// call would refuse every NodeMaintenance in the cluster.
			o.manager.Webhook.ServiceSet = cmd.Flags().Changed("webhook-service")
			if err := o.manager.Webhook.CheckReachable(inCluster(o.kubeconfig, cfg)); err != nil {
				return usageError{err}
			}
			gcPercent := tuneGC()
			mgr, err := manager.New(cmd.Context(), cfg, o.manager, log)
			if err != nil {
				return err
			}
			log.Info("Starting manager", "leaderElection", o.manager.LeaderElection,
				"leaseNamespace", o.manager.LeaderElectionNamespace, "metrics", o.manager.MetricsAddr, "health", o.manager.HealthAddr, "dashboard", o.manager.DashboardAddr,
				"gcPercent", gcPercent)
			// Start returns once the signal context ends and the controllers
			// have stopped (or GracefulShutdownTimeout passed); with leader
			// election on, the Lease is released on the way out.
			if err := mgr.Start(cmd.Context()); err != nil {
				return err
			}
			log.Info("Manager stopped")
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "path to a kubeconfig (default: in-cluster, else $KUBECONFIG)")
	o.log.addFlags(fs)
	addManagerFlags(fs, &o.manager)
	addLeaderElectionFlags(fs, &o.manager)
	return cmd
}

func (o *runOptions) validate() error {
	if err := o.log.validate(); err != nil {
		return usageError{err}
	}
	if err := o.manager.Validate(); err != nil {
		return usageError{err}
	}
	return nil
}

// defaultGCPercent is the garbage collector's target when GOGC is not set.
// Most of the manager's heap is its informer cache, which lives as long as
// the process: Go's default (100) lets the heap grow to twice that before
// collecting, which on a fleet of 1,000 nodes and 30,000 pods is most of
// the manager's memory. 50 keeps it to one and a half times, for a little
// more collector CPU (docs/benchmarks.md).
const defaultGCPercent = 50

// tuneGC applies defaultGCPercent unless GOGC says otherwise, and returns
// the percent in force.
func tuneGC() int {
	if _, set := os.LookupEnv("GOGC"); set {
		percent := debug.SetGCPercent(100)
		debug.SetGCPercent(percent)
		return percent
	}
	debug.SetGCPercent(defaultGCPercent)
	return defaultGCPercent
}
