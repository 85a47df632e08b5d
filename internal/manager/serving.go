package manager

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/pitstop-dev/pitstop/internal/access"
	"github.com/pitstop-dev/pitstop/internal/cloud/clusterapi"
	"github.com/pitstop-dev/pitstop/internal/controller/profile"
	"github.com/pitstop-dev/pitstop/internal/dashboard"
)

// metricsOptions serves the metrics on opts.MetricsAddr. On a loopback IP
// they are plain HTTP to anyone there. Off it, they are HTTPS only, with
// cert, and only to a bearer token the API server accepts for
// opts.Tokens' audience (TokenReview) of a user it allows to get the
// non-resource URL /metrics (SubjectAccessReview), as controller-runtime's
// filter asks them, but a token the API server rejects is 401, not 500; it
// keeps the answers a minute (a denial 10 seconds). Prometheus sends its
// token with every scrape: in clear, anyone on the path could replay it.
func metricsOptions(opts Options, cert *servingCert) metricsserver.Options {
	o := metricsserver.Options{BindAddress: opts.MetricsAddr}
	if offLoopback(opts.MetricsAddr) {
		o.FilterProvider = access.MetricsFilter(opts.Tokens)
		o.SecureServing = true
		o.TLSOpts = []func(*tls.Config){cert.configure}
	}
	return o
}

// setupDashboard serves the dashboard from this replica's cache, leader or
// not, with the profile engine's last decisions about each node (a standby
// has made none: it serves the results the leader recorded on the nodes).
// Events are read from the API server, a node's at a time, so that no
// informer holds every Event of the cluster. On a loopback IP it answers
// only requests for localhost (dashboard.LocalHosts). Off it, it serves
// HTTPS only, with cert, and a request needs a bearer token as
// opts.Tokens says, of a user allowed to get dashboard.AccessPath.
func setupDashboard(mgr ctrl.Manager, opts Options, profiles *profile.Reconciler, clusters *clusterapi.Clusters, cert *servingCert, log logr.Logger) error {
	addr := opts.DashboardAddr
	log = log.WithName("dashboard")
	dh := dashboard.NewHandler(mgr.GetClient(), mgr.GetAPIReader(), profiles.Evaluator(mgr.GetClient()))
	dh.ShowLabels(opts.DashboardLabels)
	if clusters != nil {
		dh.ServeClusters(func(ctx context.Context) ([]clusterapi.ClusterView, error) {
			return clusters.View(ctx, mgr.GetClient())
		})
	}
	server := &dashboard.Server{Addr: addr, Log: log}
	if offLoopback(addr) {
		a, err := access.New(mgr.GetConfig(), mgr.GetHTTPClient(), opts.Tokens, log)
		if err != nil {
			return err
		}
		server.Handler = a.Wrap(dashboard.AccessPath, "pitstop dashboard", dh)
		server.Authenticated = true
		server.TLS = &tls.Config{}
		cert.configure(server.TLS)
	} else {
		server.Handler = dashboard.LocalHosts(opts.DashboardAllowedHosts, dh)
	}
	if err := mgr.Add(server); err != nil {
		return fmt.Errorf("adding the dashboard: %w", err)
	}
	return nil
}

