package dashboard

import (
	"fmt"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	authenticationv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
)

// AccessPath is the non-resource URL a user must be allowed to get to
// read the dashboard off loopback: every page, script and API answer is
// authorized as `get` on it, whatever its own path. It is pitstop's own,
// so that a grant of another tool's "/dashboard" never reaches it, and a
// ClusterRole grants it with one rule:
//
//	rules:
//	  - nonResourceURLs: ["/pitstop/dashboard"]
//	    verbs: ["get"]
//
// The chart's ClusterRole pitstop-dashboard-viewer is that rule.
const AccessPath = "/pitstop/dashboard"

// How long the API server's answers are kept. A revoked grant still lets
// its user in for up to allowCacheTTL, a new one waits up to denyCacheTTL;
// a page polls every 2 seconds, and reviewing each poll would cost two
// requests to the API server.
const (
	tokenCacheTTL = time.Minute
	allowCacheTTL = time.Minute
	denyCacheTTL  = 10 * time.Second
	reviewTimeout = 10 * time.Second
)

// Access lets a request through when it carries a bearer token the API
// server accepts (TokenReview) for a user it allows to get AccessPath
// (SubjectAccessReview). It is controller-runtime's filter of the metrics
// endpoint (metrics/filters), built from the same delegating authenticator
// and authorizer of k8s.io/apiserver, with a fixed authorization target in
// place of the request's path.
type Access struct {
	authn authenticator.Request
	authz authorizer.Authorizer
	log   logr.Logger
}

// NewAccess asks the API server of cfg, through httpClient.
func NewAccess(cfg *rest.Config, httpClient *http.Client, log logr.Logger) (*Access, error) {
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
	a := &Access{log: log}
	a.authn, _, err = authenticatorfactory.DelegatingAuthenticatorConfig{
		Anonymous:                &apiserver.AnonymousAuthConfig{Enabled: false},
		TokenAccessReviewClient:  authn,
		TokenAccessReviewTimeout: reviewTimeout,
		WebhookRetryBackoff:      backoff,
		CacheTTL:                 tokenCacheTTL,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("creating the dashboard's authenticator: %w", err)
	}
	a.authz, err = authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: authz,
		AllowCacheTTL:             allowCacheTTL,
		DenyCacheTTL:              denyCacheTTL,
		WebhookRetryBackoff:       backoff,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("creating the dashboard's authorizer: %w", err)
	}
	return a, nil
}

// Wrap serves next to the requests Access lets through; the others get
// 401 (no token, one the API server does not accept, or no answer about
// it), 403 (a user not allowed) or 503 (no answer about the user's
// permission).
func (a *Access) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, ok, err := a.authn.AuthenticateRequest(r)
		if !ok {
			// A token the API server rejects comes with an error too, as
			// does a review that failed: either way the request is not
			// authenticated, as the API server itself would answer.
			if err != nil {
				a.log.V(1).Info("Refused a dashboard request", "reason", err.Error())
			}
			unauthorized(w)
			return
		}
		attrs := authorizer.AttributesRecord{User: res.User, Verb: "get", Path: AccessPath}
		decision, reason, err := a.authz.Authorize(r.Context(), attrs)
		switch {
		case err != nil:
			writeError(w, fmt.Errorf("authorizing user %s: %w", res.User.GetName(), err))
		case decision != authorizer.DecisionAllow:
			a.log.V(1).Info("Refused a dashboard request", "user", res.User.GetName(), "reason", reason)
			writeJSON(w, http.StatusForbidden, apiError{fmt.Sprintf("user %s may not get %s", res.User.GetName(), AccessPath)})
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// unauthorized asks for a bearer token.
func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="pitstop dashboard"`)
	writeJSON(w, http.StatusUnauthorized, apiError{"a bearer token is required: Authorization: Bearer <token of a user allowed to get " + AccessPath + ">"})
}
