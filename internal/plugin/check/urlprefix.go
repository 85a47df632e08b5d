package check

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// URLPrefixes are the URLs prometheusInstant checks may query, set from
// the manager's --prometheus-url-allow. A check queries from inside the
// cluster, with pitstop's network reach, whatever URL its profile's author
// names; an allow-list keeps it to the Prometheus servers an operator
// chose. Empty allows every URL to a check that sends no credentials; one
// that sends a bearer token or basic auth from a Secret needs its URL under
// a prefix, so that no profile author has an opted-in Secret sent to a
// server of their own.
type URLPrefixes []urlPrefix

// urlPrefix is one allowed prefix: scheme, host and port match exactly,
// the path by whole segments.
type urlPrefix struct {
	raw          string
	scheme, host string // host:port, lower case, with the scheme's default port
	path         string // without its trailing slash: "" allows every path
}

// ParseURLPrefixes reads allowed URL prefixes such as
// https://prometheus.monitoring.svc:9090/. Each is an http(s) URL with a
// host, and without credentials, query or fragment.
func ParseURLPrefixes(prefixes []string) (URLPrefixes, error) {
	out := make(URLPrefixes, 0, len(prefixes))
	for _, raw := range prefixes {
		u, err := url.Parse(raw)
		if err != nil {
			return nil, errors.New("not a URL") // the text may hold a password: not echoed
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("%q is not an http(s) URL such as https://prometheus.monitoring.svc:9090/", u.Redacted())
		}
		if u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
			return nil, fmt.Errorf("%q: a prefix has no credentials, query or fragment", u.Redacted())
		}
		if dotSegments(u.Path) {
			return nil, fmt.Errorf("%q: a prefix's path has no . or .. segments", raw)
		}
		out = append(out, urlPrefix{raw: raw, scheme: u.Scheme, host: hostPort(u), path: strings.TrimSuffix(u.Path, "/")})
	}
	return out, nil
}

// errURLNotAllowed says that a check's URL is under none of the prefixes.
var errURLNotAllowed = errors.New("is not under a Prometheus URL this pitstop allows")

// allow returns nil when u is under one of the prefixes, or there are
// none. A path with . or .. segments is refused when there are prefixes:
// the server, not the prefix, would decide where it leads.
func (p URLPrefixes) allow(u *url.URL) error {
	if len(p) == 0 {
		return nil
	}
	if !dotSegments(u.Path) {
		for _, prefix := range p {
			if prefix.allows(u) {
				return nil
			}
		}
	}
	return fmt.Errorf("%q %w (--prometheus-url-allow: %s)", u.Redacted(), errURLNotAllowed, p)
}

// errCredentialsNotAllowed says that a check would send a Secret's value to
// a URL no administrator allowed.
var errCredentialsNotAllowed = errors.New("refusing to send a Secret to a Prometheus URL not allowed")

// allowCredentials refuses a check that sends credentials (a nil: none) to
// u unless u is under a prefix: with no prefixes, every such check is
// refused. sends is false where no Secret is read (pitstop explain), and
// nothing is checked.
func (p URLPrefixes) allowCredentials(u *url.URL, a *auth, sends bool) error {
	if a == nil || !sends {
		return nil
	}
	if len(p) > 0 && p.allow(u) == nil {
		return nil
	}
	allowed := p.String()
	if allowed == "" {
		allowed = "none"
	}
	return fmt.Errorf("url %q: %w: %s (Secret %s, key %q) would be sent to %s, which is under no prefix an administrator allowed for credentials (--prometheus-url-allow, chart value prometheusURLAllow: %s)",
		u.Redacted(), errCredentialsNotAllowed, a.field, a.ref.Name, a.ref.Key, u.Host, allowed)
}

// String lists the prefixes as they were given.
func (p URLPrefixes) String() string {
	raw := make([]string, len(p))
	for i, prefix := range p {
		raw[i] = prefix.raw
	}
	return strings.Join(raw, ", ")
}

func (p urlPrefix) allows(u *url.URL) bool {
	if u.Scheme != p.scheme || hostPort(u) != p.host {
		return false
	}
	return p.path == "" || u.Path == p.path || strings.HasPrefix(u.Path, p.path+"/")
}

// hostPort is u's host and port in lower case, the port filled in from the
// scheme when the URL leaves it out, so that https://prom and
// https://prom:443 are one server.
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// dotSegments says whether a path has a . or .. segment.
func dotSegments(path string) bool {
	for _, seg := range strings.Split(path, "/") {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}