// IsLoopback says whether a valid listen address is on a loopback IP
// (127.0.0.1, ::1): only the pod itself, or the machine pitstop runs on,
// reaches it. A kubectl port-forward into the pod is such a reach, which
// the API server allows only to users granted pods/portforward. A host
// name counts as not loopback, whatever it resolves to.
func IsLoopback(addr string) bool {
	host, _, _ := net.SplitHostPort(addr)
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// offLoopback says whether a valid listen address is on and not on a
// loopback IP: what listens there is served over TLS, with a token.
func offLoopback(addr string) bool { return addr != "0" && !IsLoopback(addr) }

// servesTLS says whether the metrics or the dashboard listen off a
// loopback IP, and so need the serving certificate.
func (o Options) servesTLS() bool {
	return len(o.tlsServers()) > 0
}

// tlsServers are the servers that listen off a loopback IP: their flag,
// address, and the flag and value of the Service in front of them.
func (o Options) tlsServers() []struct{ flag, addr, serviceFlag, service string } {
	var out []struct{ flag, addr, serviceFlag, service string }
	if offLoopback(o.MetricsAddr) {
		out = append(out, struct{ flag, addr, serviceFlag, service string }{"metrics-bind-address", o.MetricsAddr, "metrics-service", o.MetricsService})
	}
	if offLoopback(o.DashboardAddr) {
		out = append(out, struct{ flag, addr, serviceFlag, service string }{"dashboard-addr", o.DashboardAddr, "dashboard-service", o.DashboardService})
	}
	return out
}

// validateServing checks the options of the metrics' and the dashboard's
// TLS, tokens and hosts.
func (o Options) validateServing() error {
	for _, h := range o.DashboardAllowedHosts {
		if net.ParseIP(h) == nil && len(validation.IsDNS1123Subdomain(strings.ToLower(h))) > 0 {
			return &FlagError{"dashboard-allowed-hosts", h, "must be a host name or an IP address, without a scheme or port"}
		}
	}
	if o.Tokens.Audience == "" {
		return &FlagError{"token-audience", "", "must name the audience tokens are issued for (kubectl create token NAME --audience pitstop)"}
	}
	for _, s := range o.tlsServers() {
		if o.Webhook.Port == 0 && o.Webhook.ManageCertificate {
			return &FlagError{s.flag, s.addr, "off a loopback IP it is served over TLS only, with the serving certificate pitstop keeps for its webhook, " +
				"and the webhook is off (--webhook-port=0): bind it to 127.0.0.1 (plain HTTP, reached from this machine or pod only), " +
				"turn the webhook on, or put tls.crt and tls.key in --webhook-cert-dir and pass --webhook-manage-certificate=false"}
		}
		if ns, name, ok := strings.Cut(s.service, "/"); !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Label(name)) > 0 {
			return &FlagError{s.serviceFlag, s.service, "must be namespace/name of the Service in front of --" + s.flag}
		}
	}
	return nil
}

// servingHosts are the names the serving certificate must cover for the
// servers off a loopback IP: each one's Service, as scrapers and clients
// in the cluster name it.
func (o Options) servingHosts() []string {
	var hosts []string
	for _, s := range o.tlsServers() {
		ns, name, _ := strings.Cut(s.service, "/")
		hosts = append(hosts, name+"."+ns+".svc", name+"."+ns+".svc.cluster.local")
	}
	return hosts
}

// servingCert serves the tls.crt and tls.key of dir, the webhook's
// certificate directory, kept current as pitstop renews them (or
// cert-manager does).
type servingCert struct {
	dir     string
	watcher *certwatcher.CertWatcher
}

// setup reads the certificate, which must be there (the webhook's setup
// has written it, or cert-manager's Secret is mounted), and has the
// manager watch its files on every replica.
func (c *servingCert) setup(mgr ctrl.Manager) error {
	w, err := certwatcher.New(filepath.Join(c.dir, corev1.TLSCertKey), filepath.Join(c.dir, corev1.TLSPrivateKeyKey))
	if err != nil {
		return fmt.Errorf("reading the serving certificate of the metrics and dashboard from --webhook-cert-dir %s: %w", c.dir, err)
	}
	c.watcher = w
	return mgr.Add(w) // the watcher needs no leader election
}

// configure makes cfg serve the certificate, over HTTP/1.1 only: HTTP/2's
// rapid resets (CVE-2023-44487) would let any client on the network load
// the manager before it is authenticated.
func (c *servingCert) configure(cfg *tls.Config) {
	cfg.MinVersion = tls.VersionTLS12
	cfg.NextProtos = []string{"http/1.1"}
	cfg.GetCertificate = c.getCertificate
}

func (c *servingCert) getCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c.watcher == nil {
		return nil, errors.New("no serving certificate has been read")
	}
	return c.watcher.GetCertificate(hello)
}
