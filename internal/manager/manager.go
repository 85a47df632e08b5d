package manager

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	"github.com/pitstop-dev/pitstop/internal/cloud/clusterapi"
	"github.com/pitstop-dev/pitstop/internal/cloud/openstack"
	"github.com/pitstop-dev/pitstop/internal/controller/capi"
	"github.com/pitstop-dev/pitstop/internal/controller/esx"
	"github.com/pitstop-dev/pitstop/internal/controller/kubernikus"
	"github.com/pitstop-dev/pitstop/internal/controller/medik8s"
	"github.com/pitstop-dev/pitstop/internal/controller/nodemaintenance"
	"github.com/pitstop-dev/pitstop/internal/controller/profile"
	"github.com/pitstop-dev/pitstop/internal/plugin/check"
	"github.com/pitstop-dev/pitstop/internal/profilesecret"
	"github.com/pitstop-dev/pitstop/internal/scheme"
)

func (e *FlagError) Error() string {
	return fmt.Sprintf("invalid value %q for flag --%s: %s", e.Value, e.Flag, e.Reason)
}

// New builds the manager against cfg with the controllers and the webhook
// registered, and the webhook's serving certificate in place. The caller
// runs it with Start, which returns when its context ends.
func New(ctx context.Context, cfg *rest.Config, opts Options, log logr.Logger) (ctrl.Manager, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	ctrl.SetLogger(log)
	// Read once the webhook's setup has put the certificate in place.
	cert := &servingCert{dir: opts.Webhook.CertDir}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme.New(),
		Logger:                        log,
		Metrics:                       metricsOptions(opts, cert),
		HealthProbeBindAddress:        opts.HealthAddr,
		PprofBindAddress:              opts.PprofAddr,
		WebhookServer:                 opts.Webhook.server(),
		LeaderElection:                opts.LeaderElection,
		LeaderElectionNamespace:       opts.LeaderElectionNamespace,
		LeaderElectionID:              opts.LeaderElectionID,
		LeaderElectionReleaseOnCancel: true, // a rolling update hands over at once instead of after LeaseDuration
		LeaseDuration:                 &opts.LeaseDuration,
		RenewDeadline:                 &opts.RenewDeadline,
		RetryPeriod:                   &opts.RetryPeriod,
		GracefulShutdownTimeout:       &opts.GracefulShutdownTimeout,
		Cache:                         clusterAPICache(cacheOptions(opts.LeaderElectionNamespace), opts.ClusterAPINamespaces),
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("informers", cacheSynced(mgr)); err != nil {
		return nil, err
	}
	nmOpts := opts.NodeMaintenance
	nmOpts.LeaseNamespace = opts.LeaderElectionNamespace
	if nmOpts.Clock == nil {
		nmOpts.Clock = opts.Clock
	}
	if err := nodemaintenance.Setup(ctx, mgr, nmOpts); err != nil {
		return nil, fmt.Errorf("setting up the NodeMaintenance controller: %w", err)
	}
	// The Kubernikus integration and kubernikusCount checks share their
	// OpenStack clients, and so their tokens.
	accounts := openstack.NewAccounts()
	checks, err := checkDeps(mgr, opts, accounts)
	if err != nil {
		return nil, err
	}
	profiles, err := profile.Setup(mgr, profile.Options{
		MaxConcurrentReconciles: opts.ProfileConcurrency, LeaseNamespace: opts.LeaderElectionNamespace,
		SlackAPIURL: slackAPIURL(opts.SlackAPIURL), Checks: checks, SeedStateLabel: opts.SMCCompat,
		Clock: opts.Clock,
	})
	if err != nil {
		return nil, fmt.Errorf("setting up the MaintenanceProfile controller: %w", err)
	}
	if opts.Medik8sCompat {
		if err := medik8s.Setup(mgr, medik8s.Options{LeaseNamespace: opts.Medik8sLeaseNamespace}); err != nil {
			return nil, fmt.Errorf("setting up the medik8s NodeMaintenance controller (--medik8s-compat): %w", err)
		}
	}
	if opts.MachineAPI {
		if err := setupMachineAPI(mgr, opts); err != nil {
			return nil, fmt.Errorf("setting up the Machine API controllers (--machine-api): %w", err)
		}
	}
	var clusters *clusterapi.Clusters
	if opts.ClusterAPI {
		if clusters, err = capi.Setup(mgr, capi.Options{Metal3: opts.Metal3}); err != nil {
			return nil, fmt.Errorf("setting up the Cluster API bridge (--cluster-api): %w", err)
		}
	}
	if opts.ESX {
		if _, err := esx.Setup(mgr, esx.Options{ConfigPath: opts.ESXConfig, LeaseNamespace: opts.LeaderElectionNamespace}); err != nil {
			return nil, fmt.Errorf("setting up the ESX integration (--esx): %w", err)
		}
	}
	if opts.Kubernikus {
		k := kubernikus.Options{ConfigPath: opts.KubernikusConfig, CloudConfigPath: opts.OpenStackCloudConfig, Accounts: accounts, LeaseNamespace: opts.LeaderElectionNamespace}
		if _, err := kubernikus.Setup(mgr, k); err != nil {
			return nil, fmt.Errorf("setting up the Kubernikus integration (--kubernikus): %w", err)
		}
	}
	if opts.SeedConfigFile != "" {
		if err := setupSeedFile(mgr, opts); err != nil {
			return nil, fmt.Errorf("setting up the seed configuration file (--seed-config-file): %w", err)
		}
	}
	if len(opts.CloudEvents) > 0 {
		if err := setupCloudEvents(mgr, opts, profiles); err != nil {
			return nil, fmt.Errorf("setting up cloud events (--cloud-events): %w", err)
		}
	}
	if opts.Webhook.Port != 0 {
		if err := setupWebhook(ctx, mgr, cfg, opts, checks, log); err != nil {
			return nil, err
		}
	}
	if opts.servesTLS() {
		if err := cert.setup(mgr); err != nil {
			return nil, err
		}
	}
	if opts.DashboardAddr != "0" {
		if err := setupDashboard(mgr, opts, profiles, clusters, cert, log); err != nil {
			return nil, err
		}
	}
	return mgr, nil
}

