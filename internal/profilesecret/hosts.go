package profilesecret

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// Hosts are the servers to which profiles may send an opted-in Secret's
// value when the profile, not the Secret, names the server: the SMTP
// servers that mail notifications log in to with a password from a Secret
// (pitstop's --notify-host-allow). Every profile author may name every
// opted-in Secret, so without this list any of them could have pitstop
// hand any such password to a server of their own. The zero value allows
// no server.
type Hosts struct {
	entries []hostEntry
}

// hostEntry is one allowed server: a host name or IP in lower case, and a
// port ("" allows every port).
type hostEntry struct {
	raw, host, port string
}

// ParseHosts reads allowed servers, each a host name or IP, optionally
// with a port: smtp.example.com, smtp.example.com:587, 10.0.0.25,
// [2001:db8::25]:25. A name matches itself only, not its subdomains.
func ParseHosts(list []string) (Hosts, error) {
	var h Hosts
	for _, raw := range list {
		e, err := parseHost(raw)
		if err != nil {
			return Hosts{}, err
		}
		h.entries = append(h.entries, e)
	}
	return h, nil
}

func parseHost(raw string) (hostEntry, error) {
	host, port := raw, ""
	if strings.Contains(raw, "]") || strings.Count(raw, ":") == 1 {
		var err error
		if host, port, err = net.SplitHostPort(raw); err != nil {
			return hostEntry{}, fmt.Errorf("%q is not host or host:port", raw)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return hostEntry{}, fmt.Errorf("%q: port must be a number from 1 to 65535", raw)
		}
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if host == "" || strings.ContainsAny(host, "/@*? ") {
		return hostEntry{}, fmt.Errorf("%q is not a host name or IP (no scheme, path, credentials or wildcards)", raw)
	}
	return hostEntry{raw: raw, host: host, port: port}, nil
}

// Allows says whether host, on port, is one of the servers.
func (h Hosts) Allows(host string, port int) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, e := range h.entries {
		if e.host == host && (e.port == "" || e.port == strconv.Itoa(port)) {
			return true
		}
	}
	return false
}

// String lists the servers as they were given, or says there are none.
func (h Hosts) String() string {
	if len(h.entries) == 0 {
		return "none"
	}
	raw := make([]string, len(h.entries))
	for i, e := range h.entries {
		raw[i] = e.raw
	}
	return strings.Join(raw, ", ")
}
