package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/pitstop-dev/pitstop/internal/logging"
	"github.com/pitstop-dev/pitstop/internal/manager"
)

// logOptions are the logging flags of every long-running command.
type logOptions struct {
	level  string
	format string
}

func (o *logOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.level, "log-level", "info", "log level: error, info, debug, or a verbosity number (0-10)")
	fs.StringVar(&o.format, "log-format", "json", "log format: json (one object a line) or text")
}

func (o *logOptions) validate() error {
	if _, err := logging.ParseLevel(o.level); err != nil {
		return &manager.FlagError{Flag: "log-level", Value: o.level, Reason: err.Error()}
	}
	if err := logging.ValidateFormat(o.format); err != nil {
		return &manager.FlagError{Flag: "log-format", Value: o.format, Reason: err.Error()}
	}
	return nil
}

// addManagerFlags binds the manager's options to flags, with o's current
// values as defaults.
func addManagerFlags(fs *pflag.FlagSet, o *manager.Options) {
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", o.MetricsAddr, "address of the Prometheus /metrics endpoint, or 0 to turn it off; on a loopback IP it is plain HTTP, off it HTTPS only (the certificate of --webhook-cert-dir) and a scrape needs a bearer token for --token-audience of a user allowed to get the non-resource URL /metrics")
	fs.StringVar(&o.MetricsService, "metrics-service", o.MetricsService, "namespace/name of the Service in front of the metrics: off a loopback IP, the certificate pitstop manages covers its names")
	fs.StringVar(&o.HealthAddr, "health-probe-bind-address", o.HealthAddr, "address of /healthz and /readyz, or 0 to turn them off")
	fs.StringVar(&o.PprofAddr, "pprof-addr", o.PprofAddr, "address serving Go's runtime profiles at /debug/pprof/ (bind it to localhost), or 0 to turn it off")
	fs.StringVar(&o.DashboardAddr, "dashboard-addr", o.DashboardAddr, "address of the read-only dashboard and its JSON API (every replica serves it), or 0 to turn it off; on a loopback IP it is plain HTTP, needs no token (reach it in a cluster with kubectl port-forward) and answers only requests for localhost, 127.0.0.1 or [::1]; on any other address it is HTTPS only (the certificate of --webhook-cert-dir) and every request needs a bearer token for --token-audience of a user allowed to get the non-resource URL /pitstop/dashboard")
	fs.StringVar(&o.DashboardService, "dashboard-service", o.DashboardService, "namespace/name of the Service in front of a dashboard off a loopback IP, whose names the certificate pitstop manages covers")
	fs.StringSliceVar(&o.DashboardAllowedHosts, "dashboard-allowed-hosts", o.DashboardAllowedHosts, "host names or IPs, besides localhost and the loopback IPs, that requests to a dashboard on a loopback IP may name in their Host header (repeated or comma-separated); others are refused, so that no web page reads it through DNS rebinding")
	fs.StringVar(&o.Tokens.Audience, "token-audience", o.Tokens.Audience, "audience the bearer tokens of the metrics and dashboard off a loopback IP must be issued for (kubectl create token NAME --audience pitstop, or a projected ServiceAccount token with that audience)")
	fs.BoolVar(&o.Tokens.APIServerAudience, "accept-api-server-tokens", o.Tokens.APIServerAudience, "also accept, off a loopback IP, bearer tokens issued for the API server (a ServiceAccount's default token): for a Prometheus that cannot send a token for --token-audience; such a token, if it leaks, is valid against the API server")
	fs.StringSliceVar(&o.DashboardLabels, "dashboard-labels", o.DashboardLabels, "node labels the dashboard's /api/v1/info shows for each node, repeated or comma-separated (the maintenance-controller's dashboard.labelFilter)")
	fs.DurationVar(&o.GracefulShutdownTimeout, "graceful-shutdown-timeout", o.GracefulShutdownTimeout, "how long running work may take to finish after SIGTERM")
	fs.IntVar(&o.NodeMaintenance.MaxConcurrentReconciles, "node-maintenance-concurrency", o.NodeMaintenance.MaxConcurrentReconciles, "how many NodeMaintenances are worked on at once")
	fs.IntVar(&o.ProfileConcurrency, "profile-concurrency", o.ProfileConcurrency, "how many nodes the MaintenanceProfile engine evaluates at once")
	fs.IntVar(&o.NodeMaintenance.EvictionConcurrency, "eviction-concurrency", o.NodeMaintenance.EvictionConcurrency, "how many evictions of one node's pods are in flight at once")
	fs.IntVar(&o.NodeMaintenance.Evictions.InFlight, "evictions-in-flight", o.NodeMaintenance.Evictions.InFlight, "how many evictions and pod deletions of all drains together are in flight at once")
	fs.Float64Var(&o.NodeMaintenance.Evictions.Rate, "eviction-rate", o.NodeMaintenance.Evictions.Rate, "how many evictions and pod deletions of all drains together may start a second, on average")
	fs.IntVar(&o.NodeMaintenance.Evictions.Burst, "eviction-burst", o.NodeMaintenance.Evictions.Burst, "how many evictions and pod deletions may start at once after a quiet spell (the token bucket of --eviction-rate)")
	fs.BoolVar(&o.NodeMaintenance.AllowSingleControlPlane, "allow-single-control-plane-maintenance", o.NodeMaintenance.AllowSingleControlPlane, "let the only control-plane node of a cluster (kind, a one-server kubeadm or k3s) be cordoned and drained, which the quorum rule otherwise never allows; a cluster with two or more control-plane nodes keeps quorum either way")
	fs.DurationVar(&o.NodeMaintenance.BudgetSettle, "pdb-status-settle", o.NodeMaintenance.BudgetSettle, "after pitstop lost sight of the API server (or took over a drain another process started), how long a PodDisruptionBudget that allows disruptions and whose status has not changed since is distrusted: the pods it covers are not evicted until its status changes or this passes (0: trusted at once; a budget whose status.observedGeneration lags is never trusted)")
	fs.StringVar(&o.SlackAPIURL, "slack-api-url", o.SlackAPIURL, "Slack Web API base URL for slackThread notifications (default Slack's own; https://slack-gov.com/api/ for GovSlack)")
	fs.StringSliceVar(&o.PrometheusURLAllow, "prometheus-url-allow", o.PrometheusURLAllow, "URL prefixes prometheusInstant checks may query, repeated or comma-separated (https://prometheus.monitoring.svc:9090/: scheme, host and port exactly, the path as a prefix); a profile naming another URL is refused. Unset: any URL for a check without credentials, and none for a check with a bearerToken or basicAuth from a Secret")
	fs.StringSliceVar(&o.NotifyHostAllow, "notify-host-allow", o.NotifyHostAllow, "SMTP servers, host or host:port, repeated or comma-separated, that mail notifications may log in to with a password from a Secret (the profile names the server, so any profile author could otherwise have the password sent to a server of their own); a profile naming another is refused. Unset: none. A mail without auth goes to any server")
	fs.BoolVar(&o.MachineAPI, "machine-api", o.MachineAPI, "run the Machine API controllers (Machine, MachineSet, nodelink, MachineHealthCheck) for machine.openshift.io/v1beta1 objects; their CRDs must be installed (config/crd/machineapi)")
	fs.StringSliceVar(&o.MachineProviders, "machine-providers", o.MachineProviders, "providers that create and delete Machines' instances: aws, kwok (kwok makes simulated nodes: local clusters only)")
	fs.StringVar(&o.AWSRegion, "aws-region", o.AWSRegion, "region of aws Machines whose providerSpec names none (default: the AWS SDK's, e.g. AWS_REGION)")
	fs.StringVar(&o.AWSEndpoint, "aws-endpoint", o.AWSEndpoint, "EC2 endpoint URL replacing the region's (e.g. a VPC endpoint)")
	fs.DurationVar(&o.MachineDrainTimeout, "machine-drain-timeout", o.MachineDrainTimeout, "bound on the drain of a deleted Machine's node (0: none), then --machine-drain-on-timeout")
	fs.StringVar(&o.MachineDrainOnTimeout, "machine-drain-on-timeout", o.MachineDrainOnTimeout, "after --machine-drain-timeout: Fail (the Machine's deletion waits on the failed drain) or ForceDelete (the remaining pods are deleted past their PodDisruptionBudgets, recorded in Events, and the deletion goes on)")
	fs.StringSliceVar(&o.CloudEvents, "cloud-events", o.CloudEvents, "follow the events this cloud schedules for the cluster's instances (aws): MachineMaintenance objects, the pitstop.dev/scheduled-event node label, the deadline check; uses --aws-region and --aws-endpoint and the Machines' credentials (see docs/cloud-events.md)")
	fs.DurationVar(&o.CloudEventsInterval, "cloud-events-interval", o.CloudEventsInterval, "time between two polls of the cloud's scheduled events (at least 10s); the first is at start")
	fs.DurationVar(&o.ScheduledEventRetention, "scheduled-event-retention", o.ScheduledEventRetention, "how long a finished MachineMaintenance is kept for the record")
	fs.DurationVar(&o.ScheduledEventMargin, "scheduled-event-margin", o.ScheduledEventMargin, "time kept free between an action's expected end and its event's start, in the latest safe start")
	fs.DurationVar(&o.ScheduledEventWarnBefore, "scheduled-event-warn-before", o.ScheduledEventWarnBefore, "an event no profile has taken up is DeadlineAtRisk this long before its latest safe start")
	fs.BoolVar(&o.Medik8sCompat, "medik8s-compat", o.Medik8sCompat, "also reconcile nodemaintenance.medik8s.io/v1beta1 NodeMaintenance objects, and kubevirt.io/v1alpha3 ones when that CRD is installed (their CRDs: the chart installs them, or kubectl apply -f config/crd/medik8s/), through pitstop's own NodeMaintenance")
	fs.StringVar(&o.Medik8sLeaseNamespace, "medik8s-lease-namespace", envOr("LEASE_NAMESPACE", o.Medik8sLeaseNamespace), "with --medik8s-compat: the namespace of the nodes' medik8s Leases, the one Node Health Check and Self Node Remediation use, created when missing; $LEASE_NAMESPACE, which the medik8s operator reads, sets the default")
	fs.BoolVar(&o.SMCCompat, "smc-compat", o.SMCCompat, "also write the node's state as the maintenance-controller's label cloud.sap/maintenance-state, for the Cluster API runtime extension and pod affinities that read it, and its record as the annotation cloud.sap/maintenance-data, and export the maintenance-controller's metrics (maintenance_controller_*)")
	fs.BoolVar(&o.ESX, "esx", o.ESX, "follow the ESX hosts under the nodes through their vCenters, as the maintenance-controller's ESX integration: label nodes cloud.sap/esx-in-maintenance and cloud.sap/esx-version, and drain, shut down and power on again the VMs of nodes labelled cloud.sap/esx-reboot-ok=true (see docs/esx.md)")
	fs.StringVar(&o.ESXConfig, "esx-config", o.ESXConfig, "with --esx: the esx.yaml file (the maintenance-controller's format, vCenter credentials included: mount it from a Secret), read again before every check")
	fs.BoolVar(&o.Kubernikus, "kubernikus", o.Kubernikus, "run the Kubernikus integration, as the maintenance-controller's: label nodes cloud.sap/kubelet-needs-update, and drain a node labelled cloud.sap/delete-node=true and then delete its OpenStack server so that its node pool replaces it (see docs/kubernikus.md)")
	fs.StringVar(&o.KubernikusConfig, "kubernikus-config", o.KubernikusConfig, "with --kubernikus: the kubernikus.yaml file (the maintenance-controller's format), read again before every reconcile; missing: the defaults")
	fs.StringVar(&o.OpenStackCloudConfig, "openstack-cloud-config", o.OpenStackCloudConfig, "the OpenStack account ([Global] of a cloudprovider.conf) of --kubernikus and of kubernikusCount checks that name no Secret")
	fs.StringVar(&o.SeedConfigFile, "seed-config-file", o.SeedConfigFile, "the maintenance-controller's maintenance.yaml to follow while switching (mount it from its ConfigMap): pitstop applies the MaintenanceProfiles it imports to (labelled pitstop.dev/managed-by=seed-file), and each edit; an edit that does not import changes nothing and is reported on the profiles (see docs/migrating-from-maintenance-controller.md). It must import at start. Empty: off")
	fs.BoolVar(&o.ClusterAPI, "cluster-api", o.ClusterAPI, "in a Cluster API management cluster: hold the deletion of Machines labelled runtime-extension-maintenance-controller.cloud.sap/enabled=true until their workload node is approved, and carry maintenance requests between Machines and workload Nodes (see docs/cluster-api.md)")
	fs.StringSliceVar(&o.ClusterAPINamespaces, "cluster-api-namespaces", o.ClusterAPINamespaces, "with --cluster-api: the only namespaces, repeated or comma-separated, whose Machines the bridge watches, and so whose <cluster>-kubeconfig Secrets and BareMetalHosts it reads (the chart's clusterAPI.namespaces, each granted by a Role there); unset: every namespace")
	fs.BoolVar(&o.Metal3, "metal3", o.Metal3, "with --cluster-api: reboot the Metal3 BareMetalHost of a Machine whose maintenance is approved (annotation reboot.metal3.io/...)")
	fs.IntVar(&o.Webhook.Port, "webhook-port", o.Webhook.Port, "port of the admission webhook server, or 0 to turn the webhook off")
	fs.StringVar(&o.Webhook.CertDir, "webhook-cert-dir", o.Webhook.CertDir, "directory where pitstop writes the webhook's serving certificate")
	fs.StringVar(&o.Webhook.Service, "webhook-service", o.Webhook.Service, "namespace/name of the Service through which the API server reaches the webhook")
	fs.StringVar(&o.Webhook.URL, "webhook-url", o.Webhook.URL, "https://host:port the API server calls instead of --webhook-service, for a manager outside the cluster: pitstop then registers a webhook configuration of its own and removes it when it stops")
	fs.StringVar(&o.Webhook.ConfigName, "webhook-configuration", o.Webhook.ConfigName, "name of the ValidatingWebhookConfiguration whose CA bundle pitstop keeps current (the install's; with --webhook-url, the one pitstop registers)")
	fs.StringVar(&o.Webhook.SecretName, "webhook-secret", o.Webhook.SecretName, "name of the Secret, in the manager's namespace, that holds the webhook's CA and serving certificate")
	fs.BoolVar(&o.Webhook.ManageCertificate, "webhook-manage-certificate", o.Webhook.ManageCertificate, "create and renew the webhook's serving certificate and write its CA into the webhook configuration; false: serve tls.crt and tls.key that cert-manager puts in --webhook-cert-dir")
}

