package manager

import (
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/access"
	"github.com/pitstop-dev/pitstop/internal/controller/esx"
	"github.com/pitstop-dev/pitstop/internal/controller/kubernikus"
	"github.com/pitstop-dev/pitstop/internal/controller/machinemaintenance"
	"github.com/pitstop-dev/pitstop/internal/controller/medik8s"
	"github.com/pitstop-dev/pitstop/internal/controller/nodemaintenance"
	"github.com/pitstop-dev/pitstop/internal/plugin/check"
	"github.com/pitstop-dev/pitstop/internal/profilesecret"
)

// Options configure the manager. Each field is set from one flag of
// `pitstop run`; Validate names that flag when a value cannot work.
type Options struct {
	// MetricsAddr serves Prometheus metrics at /metrics; "0" turns it off.
	// On a loopback IP they are plain HTTP. Off it, they are HTTPS only,
	// with the serving certificate (Webhook.CertDir), and a scrape needs a
	// bearer token (Tokens) of a user allowed to get the non-resource URL
	// /metrics.
	MetricsAddr string
	// MetricsService is "namespace/name" of the Service in front of the
	// metrics: off a loopback IP, the certificate pitstop manages covers
	// its names, which scrapers check (the ServiceMonitor's serverName).
	MetricsService string
	// HealthAddr serves /healthz and /readyz; "0" turns it off.
	HealthAddr string
	// DashboardAddr serves the read-only dashboard and its JSON API; "0"
	// turns it off. Every replica serves it, leader or not. On a loopback
	// IP it is plain HTTP and answers only requests for localhost (and
	// DashboardAllowedHosts). Off it, it is HTTPS only, with the serving
	// certificate, and every request needs a bearer token (Tokens) of a
	// user allowed to get dashboard.AccessPath.
	DashboardAddr string
	// DashboardService is "namespace/name" of the Service in front of an
	// exposed dashboard, whose names the certificate pitstop manages
	// covers.
	DashboardService string
	// DashboardAllowedHosts are the hosts, besides localhost and the
	// loopback IPs, that requests to a dashboard on loopback may name.
	DashboardAllowedHosts []string
	// Tokens says which bearer tokens the metrics and the dashboard accept
	// off a loopback IP: those issued for its audience, and those for the
	// API server's own only if it says so.
	Tokens access.Tokens
	// DashboardLabels are the node labels the dashboard's /api/v1/info
	// shows (the maintenance-controller's dashboard.labelFilter).
	DashboardLabels []string
	// PprofAddr serves Go's runtime profiles at /debug/pprof/; "0" (the
	// default) turns it off. Bind it to localhost: profiles reveal internals.
	PprofAddr string

	// LeaderElection makes only one replica active at a time.
	LeaderElection bool
	// LeaderElectionNamespace holds the Lease.
	LeaderElectionNamespace string
	// LeaderElectionID names the Lease.
	LeaderElectionID string
	// LeaseDuration is how long a non-leader waits before taking over a
	// Lease that is not renewed.
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader keeps trying to renew before it
	// gives up leadership.
	RenewDeadline time.Duration
	// RetryPeriod is how often leader-election clients act.
	RetryPeriod time.Duration

	// GracefulShutdownTimeout bounds how long running reconciles may take to
	// finish after SIGTERM.
	GracefulShutdownTimeout time.Duration

	// Webhook configures the admission webhook server; Port 0 turns it off.
	Webhook WebhookOptions

	// NodeMaintenance tunes the NodeMaintenance controller.
	NodeMaintenance nodemaintenance.Options

	// Clock is the time the profile engine, its budget slots and (unless
	// NodeMaintenance.Clock is set) the NodeMaintenance controller judge
	// by; nil is the system's. The fault campaign runs managers with it
	// skewed.
	Clock clock.PassiveClock

	// ProfileConcurrency is how many nodes the profile engine evaluates at
	// once.
	ProfileConcurrency int

	// SlackAPIURL is the Slack Web API that slackThread notifications
	// call (Slack's own unless set, e.g. https://slack-gov.com/api/).
	SlackAPIURL string

	// PrometheusURLAllow are the URL prefixes prometheusInstant checks may
	// query (https://prometheus.monitoring.svc:9090/: scheme, host and
	// port exactly, the path as a prefix); empty allows any URL to a check
	// without credentials, and none to a check with a bearer token or
	// basic auth from a Secret.
	PrometheusURLAllow []string
	// NotifyHostAllow are the SMTP servers (host or host:port) mail
	// notifications may log in to with a password from a Secret; empty
	// allows none.
	NotifyHostAllow []string

	// Medik8sCompat also reconciles nodemaintenance.medik8s.io/v1beta1
	// NodeMaintenance objects through pitstop's own (their CRD must be
	// installed), and kubevirt.io/v1alpha3 ones when their CRD is.
	Medik8sCompat bool
	// Medik8sLeaseNamespace (with Medik8sCompat) holds the nodes' medik8s
	// Leases: the namespace the other medik8s components use, their
	// LEASE_NAMESPACE.
	Medik8sLeaseNamespace string

	// SMCCompat writes the node's state as the maintenance-controller's
	// label too (cloud.sap/maintenance-state), for the Cluster API
	// runtime extension and pod affinities that read it.
	SMCCompat bool

	// ClusterAPI runs the Cluster API bridge in a management cluster:
	// the runtime-extension-maintenance-controller's protocol between
	// Machines and their workload clusters' Nodes (docs/cluster-api.md).
	ClusterAPI bool
	// Metal3 (with ClusterAPI) reboots the BareMetalHost of a Machine
	// whose maintenance is approved.
	Metal3 bool
	// ClusterAPINamespaces (with ClusterAPI), when set, are the only
	// namespaces whose Machines the bridge watches, and so whose kubeconfig
	// Secrets and BareMetalHosts it reads; empty: every namespace.
	ClusterAPINamespaces []string

	// MachineAPI runs the Machine API controllers (Machine, MachineSet,
	// nodelink, MachineHealthCheck); the machine.openshift.io CRDs must be
	// installed.
	MachineAPI bool
	// MachineProviders are the providers Machines may use: kwok, aws.
	MachineProviders []string
	// AWSRegion is the region of aws Machines whose providerSpec names
	// none; empty: the AWS SDK's default.
	AWSRegion string
	// AWSEndpoint replaces EC2's regional endpoint (a VPC endpoint).
	AWSEndpoint string
	// MachineDrainTimeout bounds the drain of a deleted Machine's node;
	// zero: no bound.
	MachineDrainTimeout time.Duration
	// MachineDrainOnTimeout is Fail or ForceDelete, as NodeMaintenance
	// spec.drain.onTimeout.
	MachineDrainOnTimeout string

	// ESX follows the ESX hosts under the nodes through their vCenters
	// (the maintenance-controller's ESX integration), configured by the
	// file at ESXConfig.
	ESX bool
	// ESXConfig is the ESX integration's file (esx.yaml).
	ESXConfig string

	// Kubernikus runs the Kubernikus integration: the labels
	// cloud.sap/kubelet-needs-update and cloud.sap/delete-node.
	Kubernikus bool
	// KubernikusConfig is its file (kubernikus.yaml); missing: defaults.
	KubernikusConfig string
	// OpenStackCloudConfig is the cloudprovider.conf with the OpenStack
	// account of the Kubernikus integration and kubernikusCount checks.
	OpenStackCloudConfig string

	// SeedConfigFile, when set, is the maintenance-controller's
	// maintenance.yaml that pitstop follows: it applies the profiles the
	// file yields, and each edit of it, until the flag is dropped.
	SeedConfigFile string

	// CloudEvents are the clouds whose scheduled events pitstop follows
	// (aws); empty: none.
	CloudEvents []string
	// CloudEventsInterval is the time between two polls of the events.
	CloudEventsInterval time.Duration
	// ScheduledEventRetention is how long a finished MachineMaintenance
	// is kept.
	ScheduledEventRetention time.Duration
	// ScheduledEventMargin is kept free between an action's expected end
	// and its event's start (the latest safe start).
	ScheduledEventMargin time.Duration
	// ScheduledEventWarnBefore: an event no profile has taken up is
	// DeadlineAtRisk this long before its latest safe start.
	ScheduledEventWarnBefore time.Duration
}

