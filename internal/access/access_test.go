package access_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/go-logr/logr/testr"

	"github.com/pitstop-dev/pitstop/internal/access"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

var env *testutil.Env

func TestMain(m *testing.M) { testutil.Main(m, &env) }

// breakable is the transport Access talks to the API server through: a
// request whose path starts with broken fails as if the API server did
// not answer.
type breakable struct {
	next   http.RoundTripper
	broken atomic.Value // string
}

func (b *breakable) RoundTrip(r *http.Request) (*http.Response, error) {
	if prefix, _ := b.broken.Load().(string); prefix != "" && strings.HasPrefix(r.URL.Path, prefix) {
		return nil, errors.New("connection refused (injected)")
	}
	return b.next.RoundTrip(r)
}

// newAccess returns an Access of the test's API server that accepts
// tokens for pitstop's audience, each with caches of its own, and the
// transport it goes through.
func newAccess(t *testing.T) (*access.Access, *breakable) {
	t.Helper()
	return newAccessOf(t, access.Tokens{})
}

// newAccessOf is newAccess accepting the tokens of tokens.
func newAccessOf(t *testing.T, tokens access.Tokens) (*access.Access, *breakable) {
	t.Helper()
	rt, err := rest.TransportFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	b := &breakable{next: rt}
	b.broken.Store("")
	a, err := access.New(env.Config, &http.Client{Transport: b}, tokens, testr.New(t))
	if err != nil {
		t.Fatal(err)
	}
	return a, b
}

// tokenOf creates a ServiceAccount in ns, grants it the non-resource URLs
// of get (none when empty) and returns a token of it for pitstop's
// audience.
func tokenOf(t *testing.T, ns, name string, get ...string) string {
	t.Helper()
	serviceAccount(t, ns, name, get...)
	return tokenFor(t, ns, name, access.DefaultAudience)
}

// tokenFor returns a token of ServiceAccount ns/name for audiences, from
// the TokenRequest API; with none, for the API server's own.
func tokenFor(t *testing.T, ns, name string, audiences ...string) string {
	t.Helper()
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: audiences, ExpirationSeconds: ptr.To[int64](3600)}}
	tok, err := env.Clientset.CoreV1().ServiceAccounts(ns).CreateToken(t.Context(), name, req, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("requesting a token of ServiceAccount %s/%s for audiences %q: %v", ns, name, audiences, err)
	}
	return tok.Status.Token
}

// serviceAccount creates ServiceAccount ns/name and grants it the
// non-resource URLs of get (none when empty).
func serviceAccount(t *testing.T, ns, name string, get ...string) {
	t.Helper()
	testutil.Create(t, env.Client, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
	if len(get) > 0 {
		role := "access-test-" + ns + "-" + name
		testutil.Create(t, env.Client,
			&rbacv1.ClusterRole{
				ObjectMeta: metav1.ObjectMeta{Name: role},
				Rules:      []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: get}},
			},
			&rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: role},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
			})
	}
}

type answer struct {
	status        int
	authenticate  string
	body, errText string
}

// call sends method path to h with token as a bearer token (none when
// empty).
func call(t *testing.T, h http.Handler, method, path, token string) answer {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	body, _ := io.ReadAll(rec.Body)
	a := answer{status: rec.Code, authenticate: rec.Header().Get("WWW-Authenticate"), body: string(body)}
	if rec.Code != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		if err := json.Unmarshal(body, &e); err != nil || e.Error == "" {
			t.Fatalf("%s %s answered %d with %q, want a JSON body {\"error\": ...}", method, path, rec.Code, body)
		}
		a.errText = e.Error
	}
	return a
}

var served = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "served "+r.URL.Path) })

// TestARequestNeedsATokenOfAUserAllowedThePath: with a fixed path, every
// request is judged by that path (the dashboard's pages by its one grant);
// no token or one the API server rejects is 401 naming the realm, a user
// without the grant 403 naming the user, a user with it is served.
func TestARequestNeedsATokenOfAUserAllowedThePath(t *testing.T) {
	ns := testutil.Namespace(t, env.Client, "fixed")
	nobody := tokenOf(t, ns, "nobody")
	viewer := tokenOf(t, ns, "viewer", "/guarded")
	a, _ := newAccess(t)
	h := a.Wrap("/guarded", "test realm", served)

	for _, tc := range []struct {
		who, token string
	}{{"no token", ""}, {"a token the API server does not know", "not-a-token"}} {
		got := call(t, h, http.MethodGet, "/any/page", tc.token)
		if got.status != http.StatusUnauthorized || got.authenticate != `Bearer realm="test realm"` {
			t.Errorf("%s: answered %d, WWW-Authenticate %q; want 401 with realm", tc.who, got.status, got.authenticate)
		}
		if !strings.Contains(got.errText, "/guarded") {
			t.Errorf("%s: the error %q does not name the path to be granted", tc.who, got.errText)
		}
	}
	got := call(t, h, http.MethodGet, "/any/page", nobody)
	if want := "system:serviceaccount:" + ns + ":nobody"; got.status != http.StatusForbidden || !strings.Contains(got.errText, want) {
		t.Errorf("a user without the grant: answered %d %q, want 403 naming %s", got.status, got.errText, want)
	}
	if got := call(t, h, http.MethodGet, "/any/page", viewer); got.status != http.StatusOK || got.body != "served /any/page" {
		t.Errorf("a user with the grant: answered %d %q, want the page", got.status, got.body)
	}
}

