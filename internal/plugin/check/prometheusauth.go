package check

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/profilesecret"
)

// credentialsTTL is how long a prometheusInstant check reuses the
// credentials it read: a fleet evaluated at once reads the Secret once,
// and a rotated Secret is used within that time.
const credentialsTTL = 10 * time.Second

// errNoSecrets says that a prometheusInstant check with credentials was
// evaluated where pitstop's Secrets are not read: by `pitstop explain`,
// which runs with its user's access, not the manager's.
var errNoSecrets = errors.New("only pitstop's manager reads the Secrets of profiles; the dashboard shows its last result of this check")

// auth reads the credentials of one prometheusInstant check from their
// Secret when the check is evaluated, and keeps them for credentialsTTL.
type auth struct {
	// field names the SecretKeyRef in errors: bearerToken or
	// basicAuth.password.
	field string
	ref   pitstopv1alpha1.SecretKeyRef
	// username is set for basic authentication.
	username  string
	secrets   client.Reader
	namespace string

	mu     sync.Mutex
	cached Credentials
	readAt time.Time
}

// newAuth returns the auth of a check's configuration, nil when it sends
// no credentials.
func newAuth(cfg *pitstopv1alpha1.PrometheusInstantCheck, deps Deps) (*auth, error) {
	a := &auth{secrets: deps.Secrets, namespace: deps.Namespace}
	switch {
	case cfg.BearerToken != nil && cfg.BasicAuth != nil:
		return nil, errors.New("bearerToken: set at most one of bearerToken and basicAuth")
	case cfg.BearerToken != nil:
		a.field, a.ref = "bearerToken", *cfg.BearerToken
	case cfg.BasicAuth != nil:
		if u := cfg.BasicAuth.Username; u == "" || strings.Contains(u, ":") {
			return nil, errors.New("basicAuth.username: must not be empty or hold a colon")
		}
		a.field, a.ref, a.username = "basicAuth.password", cfg.BasicAuth.Password, cfg.BasicAuth.Username
	default:
		return nil, nil
	}
	return a, nil
}

// credentials returns the check's credentials as its Secret holds them, as
// read at most credentialsTTL before now. A failed read is not kept: the
// next evaluation reads again.
func (a *auth) credentials(ctx context.Context, now time.Time) (Credentials, error) {
	if a.secrets == nil {
		return Credentials{}, fmt.Errorf("%s: Secret %s (key %q) is not read here: %w", a.field, a.ref.Name, a.ref.Key, errNoSecrets)
	}
	a.mu.Lock()
	cached, readAt := a.cached, a.readAt
	a.mu.Unlock()
	if !readAt.IsZero() && !now.Before(readAt) && now.Sub(readAt) < credentialsTTL {
		return cached, nil
	}
	v, err := profilesecret.Read(ctx, a.secrets, a.namespace, a.ref)
	if err != nil {
		return Credentials{}, fmt.Errorf("%s: %w", a.field, err)
	}
	creds := Credentials{BearerToken: v}
	if a.username != "" {
		creds = Credentials{Username: a.username, Password: v}
	} else if !validHeaderValue(v) {
		// net/http would refuse the header without saying why.
		return Credentials{}, fmt.Errorf("%s: Secret %s/%s (key %q) holds a control character, which an HTTP header cannot carry", a.field, a.namespace, a.ref.Name, a.ref.Key)
	}
	a.mu.Lock()
	a.cached, a.readAt = creds, now
	a.mu.Unlock()
	return creds, nil
}

// validHeaderValue says whether v can be sent in an HTTP header field: no
// control character but tab (RFC 9110, field-value).
func validHeaderValue(v string) bool {
	for i := range len(v) {
		if b := v[i]; (b < ' ' && b != '\t') || b == 0x7f {
			return false
		}
	}
	return true
}

// redacted replaces the credentials in a message.
const redacted = "<credentials from Secret>"

// redact keeps the credentials out of an error, and so out of the check's
// result, logs, Events and the dashboard: a Prometheus, or a proxy in
// front of it, may echo a request's Authorization header in its answer.
// The header's base64 form of a basic login is replaced too.
func (c Credentials) redact(err error) error {
	msg := err.Error()
	hidden := msg
	for _, s := range c.secrets() {
		hidden = strings.ReplaceAll(hidden, s, redacted)
	}
	if hidden == msg {
		return err // keeps the chain: errors.Is(err, context.DeadlineExceeded)
	}
	return errors.New(hidden)
}

// secrets are the strings of c that must not be shown.
func (c Credentials) secrets() []string {
	var out []string
	if c.BearerToken != "" {
		out = append(out, c.BearerToken)
	}
	if c.Password != "" {
		out = append(out, base64.StdEncoding.EncodeToString([]byte(c.Username+":"+c.Password)), c.Password)
	}
	return out
}

// errCredentialsElsewhere refuses to send a check's credentials to a host
// other than the one it names.
var errCredentialsElsewhere = errors.New("refusing to send credentials to another host")

// withCredentials adds creds to the requests to origin's scheme and host,
// and refuses any other request. sameHostClient follows no redirect away
// from origin anyway; this keeps the credentials there on its own.
type withCredentials struct {
	next   http.RoundTripper
	origin *url.URL
	creds  Credentials
}

// RoundTrip implements http.RoundTripper.
func (t withCredentials) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != t.origin.Scheme || req.URL.Host != t.origin.Host {
		if req.Body != nil {
			_ = req.Body.Close() // RoundTrip must close it, even on error
		}
		return nil, fmt.Errorf("%w: %s", errCredentialsElsewhere, req.URL.Redacted())
	}
	// A RoundTripper must not change the request it is given.
	req = req.Clone(req.Context())
	if t.creds.BearerToken != "" {
		req.Header.Set("Authorization", "Bearer "+t.creds.BearerToken)
	} else {
		req.SetBasicAuth(t.creds.Username, t.creds.Password)
	}
	return t.next.RoundTrip(req)
}
