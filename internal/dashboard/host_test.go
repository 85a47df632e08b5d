package dashboard_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/pitstop-dev/pitstop/internal/manager"
)

// TestUntrustedHostIsRefusedOnTheLoopbackDashboard: the dashboard on
// loopback (the chart's, reached by kubectl port-forward) asks no token,
// so a web page whose name resolves to 127.0.0.1 (DNS rebinding) could
// read it as its own origin. The browser still sends the page's name as
// Host: such a request is 403 naming the Host and the flag, on every page
// and API, while localhost, 127.0.0.1 and [::1] with the port, and a host
// allowed by --dashboard-allowed-hosts, are served.
func TestUntrustedHostIsRefusedOnTheLoopbackDashboard(t *testing.T) {
	base, _ := startDashboard(t, func(o *manager.Options) { o.DashboardAllowedHosts = []string{"Tunnel.Example"} })
	port := strings.TrimPrefix(base, "http://127.0.0.1:")
	for _, path := range []string{"/", "/static/dashboard.js", "/api/v1/fleet"} {
		for _, tc := range []struct {
			host string
			want int
		}{
			{"evil.example:" + port, http.StatusForbidden},
			{"evil.example", http.StatusForbidden},
			{"localhost.evil.example:" + port, http.StatusForbidden},
			{"127.0.0.1.nip.io:" + port, http.StatusForbidden},
			{"localhost:" + port, http.StatusOK},
			{"LOCALHOST:" + port, http.StatusOK},
			{"127.0.0.1:" + port, http.StatusOK},
			{"[::1]:" + port, http.StatusOK},
			{"localhost", http.StatusOK},
			{"tunnel.example:" + port, http.StatusOK},
		} {
			status, body := getWithHost(t, base+path, tc.host)
			if status != tc.want {
				t.Errorf("GET %s with Host %s: answered %d, want %d: %s", path, tc.host, status, tc.want, body)
				continue
			}
			if status == http.StatusForbidden {
				var e struct {
					Error string `json:"error"`
				}
				if err := json.Unmarshal([]byte(body), &e); err != nil || !strings.Contains(e.Error, tc.host) || !strings.Contains(e.Error, "--dashboard-allowed-hosts") {
					t.Errorf("GET %s with Host %s: the refusal %q does not name the Host and --dashboard-allowed-hosts", path, tc.host, body)
				}
			}
		}
	}
}

// getWithHost GETs u, sending host as its Host header.
func getWithHost(t *testing.T, u, host string) (int, string) {
	t.Helper()
	target, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	req := &http.Request{Method: http.MethodGet, URL: target, Host: host, Header: http.Header{}}
	resp, err := http.DefaultClient.Do(req.WithContext(t.Context()))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}
