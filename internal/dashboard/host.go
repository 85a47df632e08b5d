package dashboard

import (
	"fmt"
	"net"
	"net/http"
	"strings"
)

// LocalHosts serves next only to requests whose Host header names this
// machine's loopback (localhost, 127.0.0.1 or any loopback IP, [::1]) or
// one of allowed, with any port or none; the others get 403 with a JSON
// body {"error": "..."} naming the Host.
//
// It guards the dashboard on a loopback IP, which asks no token. A page of
// another site that a browser on the same workstation opens can make its
// own name resolve to 127.0.0.1 (DNS rebinding) and then read, as its own
// origin, whatever a `kubectl port-forward` to the dashboard serves there:
// every node, profile and Event. The browser still sends the page's name
// as Host, which is how the dashboard tells such a request from one for
// localhost. allowed names the other hosts people reach it by (an SSH
// tunnel's name, a proxy's), matched without regard to case.
func LocalHosts(allowed []string, next http.Handler) http.Handler {
	names := make(map[string]bool, len(allowed))
	for _, h := range allowed {
		names[strings.ToLower(h)] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := hostOf(r.Host)
		if ip := net.ParseIP(host); (ip != nil && ip.IsLoopback()) || host == "localhost" || names[host] {
			next.ServeHTTP(w, r)
			return
		}
		writeJSON(w, http.StatusForbidden, apiError{fmt.Sprintf(
			"the dashboard answers only requests for localhost, 127.0.0.1 or [::1] (any port), not for Host %q: "+
				"a page of another site must not read it through DNS rebinding; open it as http://localhost:PORT/, "+
				"or allow that host with --dashboard-allowed-hosts", r.Host)})
	})
}

// hostOf is the host of a Host header, lowercased, without its port and
// an IPv6 address's brackets.
func hostOf(hostport string) string {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]")
	}
	return strings.ToLower(host)
}