// TestWithoutAPathTheRequestsOwnMethodAndPathAreJudged: the metrics'
// filter asks about each request itself, as the API server asks about a
// non-resource request.
func TestWithoutAPathTheRequestsOwnMethodAndPathAreJudged(t *testing.T) {
	ns := testutil.Namespace(t, env.Client, "own")
	scraper := tokenOf(t, ns, "scraper", "/metrics")
	a, _ := newAccess(t)
	h := a.Wrap("", "test realm", served)
	if got := call(t, h, http.MethodGet, "/metrics", scraper); got.status != http.StatusOK {
		t.Errorf("GET /metrics granted: answered %d %q, want 200", got.status, got.errText)
	}
	for _, tc := range []struct{ method, path string }{{http.MethodGet, "/other"}, {http.MethodPost, "/metrics"}} {
		got := call(t, h, tc.method, tc.path, scraper)
		if want := strings.ToLower(tc.method) + " " + tc.path; got.status != http.StatusForbidden || !strings.Contains(got.errText, want) {
			t.Errorf("%s %s not granted: answered %d %q, want 403 naming %q", tc.method, tc.path, got.status, got.errText, want)
		}
	}
}

// TestNoAnswerFromTheAPIServer: when the API server does not answer the
// SubjectAccessReview the request is 503, not a refusal; when it does not
// answer the TokenReview the request is not authenticated (401). Once it
// answers again, the same user is served.
func TestNoAnswerFromTheAPIServer(t *testing.T) {
	ns := testutil.Namespace(t, env.Client, "down")
	viewer := tokenOf(t, ns, "viewer", "/guarded")

	a, transport := newAccess(t)
	h := a.Wrap("/guarded", "test realm", served)
	transport.broken.Store("/apis/authorization.k8s.io/")
	got := call(t, h, http.MethodGet, "/page", viewer)
	if got.status != http.StatusServiceUnavailable || !strings.Contains(got.errText, "system:serviceaccount:"+ns+":viewer") {
		t.Errorf("no SubjectAccessReview answer: answered %d %q, want 503 naming the user", got.status, got.errText)
	}
	transport.broken.Store("")
	if got := call(t, h, http.MethodGet, "/page", viewer); got.status != http.StatusOK {
		t.Errorf("the API server back: answered %d %q, want the page (an error must not be kept as a denial)", got.status, got.errText)
	}

	a, transport = newAccess(t)
	h = a.Wrap("/guarded", "test realm", served)
	transport.broken.Store("/apis/authentication.k8s.io/")
	if got := call(t, h, http.MethodGet, "/page", viewer); got.status != http.StatusUnauthorized {
		t.Errorf("no TokenReview answer: answered %d %q, want 401", got.status, got.errText)
	}
}

// TestUntrustedTokenForAnotherAudienceIsRefused: the TokenReview names
// pitstop's audience, so a token the API server itself would accept (a
// ServiceAccount's default token, the kind Prometheus sends and a sniffer
// could replay against the API server) or one issued for another service
// is 401, and only a token issued for pitstop is served. With
// APIServerAudience, the API server's own tokens are accepted as well,
// still not another service's.
func TestUntrustedTokenForAnotherAudienceIsRefused(t *testing.T) {
	ns := testutil.Namespace(t, env.Client, "audience")
	serviceAccount(t, ns, "scraper", "/metrics")
	forPitstop := tokenFor(t, ns, "scraper", access.DefaultAudience)
	forAPIServer := tokenFor(t, ns, "scraper")
	forVault := tokenFor(t, ns, "scraper", "vault")

	a, _ := newAccess(t)
	h := a.Wrap("", "test realm", served)
	if got := call(t, h, http.MethodGet, "/metrics", forPitstop); got.status != http.StatusOK {
		t.Errorf("a token for audience pitstop: answered %d %q, want 200", got.status, got.errText)
	}
	for _, tc := range []struct{ who, token string }{{"a token for the API server", forAPIServer}, {"a token for audience vault", forVault}} {
		got := call(t, h, http.MethodGet, "/metrics", tc.token)
		if got.status != http.StatusUnauthorized || !strings.Contains(got.errText, "audience pitstop") {
			t.Errorf("%s: answered %d %q, want 401 naming audience pitstop", tc.who, got.status, got.errText)
		}
	}

	a, _ = newAccessOf(t, access.Tokens{APIServerAudience: true})
	h = a.Wrap("", "test realm", served)
	for _, tc := range []struct {
		who, token string
		want       int
	}{
		{"a token for audience pitstop", forPitstop, http.StatusOK},
		{"a token for the API server", forAPIServer, http.StatusOK},
		{"a token for audience vault", forVault, http.StatusUnauthorized},
	} {
		if got := call(t, h, http.MethodGet, "/metrics", tc.token); got.status != tc.want {
			t.Errorf("accepting the API server's audience, %s: answered %d %q, want %d", tc.who, got.status, got.errText, tc.want)
		}
	}
}