// addLeaderElectionFlags binds the leader-election options to flags.
func addLeaderElectionFlags(fs *pflag.FlagSet, o *manager.Options) {
	fs.BoolVar(&o.LeaderElection, "leader-elect", o.LeaderElection, "run only while holding the leader Lease, so that several replicas can run safely")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", o.LeaderElectionNamespace, "namespace of the leader Lease (default: the manager's own namespace)")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", o.LeaderElectionID, "name of the leader Lease")
	fs.DurationVar(&o.LeaseDuration, "leader-election-lease-duration", o.LeaseDuration, "how long standby replicas wait before taking over a Lease that is not renewed")
	fs.DurationVar(&o.RenewDeadline, "leader-election-renew-deadline", o.RenewDeadline, "how long the leader tries to renew before giving up leadership")
	fs.DurationVar(&o.RetryPeriod, "leader-election-retry-period", o.RetryPeriod, "how often leader-election clients act")
}

// envOr is the environment variable name when it is set and not empty,
// else fallback.
func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

// serviceAccountNamespace is where Kubernetes tells a pod its namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// ownNamespace is the namespace the manager runs in: $POD_NAMESPACE (set
// through the downward API), else the service account's namespace, else
// fallback.
func ownNamespace(fallback string) string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	if data, err := os.ReadFile(serviceAccountNamespace); err == nil {
		if ns := strings.TrimSpace(string(data)); ns != "" {
			return ns
		}
	}
	return fallback
}