// checkDeps are the services of checks: pitstop's Prometheus client, the
// URLs it may query, and the Secrets of pitstop's namespace that their
// credentials come from, read from the API server as notifications read
// them (no watch on Secrets). The profile controller and its webhook get
// the same.
func checkDeps(mgr ctrl.Manager, opts Options, accounts *openstack.Accounts) (check.Deps, error) {
	allow, err := check.ParseURLPrefixes(opts.PrometheusURLAllow)
	if err != nil {
		return check.Deps{}, &FlagError{"prometheus-url-allow", strings.Join(opts.PrometheusURLAllow, ","), err.Error()}
	}
	mailServers, err := profilesecret.ParseHosts(opts.NotifyHostAllow)
	if err != nil {
		return check.Deps{}, &FlagError{"notify-host-allow", strings.Join(opts.NotifyHostAllow, ","), err.Error()}
	}
	return check.Deps{
		Prometheus: check.NewPrometheusClient(), PrometheusURLs: allow, MailServers: mailServers,
		Secrets: mgr.GetAPIReader(), Namespace: opts.LeaderElectionNamespace,
		Kubernikus: openstack.Pools{Accounts: accounts, CloudConfigPath: opts.OpenStackCloudConfig},
		Reader:     mgr.GetAPIReader(),
	}, nil
}

// slackAPIURL ends the Slack API's base URL with the slash the Slack
// client appends method names to.
func slackAPIURL(u string) string {
	if u == "" || strings.HasSuffix(u, "/") {
		return u
	}
	return u + "/"
}

// cacheSynced is ready once the manager's informers have synced: before
// that, controllers would act on an empty view of the cluster.
func cacheSynced(mgr ctrl.Manager) healthz.Checker {
	return func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), 100*time.Millisecond)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return errors.New("informer caches have not synced yet")
		}
		return nil
	}
}
