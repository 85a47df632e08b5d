package check

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/profilesecret"
)

const (
	// pitstopNamespace holds the Secrets of these tests.
	pitstopNamespace = "pitstop-system"
	// token and password are what the Secrets hold: no error may show them.
	token    = "prom-token-7f3c9e1d"
	password = "prom-password-0b8a4c"
)

// authServer is a Prometheus HTTP API that answers /api/v1/query with a
// scalar, 1, to a request carrying the credential it requires, and 401 to
// any other. It counts the requests and keeps each Authorization header.
type authServer struct {
	*httptest.Server
	mu      sync.Mutex
	headers []string
}

// serveQueries answers /api/v1/query on mux when authorized says the
// request may have an answer.
func (s *authServer) serveQueries(mux *http.ServeMux, authorized func(*http.Request) bool) {
	mux.HandleFunc("/api/v1/query", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.headers = append(s.headers, r.Header.Get("Authorization"))
		s.mu.Unlock()
		if !authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="prometheus"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"scalar","result":[0,"1"]}}`))
	})
}

func (s *authServer) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.headers...)
}

// bearerPrometheus requires "Authorization: Bearer <token>".
func bearerPrometheus(t *testing.T) *authServer {
	s := &authServer{}
	mux := http.NewServeMux()
	s.serveQueries(mux, func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer "+token })
	s.Server = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// secretsOf is a reader of the Secrets given, in pitstopNamespace.
func secretsOf(secrets ...*corev1.Secret) client.WithWatch {
	objs := make([]client.Object, len(secrets))
	for i, s := range secrets {
		objs[i] = s
	}
	return fake.NewClientBuilder().WithObjects(objs...).Build()
}

// secret is a Secret of pitstopNamespace, opted in for profiles when
// optedIn.
func secret(name string, optedIn bool, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: pitstopNamespace, Name: name}, Data: map[string][]byte{}}
	if optedIn {
		s.Labels = map[string]string{pitstopv1alpha1.LabelUsableByProfiles: "true"}
	}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func withBearer(name, key string) func(*pitstopv1alpha1.PrometheusInstantCheck) {
	return func(p *pitstopv1alpha1.PrometheusInstantCheck) {
		p.BearerToken = &pitstopv1alpha1.SecretKeyRef{Name: name, Key: key}
	}
}

func withBasicAuth(username, name, key string) func(*pitstopv1alpha1.PrometheusInstantCheck) {
	return func(p *pitstopv1alpha1.PrometheusInstantCheck) {
		p.BasicAuth = &pitstopv1alpha1.BasicAuth{Username: username, Password: pitstopv1alpha1.SecretKeyRef{Name: name, Key: key}}
	}
}

// evaluateAt evaluates c for a node at now.
func evaluateAt(t *testing.T, c Check, now time.Time) (Result, error) {
	t.Helper()
	n := node("n1")
	return c.Evaluate(context.Background(), Context{Node: &n, Now: now})
}

// authCheck builds a prometheusInstant check of "up >= 1" on address, with the
// credentials edit sets, read from secrets, queried by pitstop's
// Prometheus client.
func authCheck(t *testing.T, address string, secrets client.Reader, edit func(*pitstopv1alpha1.PrometheusInstantCheck)) Check {
	t.Helper()
	inst := promCheck(address, "up", ">=", "1")
	edit(inst.PrometheusInstant)
	allow, err := ParseURLPrefixes([]string{address + "/"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(inst, Deps{Prometheus: NewPrometheusClient(), PrometheusURLs: allow, Secrets: secrets, Namespace: pitstopNamespace})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// assertHidden fails when an error shows a credential.
func assertHidden(t *testing.T, err error) {
	t.Helper()
	basic := base64.StdEncoding.EncodeToString([]byte("pitstop:" + password))
	for _, s := range []string{token, password, basic} {
		if err != nil && strings.Contains(err.Error(), s) {
			t.Errorf("the error shows a credential (%q): %v", s, err)
		}
	}
}

// TestPrometheusInstantSendsABearerTokenFromASecret: a check whose
// bearerToken names a key of an opted-in Secret queries with
// "Authorization: Bearer <token>", which the server requires; without the
// token the same server refuses the query.
func TestPrometheusInstantSendsABearerTokenFromASecret(t *testing.T) {
	prom := bearerPrometheus(t)
	secrets := secretsOf(secret("prom-auth", true, map[string]string{"token": token + "\n"}))

	now := time.Now()
	got, err := evaluateAt(t, authCheck(t, prom.URL, secrets, withBearer("prom-auth", "token")), now)
	if err != nil {
		t.Fatal(err)
	}
	assertQueried(t, got, Result{Passed: true, Reason: "up is 1, >= 1"}, now)
	if seen := prom.seen(); len(seen) != 1 || seen[0] != "Bearer "+token {
		t.Errorf("the server saw Authorization headers %q, want one bearer token from the Secret (its final newline trimmed)", seen)
	}

	_, err = evaluateAt(t, authCheck(t, prom.URL, secrets, func(*pitstopv1alpha1.PrometheusInstantCheck) {}), time.Now())
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("without the token: got %v, want the server's 401", err)
	}
}

// TestPrometheusInstantSendsBasicAuthFromASecret: basicAuth sends the
// username and the password of an opted-in Secret, which the server
// requires.
func TestPrometheusInstantSendsBasicAuthFromASecret(t *testing.T) {
	prom := &authServer{}
	mux := http.NewServeMux()
	prom.serveQueries(mux, func(r *http.Request) bool {
		user, pass, ok := r.BasicAuth()
		return ok && user == "pitstop" && pass == password
	})
	prom.Server = httptest.NewServer(mux)
	t.Cleanup(prom.Close)
	secrets := secretsOf(secret("prom-login", true, map[string]string{"password": password}))

	now := time.Now()
	got, err := evaluateAt(t, authCheck(t, prom.URL, secrets, withBasicAuth("pitstop", "prom-login", "password")), now)
	if err != nil {
		t.Fatal(err)
	}
	assertQueried(t, got, Result{Passed: true, Reason: "up is 1, >= 1"}, now)
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte("pitstop:"+password))
	if seen := prom.seen(); len(seen) != 1 || seen[0] != want {
		t.Errorf("the server saw Authorization headers %q, want one basic login", seen)
	}

	_, err = evaluateAt(t, authCheck(t, prom.URL, secrets, withBasicAuth("someone-else", "prom-login", "password")), time.Now())
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("with another username: got %v, want the server's 401", err)
	}
	assertHidden(t, err)
}

// TestPrometheusInstantReadsOnlyOptedInSecrets: a Secret that is missing,
// not labelled pitstop.dev/usable-by-profiles=true, or lacks the key fails
// the check with an error naming the Secret and the key (and the label when
// it is missing), without the value, and no query reaches Prometheus.
func TestPrometheusInstantReadsOnlyOptedInSecrets(t *testing.T) {
	secrets := secretsOf(
		secret("not-opted-in", false, map[string]string{"token": token}),
		func() *corev1.Secret {
			s := secret("half-opted-in", false, map[string]string{"token": token})
			s.Labels = map[string]string{pitstopv1alpha1.LabelUsableByProfiles: "yes"}
			return s
		}(),
		secret("prom-auth", true, map[string]string{"token": token, "newline": "prom-\ntoken"}),
	)
	cases := map[string]struct {
		edit      func(*pitstopv1alpha1.PrometheusInstantCheck)
		want      []string
		notUsable bool
	}{
		"a Secret without the label": {
			edit:      withBearer("not-opted-in", "token"),
			want:      []string{`bearerToken: refusing to read a Secret that profiles may not use: Secret pitstop-system/not-opted-in (key "token") is not labelled pitstop.dev/usable-by-profiles=true`},
			notUsable: true,
		},
		"a Secret labelled with another value": {
			edit:      withBasicAuth("pitstop", "half-opted-in", "token"),
			want:      []string{`basicAuth.password: refusing to read`, `Secret pitstop-system/half-opted-in (key "token") is not labelled pitstop.dev/usable-by-profiles=true`},
			notUsable: true,
		},
		"a key the Secret lacks": {
			edit: withBearer("prom-auth", "tokn"),
			want: []string{`bearerToken: Secret pitstop-system/prom-auth has no key "tokn"`},
		},
		"a missing Secret": {
			edit: withBearer("no-such-secret", "token"),
			want: []string{`bearerToken: reading Secret pitstop-system/no-such-secret (key "token"):`, "not found"},
		},
		"a token no HTTP header can carry": {
			edit: withBearer("prom-auth", "newline"),
			want: []string{`bearerToken: Secret pitstop-system/prom-auth (key "newline") holds a control character`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			prom := bearerPrometheus(t)
			_, err := evaluateAt(t, authCheck(t, prom.URL, secrets, tc.edit), time.Now())
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Fatalf("got %v, want an error containing %q", err, w)
				}
			}
			if tc.notUsable != errors.Is(err, profilesecret.ErrNotUsable) {
				t.Errorf("errors.Is(err, ErrNotUsable) = %t, want %t", !tc.notUsable, tc.notUsable)
			}
			assertHidden(t, err)
			if strings.Contains(err.Error(), "prom-\ntoken") {
				t.Errorf("the error shows the Secret's value: %v", err)
			}
			if seen := prom.seen(); len(seen) != 0 {
				t.Errorf("Prometheus got %d queries, want none", len(seen))
			}
		})
	}
}

// TestPrometheusInstantKeepsCredentialsOutOfErrors: a Prometheus (or a
// proxy before it) that echoes the Authorization header in its error does
// not get the token or the password into the check's error.
func TestPrometheusInstantKeepsCredentialsOutOfErrors(t *testing.T) {
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		user, pass, _ := r.BasicAuth()
		msg := fmt.Sprintf("cannot parse query; you sent %s (user %s, password %s)", r.Header.Get("Authorization"), user, pass)
		_, _ = fmt.Fprintf(w, `{"status":"error","errorType":"bad_data","error":%q}`, msg)
	}))
	t.Cleanup(echo.Close)
	secrets := secretsOf(secret("prom-auth", true, map[string]string{"token": token, "password": password}))

	for name, edit := range map[string]func(*pitstopv1alpha1.PrometheusInstantCheck){
		"bearer token": withBearer("prom-auth", "token"),
		"basic auth":   withBasicAuth("pitstop", "prom-auth", "password"),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := evaluateAt(t, authCheck(t, echo.URL, secrets, edit), time.Now())
			if err == nil || !strings.Contains(err.Error(), "bad_data: cannot parse query; you sent") || !strings.Contains(err.Error(), redacted) {
				t.Fatalf("got %v, want the server's error with the credentials replaced by %s", err, redacted)
			}
			assertHidden(t, err)
		})
	}
	if s := fmt.Sprintf("%v %+v %#v %s", Credentials{BearerToken: token}, Credentials{Password: password}, Credentials{BearerToken: token}, Credentials{Password: password}); strings.Contains(s, token) || strings.Contains(s, password) {
		t.Errorf("Credentials print what they hold: %s", s)
	}
}

// TestPrometheusInstantSendsCredentialsOnlyToItsHost: a redirect within
// the check's host is followed with the credentials; one to another host
// is refused, and that host gets no request at all.
func TestPrometheusInstantSendsCredentialsOnlyToItsHost(t *testing.T) {
	elsewhere := &authServer{}
	elsewhereMux := http.NewServeMux()
	elsewhere.serveQueries(elsewhereMux, func(*http.Request) bool { return true })
	elsewhere.Server = httptest.NewServer(elsewhereMux)
	t.Cleanup(elsewhere.Close)

	prom := &authServer{}
	mux := http.NewServeMux()
	prom.serveQueries(mux, func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer "+token })
	mux.HandleFunc("/moved/api/v1/query", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/api/v1/query", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/away/api/v1/query", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/api/v1/query", http.StatusTemporaryRedirect)
	})
	// The same address under another name is another host to a browser,
	// and to pitstop.
	mux.HandleFunc("/renamed/api/v1/query", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, strings.Replace(prom.URL, "127.0.0.1", "localhost", 1)+"/api/v1/query", http.StatusTemporaryRedirect)
	})
	prom.Server = httptest.NewServer(mux)
	t.Cleanup(prom.Close)
	secrets := secretsOf(secret("prom-auth", true, map[string]string{"token": token}))

	if _, err := evaluateAt(t, authCheck(t, prom.URL+"/moved", secrets, withBearer("prom-auth", "token")), time.Now()); err != nil {
		t.Errorf("a redirect within the host: %v", err)
	}
	if seen := prom.seen(); len(seen) != 1 || seen[0] != "Bearer "+token {
		t.Errorf("after a redirect within the host, the server saw %q, want the bearer token", seen)
	}

	for _, path := range []string{"/away", "/renamed"} {
		_, err := evaluateAt(t, authCheck(t, prom.URL+path, secrets, withBearer("prom-auth", "token")), time.Now())
		if !errors.Is(err, errRedirectElsewhere) {
			t.Errorf("%s: a redirect to another host: got %v, want it refused", path, err)
		}
		assertHidden(t, err)
	}
	if seen := elsewhere.seen(); len(seen) != 0 {
		t.Errorf("the other host got %d requests, want none", len(seen))
	}
	if seen := prom.seen(); len(seen) != 1 {
		t.Errorf("the server under another name got %d queries, want none beyond the first", len(seen)-1)
	}
}

// TestCredentialsGoOnlyToTheirHost: the transport that adds credentials
// refuses, by itself, a request to another host or scheme.
func TestCredentialsGoOnlyToTheirHost(t *testing.T) {
	var got []string
	next := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		got = append(got, r.URL.String()+" "+r.Header.Get("Authorization"))
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: r}, nil
	})
	origin, err := url.Parse("https://prometheus:9090/")
	if err != nil {
		t.Fatal(err)
	}
	rt := withCredentials{next: next, origin: origin, creds: Credentials{BearerToken: token}}
	for _, u := range []string{"https://prometheus:9090/api/v1/query", "http://prometheus:9090/api/v1/query", "https://elsewhere:9090/api/v1/query", "https://prometheus:9091/api/v1/query"} {
		req, err := http.NewRequest(http.MethodGet, u, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = rt.RoundTrip(req)
		if wantSent := u == "https://prometheus:9090/api/v1/query"; wantSent != (err == nil) {
			t.Errorf("%s: got %v, want sent: %t", u, err, wantSent)
		}
		if req.Header.Get("Authorization") != "" {
			t.Errorf("%s: the caller's request was changed", u)
		}
	}
	if want := []string{"https://prometheus:9090/api/v1/query Bearer " + token}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("sent %q, want %q", got, want)
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestPrometheusInstantReadsARotatedSecret: the credentials are read when
// the check is evaluated and kept for credentialsTTL: a rotated token is
// sent once that has passed, with no new profile or restart.
func TestPrometheusInstantReadsARotatedSecret(t *testing.T) {
	const rotated = "prom-token-rotated-55d1"
	var mu sync.Mutex
	accepted := token
	prom := &authServer{}
	mux := http.NewServeMux()
	prom.serveQueries(mux, func(r *http.Request) bool {
		mu.Lock()
		defer mu.Unlock()
		return r.Header.Get("Authorization") == "Bearer "+accepted
	})
	prom.Server = httptest.NewServer(mux)
	t.Cleanup(prom.Close)
	s := secret("prom-auth", true, map[string]string{"token": token})
	secrets := secretsOf(s)
	c := authCheck(t, prom.URL, secrets, withBearer("prom-auth", "token"))

	if _, err := evaluateAt(t, c, noon); err != nil {
		t.Fatal(err)
	}
	s.Data["token"] = []byte(rotated)
	if err := secrets.Update(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	accepted = rotated
	mu.Unlock()
	_, err := evaluateAt(t, c, noon.Add(credentialsTTL-time.Second))
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("within %s of the first read: got %v, want the token read then, which the server no longer accepts", credentialsTTL, err)
	}
	if _, err := evaluateAt(t, c, noon.Add(credentialsTTL)); err != nil {
		t.Errorf("%s after the first read: got %v, want the rotated token read and accepted", credentialsTTL, err)
	}
	want := []string{"Bearer " + token, "Bearer " + token, "Bearer " + rotated}
	if seen := prom.seen(); fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Errorf("the server saw %q, want %q", seen, want)
	}
}

// TestPrometheusInstantWithoutSecretsSaysSo: where pitstop's Secrets are
// not read (`pitstop explain`), a check with credentials builds, and its
// evaluation fails naming the Secret and the key and saying that only the
// manager reads them; no query is sent.
func TestPrometheusInstantWithoutSecretsSaysSo(t *testing.T) {
	prom := bearerPrometheus(t)
	inst := promCheck(prom.URL, "up", ">=", "1")
	withBearer("prom-auth", "token")(inst.PrometheusInstant)
	c, err := New(inst, Deps{Prometheus: NewPrometheusClient()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = evaluateAt(t, c, time.Now())
	want := `bearerToken: Secret prom-auth (key "token") is not read here: only pitstop's manager reads the Secrets of profiles; the dashboard shows its last result of this check`
	if err == nil || err.Error() != want || !errors.Is(err, errNoSecrets) {
		t.Errorf("got %v, want %q", err, want)
	}
	if seen := prom.seen(); len(seen) != 0 {
		t.Errorf("Prometheus got %d queries, want none", len(seen))
	}
}