// loadConfig returns the client configuration: the --kubeconfig file if
// given, else the in-cluster service account, else $KUBECONFIG (or
// ~/.kube/config).
func loadConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		if _, err := os.Stat(kubeconfig); err != nil {
			return nil, usageError{&manager.FlagError{Flag: "kubeconfig", Value: kubeconfig, Reason: "cannot read the file: " + errors.Unwrap(err).Error()}}
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, usageError{&manager.FlagError{Flag: "kubeconfig", Value: kubeconfig, Reason: err.Error()}}
		}
		return withClientDefaults(cfg), nil
	}
	cfg, err := rest.InClusterConfig()
	if err == nil {
		return withClientDefaults(cfg), nil
	}
	if !errors.Is(err, rest.ErrNotInCluster) {
		return nil, fmt.Errorf("loading in-cluster configuration: %w", err)
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules() // $KUBECONFIG, then ~/.kube/config
	cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("no cluster to talk to: not running in a cluster, and no usable kubeconfig (--kubeconfig, $KUBECONFIG or ~/.kube/config): %w", err)
	}
	return withClientDefaults(cfg), nil
}

// inClusterTokenFile is where Kubernetes mounts a pod's service account
// token; client-go's in-cluster configuration reads it from there.
const inClusterTokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"

// inCluster says whether cfg, which loadConfig returned for kubeconfig, is
// the in-cluster service account's: pitstop runs in a pod.
func inCluster(kubeconfig string, cfg *rest.Config) bool {
	return kubeconfig == "" && cfg.BearerTokenFile == inClusterTokenFile
}

// withClientDefaults sets what controller-runtime would: no client-side rate
// limit (the API server's priority and fairness does that job) and a user
// agent that names pitstop in audit logs.
func withClientDefaults(cfg *rest.Config) *rest.Config {
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = -1, -1
	}
	cfg.UserAgent = "pitstop"
	return cfg
}
