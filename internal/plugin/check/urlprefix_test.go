package check

import (
	"strings"
	"testing"
)

// TestPrometheusURLAllowList: with allowed prefixes, a prometheusInstant
// check builds only for a URL whose scheme, host and port are a prefix's
// and whose path is at or below the prefix's; the refusal names the URL
// and the prefixes. Without prefixes every URL builds, as before.
func TestPrometheusURLAllowList(t *testing.T) {
	allow := []string{"https://prometheus.monitoring.svc:9090/", "http://thanos.monitoring.svc/query"}
	for _, tc := range []struct {
		name, url string
		allowed   bool
	}{
		{"the prefix itself", "https://prometheus.monitoring.svc:9090/", true},
		{"the prefix without its trailing slash", "https://prometheus.monitoring.svc:9090", true},
		{"a path below the prefix", "https://prometheus.monitoring.svc:9090/prometheus", true},
		{"the host in capitals", "https://Prometheus.Monitoring.svc:9090/", true},
		{"the scheme's default port left out of the prefix", "http://thanos.monitoring.svc:80/query", true},
		{"a path below a prefix with a path", "http://thanos.monitoring.svc/query/api", true},
		{"another host", "http://evil.example.com:9090/", false},
		{"another port", "https://prometheus.monitoring.svc:9091/", false},
		{"another scheme", "http://prometheus.monitoring.svc:9090/", false},
		{"a host that only starts like the prefix's", "https://prometheus.monitoring.svc.evil.example.com:9090/", false},
		{"a path that only starts like the prefix's", "http://thanos.monitoring.svc/query-admin", false},
		{"a path above the prefix's", "http://thanos.monitoring.svc/", false},
		{"a path climbing out of the prefix", "http://thanos.monitoring.svc/query/../admin", false},
		{"an encoded climb out of the prefix", "http://thanos.monitoring.svc/query/%2e%2e/admin", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prefixes, err := ParseURLPrefixes(allow)
			if err != nil {
				t.Fatal(err)
			}
			_, err = New(promCheck(tc.url, "up", ">=", "1"), Deps{Prometheus: fixedPrometheus{}, PrometheusURLs: prefixes})
			if tc.allowed {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			want := `prometheusInstant.url: "` + tc.url
			if err == nil || !strings.HasPrefix(err.Error(), want) ||
				!strings.Contains(err.Error(), "is not under a Prometheus URL this pitstop allows (--prometheus-url-allow: https://prometheus.monitoring.svc:9090/, http://thanos.monitoring.svc/query)") {
				t.Fatalf("got %v, want a refusal naming the URL and the allowed prefixes", err)
			}
			if _, err := New(promCheck(tc.url, "up", ">=", "1"), Deps{Prometheus: fixedPrometheus{}}); err != nil {
				t.Errorf("without an allow-list: %v", err)
			}
		})
	}
}

func TestParseURLPrefixesRefusesWhatCannotBeAPrefix(t *testing.T) {
	for _, bad := range []string{
		"prometheus.monitoring.svc:9090", "ftp://prometheus/", "https://", "https://user:pw@prometheus/",
		"https://prometheus/?x=1", "https://prometheus/#top", "https://prometheus/a/../b",
	} {
		if _, err := ParseURLPrefixes([]string{bad}); err == nil {
			t.Errorf("%q was taken as a prefix", bad)
		} else if strings.Contains(err.Error(), "pw") {
			t.Errorf("%q: the error shows the password: %v", bad, err)
		}
	}
}