// DefaultOptions are the defaults of `pitstop run`.
func DefaultOptions() Options {
	return Options{
		MetricsAddr:              "127.0.0.1:8080",
		MetricsService:           "pitstop-system/pitstop-metrics",
		DashboardService:         "pitstop-system/pitstop-dashboard",
		Tokens:                   access.Tokens{Audience: access.DefaultAudience},
		HealthAddr:               ":8081",
		DashboardAddr:            "127.0.0.1:8082",
		PprofAddr:                "0",
		MachineProviders:         []string{"aws"},
		MachineDrainOnTimeout:    string(pitstopv1alpha1.DrainTimeoutFail),
		LeaderElection:           true,
		LeaderElectionNamespace:  "pitstop-system",
		LeaderElectionID:         "pitstop-manager",
		LeaseDuration:            15 * time.Second,
		RenewDeadline:            10 * time.Second,
		RetryPeriod:              2 * time.Second,
		GracefulShutdownTimeout:  30 * time.Second,
		Webhook:                  DefaultWebhookOptions(),
		NodeMaintenance:          nodemaintenance.DefaultOptions(),
		ProfileConcurrency:       10,
		CloudEventsInterval:      5 * time.Minute,
		ESXConfig:                "config/esx.yaml",
		KubernikusConfig:         "config/kubernikus.yaml",
		OpenStackCloudConfig:     "provider/cloudprovider.conf",
		ScheduledEventRetention:  machinemaintenance.DefaultRetention,
		ScheduledEventMargin:     machinemaintenance.DefaultMargin,
		ScheduledEventWarnBefore: machinemaintenance.DefaultWarnBefore,
		Medik8sLeaseNamespace:    medik8s.LeaseNamespace,
	}
}

