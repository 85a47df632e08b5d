// Package access lets an HTTP request through only when it carries a
// bearer token the API server accepts for pitstop's audience (TokenReview)
// of a user it allows (SubjectAccessReview). It guards the dashboard and
// the metrics off a loopback IP. It is controller-runtime's metrics filter
// (metrics/filters), built from the same delegating authenticator and
// authorizer of k8s.io/apiserver, answering as the API server itself does:
// a token the API server rejects is 401, not the filter's 500.
package access

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/request/union"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	authenticationv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// How long the API server's answers are kept. A revoked grant still lets
// its user in for up to allowCacheTTL, a new one waits up to denyCacheTTL;
// a dashboard page polls every 2 seconds, and reviewing each poll would
// cost two requests to the API server.
const (
	tokenCacheTTL = time.Minute
	allowCacheTTL = time.Minute
	denyCacheTTL  = 10 * time.Second
	reviewTimeout = 10 * time.Second
)

// DefaultAudience is the audience a token must be issued for unless
// Tokens.Audience names another: `kubectl create token NAME --audience
// pitstop`, or a projected ServiceAccount token volume with that audience.
const DefaultAudience = "pitstop"

// Tokens says which bearer tokens are accepted.
//
// A token issued for pitstop's own audience is worth nothing to the API
// server, nor to any other service that reviews tokens for its own
// audience: one that leaks from a request to pitstop (a scrape sniffed on
// the network, a log) cannot be replayed against them. A token issued for
// the API server (a ServiceAccount's default token, most OIDC tokens) can.
type Tokens struct {
	// Audience is the audience every token must be issued for; empty
	// means DefaultAudience.
	Audience string
	// APIServerAudience also accepts tokens issued for the API server's
	// own audiences, for clients that cannot get a token for Audience (a
	// Prometheus that only sends its ServiceAccount's default token). Such
	// a token, if it leaks, is valid against the API server.
	APIServerAudience bool
}

func (t Tokens) audience() string {
	if t.Audience == "" {
		return DefaultAudience
	}
	return t.Audience
}

// Access asks the API server about each request's token and user, and
// keeps the answers as above.
type Access struct {
	authn    authenticator.Request
	authz    authorizer.Authorizer
	log      logr.Logger
	audience string
}

// New asks the API server of cfg, through httpClient, about tokens as
// tokens says.
func New(cfg *rest.Config, httpClient *http.Client, tokens Tokens, log logr.Logger) (*Access, error) {
	authn, err := authenticationv1.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	authz, err := authorizationv1.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	// As k8s.io/apiserver's own delegating servers retry a review.
	backoff := &wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
	a := &Access{log: log, audience: tokens.audience()}
	delegating, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		Anonymous:                &apiserver.AnonymousAuthConfig{Enabled: false},
		TokenAccessReviewClient:  authn,
		TokenAccessReviewTimeout: reviewTimeout,
		WebhookRetryBackoff:      backoff,
		CacheTTL:                 tokenCacheTTL,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("creating the authenticator: %w", err)
	}
	// The delegating authenticator names in its TokenReview the audiences
	// of the request's context, as the API server's own filters set them:
	// the API server then accepts only a token issued for one of them, and
	// the authenticator checks status.audiences again. The answers are
	// kept per token and audiences. A review with no audience is judged
	// against the API server's own (its --api-audiences).
	forPitstop := authenticator.RequestFunc(func(r *http.Request) (*authenticator.Response, bool, error) {
		ctx := authenticator.WithAudiences(r.Context(), authenticator.Audiences{a.audience})
		return delegating.AuthenticateRequest(r.WithContext(ctx))
	})
	a.authn = forPitstop
	if tokens.APIServerAudience {
		a.authn = union.New(forPitstop, delegating)
	}
	a.authz, err = authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: authz,
		AllowCacheTTL:             allowCacheTTL,
		DenyCacheTTL:              denyCacheTTL,
		WebhookRetryBackoff:       backoff,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("creating the authorizer: %w", err)
	}
	return a, nil
}

// Wrap serves next to the requests of users allowed to get path, a
// non-resource URL, whatever the request's own path; when path is empty,
// to users allowed the request's own method (lowercased) on its own path,
// as the API server authorizes a non-resource request. The others get 401
// (no token, one the API server does not accept, or no answer about it),
// 403 (a user not allowed) or 503 (no answer about the user's
// permission), each with a JSON body {"error": "..."}; a 401 names realm.
func (a *Access) Wrap(path, realm string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, ok, err := a.authn.AuthenticateRequest(r)
		if !ok {
			// A token the API server rejects comes with an error too, as
			// does a review that failed: either way the request is not
			// authenticated, as the API server itself would answer.
			if err != nil {
				a.log.V(1).Info("Refused a request", "path", r.URL.Path, "reason", err.Error())
			}
			w.Header().Set("WWW-Authenticate", fmt.Sprintf("Bearer realm=%q", realm))
			target := path
			if target == "" {
				target = r.URL.Path
			}
			writeError(w, http.StatusUnauthorized, fmt.Sprintf("a bearer token for audience %s is required: Authorization: Bearer <token of a user allowed to get %s, from kubectl create token NAME --audience %s>", a.audience, target, a.audience))
			return
		}
		attrs := authorizer.AttributesRecord{User: res.User, Verb: "get", Path: path}
		if path == "" {
			attrs.Verb, attrs.Path = strings.ToLower(r.Method), r.URL.Path
		}
		decision, reason, err := a.authz.Authorize(r.Context(), attrs)
		switch {
		case err != nil:
			writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("authorizing user %s: %v", res.User.GetName(), err))
		case decision != authorizer.DecisionAllow:
			a.log.V(1).Info("Refused a request", "path", r.URL.Path, "user", res.User.GetName(), "reason", reason)
			writeError(w, http.StatusForbidden, fmt.Sprintf("user %s may not %s %s", res.User.GetName(), attrs.Verb, attrs.Path))
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// MetricsFilter returns a FilterProvider for controller-runtime's
// metrics server: every request needs a token as tokens says, of a user
// allowed its method on its path (get on /metrics for a scrape). The
// server's handlers share the answers kept.
func MetricsFilter(tokens Tokens) func(*rest.Config, *http.Client) (metricsserver.Filter, error) {
	return func(cfg *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
		shared, err := New(cfg, httpClient, tokens, logr.Discard())
		if err != nil {
			return nil, err
		}
		return func(log logr.Logger, next http.Handler) (http.Handler, error) {
			a := *shared
			a.log = log
			return a.Wrap("", "pitstop metrics", next), nil
		}, nil
	}
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	// The status is sent: an encoding error can only be a client gone.
	_ = json.NewEncoder(w).Encode(struct {
		Error string `json:"error"`
	}{msg})
}
