package manager

import (
	"errors"
	"net"
	"testing"
	"time"
)

// TestTheDashboardListensOnLoopbackByDefault: unless told otherwise, the
// dashboard is reached only from the pod itself (kubectl port-forward) or
// the machine pitstop runs on.
func TestTheDashboardListensOnLoopbackByDefault(t *testing.T) {
	addr := DefaultOptions().DashboardAddr
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		t.Errorf("the dashboard listens on %q by default, want a loopback address", addr)
	}
}

// TestOptionsAreCheckedNamingTheFlag: off a loopback IP the metrics and
// the dashboard are served over TLS only, so they need a certificate, and
// evictions are bounded across the manager; each option that cannot work
// is refused naming its flag.
func TestOptionsAreCheckedNamingTheFlag(t *testing.T) {
	for _, tc := range []struct {
		name string
		tune func(*Options)
		flag string // empty: valid
	}{
		{"the defaults: metrics and dashboard on loopback, plain HTTP", func(*Options) {}, ""},
		{"the defaults without the webhook", func(o *Options) { o.Webhook.Port = 0 }, ""},
		{"metrics off loopback with the webhook's certificate", func(o *Options) { o.MetricsAddr = ":8080" }, ""},
		{"metrics off loopback without the webhook have no certificate", func(o *Options) { o.MetricsAddr, o.Webhook.Port = ":8080", 0 }, "metrics-bind-address"},
		{"a dashboard off loopback without the webhook has no certificate", func(o *Options) { o.DashboardAddr, o.Webhook.Port = ":8082", 0 }, "dashboard-addr"},
		{"without the webhook, a certificate someone else writes", func(o *Options) {
			o.MetricsAddr, o.Webhook.Port, o.Webhook.ManageCertificate = ":8080", 0, false
		}, ""},
		{"metrics off loopback behind a Service that is not namespace/name", func(o *Options) { o.MetricsAddr, o.MetricsService = ":8080", "pitstop-metrics" }, "metrics-service"},
		{"an allowed host with a port", func(o *Options) { o.DashboardAllowedHosts = []string{"tunnel.example:8082"} }, "dashboard-allowed-hosts"},
		{"allowed hosts by name and IP", func(o *Options) { o.DashboardAllowedHosts = []string{"Tunnel.Example", "10.0.0.1"} }, ""},
		{"no audience", func(o *Options) { o.Tokens.Audience = "" }, "token-audience"},
		{"no eviction in flight", func(o *Options) { o.NodeMaintenance.Evictions.InFlight = 0 }, "evictions-in-flight"},
		{"a rate of nothing a second", func(o *Options) { o.NodeMaintenance.Evictions.Rate = 0 }, "eviction-rate"},
		{"a negative burst", func(o *Options) { o.NodeMaintenance.Evictions.Burst = -1 }, "eviction-burst"},
		{"a negative settle period", func(o *Options) { o.NodeMaintenance.BudgetSettle = -time.Second }, "pdb-status-settle"},
		{"no settle period: budgets trusted at once after a gap", func(o *Options) { o.NodeMaintenance.BudgetSettle = 0 }, ""},
		{"medik8s Leases in a namespace of another name", func(o *Options) { o.Medik8sCompat, o.Medik8sLeaseNamespace = true, "remediation" }, ""},
		{"medik8s Leases in no namespace", func(o *Options) { o.Medik8sCompat, o.Medik8sLeaseNamespace = true, "" }, "medik8s-lease-namespace"},
		{"medik8s Leases in a namespace no namespace can be called", func(o *Options) { o.Medik8sCompat, o.Medik8sLeaseNamespace = true, "Medik8s_Leases" }, "medik8s-lease-namespace"},
		{"a medik8s Lease namespace is not looked at without the compatibility", func(o *Options) { o.Medik8sLeaseNamespace = "Medik8s_Leases" }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			tc.tune(&o)
			err := o.Validate()
			var fe *FlagError
			switch {
			case tc.flag == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.flag != "" && (!errors.As(err, &fe) || fe.Flag != tc.flag):
				t.Errorf("got %v, want an error naming --%s", err, tc.flag)
			}
		})
	}
}

// TestMetricsAreTLSOnlyOffLoopback: the metrics listen on loopback by
// default (`pitstop run` with a kubeconfig); the metrics server is asked
// for TLS, with a token, exactly when it listens off a loopback IP.
func TestMetricsAreTLSOnlyOffLoopback(t *testing.T) {
	if addr := DefaultOptions().MetricsAddr; !IsLoopback(addr) {
		t.Errorf("the metrics listen on %q by default, want a loopback address (plain HTTP, this machine only)", addr)
	}
	for addr, secure := range map[string]bool{"127.0.0.1:8080": false, "[::1]:8080": false, "0": false, ":8080": true, "0.0.0.0:8080": true, "10.0.0.1:8080": true, "localhost:8080": true} {
		o := DefaultOptions()
		o.MetricsAddr = addr
		m := metricsOptions(o, &servingCert{})
		if m.SecureServing != secure || (m.FilterProvider != nil) != secure || (len(m.TLSOpts) > 0) != secure {
			t.Errorf("metrics on %s: secure %v, filter %v, TLS options %d; want TLS and a token: %v", addr, m.SecureServing, m.FilterProvider != nil, len(m.TLSOpts), secure)
		}
	}
}
