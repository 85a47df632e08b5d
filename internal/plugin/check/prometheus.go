package check

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

// queryTimeout bounds each PromQL query of NewPrometheusClient, so an
// unreachable Prometheus holds a reconcile back for that long at most.
const queryTimeout = 10 * time.Second

// prometheusInstant is a health gate: it compares the one value of a
// PromQL instant query, at the instant of the evaluation, with a threshold.
// A query that fails, or does not return exactly one sample, is an error:
// the transition does not pass, and nothing is guessed.
type prometheusInstant struct {
	url, query string
	operator   string
	threshold  float64
	// expr, when set, decides instead of operator and threshold.
	expr       *ValueExpr
	prometheus Prometheus
	// auth reads the credentials each query sends; nil sends none.
	auth *auth
}

// comparisons are the operators the API allows. NaN compares as in Go:
// only != holds.
var comparisons = map[string]func(v, threshold float64) bool{
	"<":  func(v, t float64) bool { return v < t },
	"<=": func(v, t float64) bool { return v <= t },
	"==": func(v, t float64) bool { return v == t },
	"!=": func(v, t float64) bool { return v != t },
	">=": func(v, t float64) bool { return v >= t },
	">":  func(v, t float64) bool { return v > t },
}

func newPrometheusInstant(cfg *pitstopv1alpha1.PrometheusInstantCheck, deps Deps) (Check, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, errors.New("url: not a URL") // the text may hold a password: not echoed
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("url: %q is not an http(s) URL", u.Redacted())
	}
	// Credentials in the URL would be stored in the profile for anyone who
	// reads it, and printed in every error that names the URL.
	if u.User != nil {
		return nil, fmt.Errorf("url: %s must not carry credentials (user:password@)", u.Redacted())
	}
	if err := deps.PrometheusURLs.allow(u); err != nil {
		return nil, fmt.Errorf("url: %w", err)
	}
	if cfg.Query == "" {
		return nil, errors.New("query: must not be empty")
	}
	p := &prometheusInstant{url: cfg.URL, query: cfg.Query, prometheus: deps.Prometheus}
	switch {
	case cfg.Expr != "" && (cfg.Operator != "" || cfg.Threshold != ""):
		return nil, errors.New("expr: set either expr, or operator and threshold")
	case cfg.Expr != "":
		if p.expr, err = CompileValueExpr(cfg.Expr); err != nil {
			return nil, fmt.Errorf("expr: %w", err)
		}
	default:
		if _, ok := comparisons[cfg.Operator]; !ok {
			return nil, fmt.Errorf("operator: %q is not one of <, <=, ==, !=, >=, >", cfg.Operator)
		}
		p.operator = cfg.Operator
		if p.threshold, err = strconv.ParseFloat(cfg.Threshold, 64); err != nil || math.IsNaN(p.threshold) {
			return nil, fmt.Errorf("threshold: %q is not a number", cfg.Threshold)
		}
	}
	if p.auth, err = newAuth(cfg, deps); err != nil {
		return nil, err
	}
	if err := deps.PrometheusURLs.allowCredentials(u, p.auth, deps.Secrets != nil); err != nil {
		return nil, err
	}
	return p, nil
}

// prometheusRecheck is how often a node whose state's transitions use a
// prometheusInstant check is evaluated again: nothing announces that the
// query's value changed, or that a Prometheus that failed answers again.
const prometheusRecheck = 30 * time.Second

// Evaluate implements Check.
func (p *prometheusInstant) Evaluate(ctx context.Context, c Context) (Result, error) {
	r, err := p.evaluate(ctx, c)
	r.NextChange = c.recheck(prometheusRecheck)
	return r, err
}

func (p *prometheusInstant) evaluate(ctx context.Context, c Context) (Result, error) {
	var creds Credentials
	if p.auth != nil {
		var err error
		if creds, err = p.auth.credentials(ctx, c.Now); err != nil {
			return Result{}, err
		}
	}
	v, err := p.prometheus.Query(ctx, p.url, creds, p.query, c.Now)
	if err != nil {
		return Result{}, fmt.Errorf("querying %s: %w", p.url, creds.redact(err))
	}
	got := strconv.FormatFloat(v, 'g', -1, 64)
	if p.expr != nil {
		ok, err := p.expr.Eval(v)
		switch {
		case err != nil:
			return Result{}, err
		case !ok:
			return Result{Reason: fmt.Sprintf("%s is %s, want %s", p.query, got, p.expr)}, nil
		}
		return Result{Passed: true, Reason: fmt.Sprintf("%s is %s, %s", p.query, got, p.expr)}, nil
	}
	want := p.operator + " " + strconv.FormatFloat(p.threshold, 'g', -1, 64)
	if !comparisons[p.operator](v, p.threshold) {
		return Result{Reason: fmt.Sprintf("%s is %s, want %s", p.query, got, want)}, nil
	}
	return Result{Passed: true, Reason: fmt.Sprintf("%s is %s, %s", p.query, got, want)}, nil
}

// errRedirectElsewhere refuses a redirect away from the host a check
// names: a Prometheus that answers with one must not send pitstop's
// queries, from inside the cluster, to an address of its choosing.
var errRedirectElsewhere = errors.New("refusing a redirect to another host")

// sameHostClient is an HTTP client that follows redirects only within the
// host first asked, origin, and sends creds to that host alone.
func sameHostClient(origin *url.URL, creds Credentials) *http.Client {
	var transport http.RoundTripper = api.DefaultRoundTripper
	if creds != (Credentials{}) {
		transport = withCredentials{next: transport, origin: origin, creds: creds}
	}
	return &http.Client{
		Transport: transport,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 10 {
				return errors.New("stopped after 10 redirects")
			}
			if req.URL.Host != via[0].URL.Host || req.URL.Scheme != via[0].URL.Scheme {
				return fmt.Errorf("%w: %s", errRedirectElsewhere, req.URL.Redacted())
			}
			return nil
		},
	}
}

// NewPrometheusClient returns the Prometheus that pitstop's manager gives
// its checks: it runs instant queries over the HTTP API, each bounded by
// queryTimeout, and refuses an answer that is not exactly one sample (a
// vector of one series, or a scalar).
func NewPrometheusClient() Prometheus {
	return &prometheusClient{timeout: queryTimeout}
}

type prometheusClient struct {
	timeout time.Duration
}

// Query implements Prometheus.
func (p *prometheusClient) Query(ctx context.Context, address string, creds Credentials, query string, at time.Time) (float64, error) {
	origin, err := url.Parse(address)
	if err != nil {
		return 0, fmt.Errorf("creating a client for %s: %w", address, err)
	}
	client, err := api.NewClient(api.Config{Address: address, Client: sameHostClient(origin, creds)})
	if err != nil {
		return 0, fmt.Errorf("creating a client for %s: %w", address, err)
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	value, _, err := promv1.NewAPI(client).Query(ctx, query, at, promv1.WithTimeout(p.timeout))
	if err != nil {
		return 0, fmt.Errorf("running query %q: %w", query, err)
	}
	switch v := value.(type) {
	case model.Vector:
		if len(v) != 1 {
			return 0, fmt.Errorf("query %q returned %d series, want exactly 1", query, len(v))
		}
		return float64(v[0].Value), nil
	case *model.Scalar:
		return float64(v.Value), nil
	default:
		return 0, fmt.Errorf("query %q returned a %s, want a vector of one series or a scalar", query, value.Type())
	}
}