// FlagError is an option that cannot work, named by its flag.
type FlagError struct {
	Flag   string
	Value  string
	Reason string
}

// Validate returns a *FlagError for the first option that cannot work.
func (o Options) Validate() error {
	if err := validateAddr("metrics-bind-address", o.MetricsAddr); err != nil {
		return err
	}
	if err := validateAddr("health-probe-bind-address", o.HealthAddr); err != nil {
		return err
	}
	if err := validateAddr("dashboard-addr", o.DashboardAddr); err != nil {
		return err
	}
	if err := validateAddr("pprof-addr", o.PprofAddr); err != nil {
		return err
	}
	for _, other := range []struct{ flag, addr string }{
		{"metrics-bind-address", o.MetricsAddr}, {"health-probe-bind-address", o.HealthAddr}, {"dashboard-addr", o.DashboardAddr},
	} {
		if collide(other.addr, o.PprofAddr) {
			return &FlagError{"pprof-addr", o.PprofAddr, "must differ from --" + other.flag}
		}
	}
	if collide(o.MetricsAddr, o.HealthAddr) {
		return &FlagError{"health-probe-bind-address", o.HealthAddr, "must differ from --metrics-bind-address"}
	}
	if collide(o.MetricsAddr, o.DashboardAddr) {
		return &FlagError{"dashboard-addr", o.DashboardAddr, "must differ from --metrics-bind-address"}
	}
	if collide(o.HealthAddr, o.DashboardAddr) {
		return &FlagError{"dashboard-addr", o.DashboardAddr, "must differ from --health-probe-bind-address"}
	}
	if err := o.validateServing(); err != nil {
		return err
	}
	if err := validateMachineProviders(o.MachineProviders); err != nil {
		return err
	}
	if o.AWSEndpoint != "" {
		if u, err := url.Parse(o.AWSEndpoint); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return &FlagError{"aws-endpoint", o.AWSEndpoint, "must be an http(s) URL such as https://ec2.eu-west-1.amazonaws.com"}
		}
	}
	if o.MachineDrainTimeout != 0 && o.MachineDrainTimeout < time.Second {
		return &FlagError{"machine-drain-timeout", o.MachineDrainTimeout.String(), "must be 0 (no bound) or at least 1s"}
	}
	switch pitstopv1alpha1.DrainTimeoutPolicy(o.MachineDrainOnTimeout) {
	case pitstopv1alpha1.DrainTimeoutFail, pitstopv1alpha1.DrainTimeoutForceDelete:
	default:
		return &FlagError{"machine-drain-on-timeout", o.MachineDrainOnTimeout, "must be Fail or ForceDelete"}
	}
	if err := o.validateCloudEvents(); err != nil {
		return err
	}
	if o.ESX {
		if _, err := esx.LoadConfig(o.ESXConfig); err != nil {
			return &FlagError{"esx-config", o.ESXConfig, strings.ReplaceAll(err.Error(), "\n", "; ")}
		}
	}
	if o.Kubernikus {
		if _, err := kubernikus.LoadConfig(o.KubernikusConfig); err != nil {
			return &FlagError{"kubernikus-config", o.KubernikusConfig, strings.ReplaceAll(err.Error(), "\n", "; ")}
		}
	}
	if err := o.validateSeedConfigFile(); err != nil {
		return err
	}
	if o.Metal3 && !o.ClusterAPI {
		return &FlagError{"metal3", "true", "needs --cluster-api: Metal3 hosts are rebooted for Cluster API Machines"}
	}
	if err := validateClusterAPINamespaces(o.ClusterAPI, o.ClusterAPINamespaces); err != nil {
		return err
	}
	if err := o.Webhook.validate(); err != nil {
		return err
	}
	if o.SlackAPIURL != "" {
		u, err := url.Parse(o.SlackAPIURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return &FlagError{"slack-api-url", o.SlackAPIURL, "must be an http(s) URL such as https://slack.com/api/"}
		}
	}
	for _, prefix := range o.PrometheusURLAllow {
		if _, err := check.ParseURLPrefixes([]string{prefix}); err != nil {
			return &FlagError{"prometheus-url-allow", prefix, err.Error()}
		}
	}
	for _, host := range o.NotifyHostAllow {
		if _, err := profilesecret.ParseHosts([]string{host}); err != nil {
			return &FlagError{"notify-host-allow", host, err.Error()}
		}
	}
	if o.NodeMaintenance.MaxConcurrentReconciles < 1 {
		return &FlagError{"node-maintenance-concurrency", strconv.Itoa(o.NodeMaintenance.MaxConcurrentReconciles), "must be at least 1"}
	}
	if o.ProfileConcurrency < 1 {
		return &FlagError{"profile-concurrency", strconv.Itoa(o.ProfileConcurrency), "must be at least 1"}
	}
	if o.NodeMaintenance.EvictionConcurrency < 1 {
		return &FlagError{"eviction-concurrency", strconv.Itoa(o.NodeMaintenance.EvictionConcurrency), "must be at least 1"}
	}
	if err := validateEvictionBounds(o.NodeMaintenance); err != nil {
		return err
	}
	if o.Medik8sCompat {
		if errs := validation.IsDNS1123Label(o.Medik8sLeaseNamespace); len(errs) > 0 {
			return &FlagError{"medik8s-lease-namespace", o.Medik8sLeaseNamespace, "must be a namespace name: " + errs[0]}
		}
	}
	if !o.LeaderElection {
		return nil
	}
	if errs := validation.IsDNS1123Label(o.LeaderElectionNamespace); len(errs) > 0 {
		return &FlagError{"leader-election-namespace", o.LeaderElectionNamespace, errs[0]}
	}
	if errs := validation.IsDNS1123Subdomain(o.LeaderElectionID); len(errs) > 0 {
		return &FlagError{"leader-election-id", o.LeaderElectionID, errs[0]}
	}
	for _, d := range []struct {
		flag  string
		value time.Duration
	}{
		{"leader-election-lease-duration", o.LeaseDuration},
		{"leader-election-renew-deadline", o.RenewDeadline},
		{"leader-election-retry-period", o.RetryPeriod},
		{"graceful-shutdown-timeout", o.GracefulShutdownTimeout},
	} {
		if d.value <= 0 {
			return &FlagError{d.flag, d.value.String(), "must be positive"}
		}
	}
	if o.RenewDeadline >= o.LeaseDuration {
		return &FlagError{"leader-election-renew-deadline", o.RenewDeadline.String(), "must be shorter than --leader-election-lease-duration (" + o.LeaseDuration.String() + ")"}
	}
	if o.RetryPeriod >= o.RenewDeadline {
		return &FlagError{"leader-election-retry-period", o.RetryPeriod.String(), "must be shorter than --leader-election-renew-deadline (" + o.RenewDeadline.String() + ")"}
	}
	return nil
}

// validateAddr accepts "0" (off) or host:port with a port from 0 to 65535.
func validateAddr(flag, addr string) error {
	if addr == "0" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return &FlagError{flag, addr, "must be host:port, :port or 0 to turn it off"}
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return &FlagError{flag, addr, "port must be a number from 0 to 65535"}
	}
	return nil
}

// collide reports whether two valid addresses would bind the same port:
// the same port on the same host, or on all hosts ("" or an unspecified
// IP). Addresses turned off ("0") or on a port picked by the system (port
// 0) never collide.
func collide(a, b string) bool {
	if a == "0" || b == "0" {
		return false
	}
	hostA, portA, _ := net.SplitHostPort(a)
	hostB, portB, _ := net.SplitHostPort(b)
	if portA != portB || portA == "0" {
		return false
	}
	return hostA == hostB || allHosts(hostA) || allHosts(hostB)
}

// allHosts reports whether a listen host means every interface.
func allHosts(host string) bool {
	ip := net.ParseIP(host)
	return host == "" || (ip != nil && ip.IsUnspecified())
}
