package install

import (
	"fmt"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// TestUntrustedChartScrapesMetricsOverTLS: rendered with metrics on, the
// chart runs the metrics off the pod's loopback (so the manager serves
// them over HTTPS only) with the certificate of the webhook's Secret,
// which pitstop (or cert-manager) makes valid for the metrics Service's
// name; its ServiceMonitor scrapes https, checks the certificate against
// that Secret's CA as that name, and sends a token for audience pitstop.
// An exposed dashboard is served the same way, behind port 443.
func TestUntrustedChartScrapesMetricsOverTLS(t *testing.T) {
	metricsName := "pitstop-metrics." + namespace + ".svc"
	for _, certManager := range []bool{false, true} {
		set := []string{"metrics.serviceMonitor.enabled=true", "dashboard.expose=true"}
		if certManager {
			set = append(set, "webhook.certManager.enabled=true")
		}
		objs := testutil.RenderChart(t, set...)
		d := deployment(t, objs)
		assertArgs(t, d, []string{
			"--metrics-bind-address=:8080", "--metrics-service=" + namespace + "/pitstop-metrics",
			"--dashboard-addr=:8082", "--dashboard-service=" + namespace + "/pitstop-dashboard",
			"--webhook-cert-dir=/var/run/pitstop/webhook-certs", "--token-audience=pitstop", "--accept-api-server-tokens=false",
		}, nil)
		if !mountsCertificate(d) {
			t.Errorf("certManager=%v: the serving certificate is not mounted at --webhook-cert-dir: %+v", certManager, d.Spec.Template.Spec.Volumes)
		}
		if s := find(objs, "Service", namespace, "pitstop-metrics"); s == nil {
			t.Fatal("no Service pitstop-metrics")
		}
		sm := find(objs, "ServiceMonitor", namespace, "pitstop")
		if sm == nil {
			t.Fatal("no ServiceMonitor")
		}
		endpoint := sm.Object["spec"].(map[string]any)["endpoints"].([]any)[0].(map[string]any)
		if endpoint["scheme"] != "https" {
			t.Errorf("certManager=%v: the ServiceMonitor scrapes %v, want https", certManager, endpoint["scheme"])
		}
		tlsConfig, _ := endpoint["tlsConfig"].(map[string]any)
		ca, _, _ := unstructured.NestedStringMap(tlsConfig, "ca", "secret")
		if tlsConfig["serverName"] != metricsName || ca["name"] != "pitstop-webhook-cert" || ca["key"] != "ca.crt" || tlsConfig["insecureSkipVerify"] != nil {
			t.Errorf("certManager=%v: the ServiceMonitor's tlsConfig %v, want serverName %s checked against ca.crt of Secret pitstop-webhook-cert", certManager, tlsConfig, metricsName)
		}
		if endpoint["bearerTokenFile"] != "/var/run/secrets/pitstop/token" {
			t.Errorf("certManager=%v: the ServiceMonitor sends %v, want the projected token for audience pitstop", certManager, endpoint["bearerTokenFile"])
		}
		ports, _, _ := unstructured.NestedSlice(find(objs, "Service", namespace, "pitstop-dashboard").Object, "spec", "ports")
		if len(ports) != 1 || fmt.Sprint(ports[0].(map[string]any)["port"]) != "443" {
			t.Errorf("certManager=%v: the dashboard's Service ports %v, want 443 (HTTPS)", certManager, ports)
		}
		if certManager {
			cert := find(objs, "Certificate", namespace, "pitstop-webhook")
			names, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
			secret, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
			if !slices.Contains(names, metricsName) || !slices.Contains(names, "pitstop-dashboard."+namespace+".svc") || secret != "pitstop-webhook-cert" {
				t.Errorf("cert-manager's Certificate covers %v in Secret %s, want %s and the dashboard's name in pitstop-webhook-cert", names, secret, metricsName)
			}
		}
	}
	// Without the webhook there is no certificate to serve: the chart says
	// so instead of rendering metrics that cannot start.
	if _, err := testutil.Helm(t, "template", "pitstop", repoPath(t, "charts", "pitstop"), "--set", "webhook.enabled=false"); err == nil {
		t.Error("the chart renders metrics without the webhook's certificate")
	}
}

// mountsCertificate says whether the manager's container mounts the
// webhook's certificate volume at the chart's --webhook-cert-dir.
func mountsCertificate(d *appsv1.Deployment) bool {
	return slices.ContainsFunc(d.Spec.Template.Spec.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == "webhook-certs" && m.MountPath == "/var/run/pitstop/webhook-certs"
	})
}