// TestUntrustedPrometheusCredentialsGoOnlyToAllowedURLs: a profile author
// names the URL of a prometheusInstant check, and may name any opted-in
// Secret as its bearer token or basic auth. Such a check is refused unless
// an administrator allowed its URL (--prometheus-url-allow), also when the
// list is empty, which still lets checks without credentials query any
// URL; the refusal names the field, the host and the flag, and nothing
// reaches the server. An allowed URL gets the token. pitstop explain,
// which reads no Secret (Secrets nil), still builds the check.
func TestUntrustedPrometheusCredentialsGoOnlyToAllowedURLs(t *testing.T) {
	evil := bearerPrometheus(t)
	secrets := secretsOf(secret("prom-auth", true, map[string]string{"token": token, "password": password}))
	host := strings.TrimPrefix(evil.URL, "http://")
	build := func(allow []string, reader client.Reader, edit func(*pitstopv1alpha1.PrometheusInstantCheck)) (Check, error) {
		prefixes, err := ParseURLPrefixes(allow)
		if err != nil {
			t.Fatal(err)
		}
		inst := promCheck(evil.URL, "up", ">=", "1")
		edit(inst.PrometheusInstant)
		return New(inst, Deps{Prometheus: NewPrometheusClient(), PrometheusURLs: prefixes, Secrets: reader, Namespace: pitstopNamespace})
	}
	for name, tc := range map[string]struct {
		allow []string
		edit  func(*pitstopv1alpha1.PrometheusInstantCheck)
		field string
	}{
		"a bearer token with no URL allowed":           {nil, withBearer("prom-auth", "token"), "bearerToken (Secret prom-auth"},
		"basic auth with no URL allowed":               {nil, withBasicAuth("pitstop", "prom-auth", "password"), "basicAuth.password (Secret prom-auth"},
		"a bearer token to a URL another host's":       {[]string{"https://prometheus.monitoring.svc:9090/"}, withBearer("prom-auth", "token"), "is not under a Prometheus URL this pitstop allows"},
		"a bearer token to an allowed host, elsewhere": {[]string{evil.URL + "/prometheus"}, withBearer("prom-auth", "token"), "is not under a Prometheus URL this pitstop allows"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := build(tc.allow, secrets, tc.edit)
			if err == nil || !strings.HasPrefix(err.Error(), `prometheusInstant.url`) || !strings.Contains(err.Error(), tc.field) ||
				!strings.Contains(err.Error(), host) || !strings.Contains(err.Error(), "--prometheus-url-allow") {
				t.Fatalf("got %v, want a refusal naming the field, the host %s and --prometheus-url-allow", err, host)
			}
			assertHidden(t, err)
		})
	}
	if seen := evil.seen(); len(seen) != 0 {
		t.Fatalf("the server not allowed was sent %d queries, with Authorization %q", len(seen), seen)
	}

	// Without credentials, an empty list still allows any URL, as before.
	if _, err := build(nil, secrets, func(*pitstopv1alpha1.PrometheusInstantCheck) {}); err != nil {
		t.Errorf("a check without credentials: %v", err)
	}
	// pitstop explain reads no Secret and so sends none.
	if _, err := build(nil, nil, withBearer("prom-auth", "token")); err != nil {
		t.Errorf("without a Secrets reader: %v", err)
	}
	// An allowed URL gets the token.
	c, err := build([]string{evil.URL + "/"}, secrets, withBearer("prom-auth", "token"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	got, err := evaluateAt(t, c, now)
	if err != nil {
		t.Fatal(err)
	}
	assertQueried(t, got, Result{Passed: true, Reason: "up is 1, >= 1"}, now)
	if seen := evil.seen(); len(seen) != 1 || seen[0] != "Bearer "+token {
		t.Errorf("the allowed server saw %q, want the bearer token once", seen)
	}
}
