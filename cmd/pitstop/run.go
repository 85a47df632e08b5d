package main

import (
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
			mgr, err := manager.New(cmd.Context(), cfg, o.manager, log)
			if err != nil {
				return err
			}
			log.Info("Starting manager", "leaderElection", o.manager.LeaderElection,
				"leaseNamespace", o.manager.LeaderElectionNamespace, "metrics", o.manager.MetricsAddr, "health", o.manager.HealthAddr, "dashboard", o.manager.DashboardAddr)
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
