package check

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

func promCheck(url, query, operator, threshold string) pitstopv1alpha1.CheckInstance {
	return pitstopv1alpha1.CheckInstance{PrometheusInstant: &pitstopv1alpha1.PrometheusInstantCheck{
		URL: url, Query: query, Operator: operator, Threshold: threshold,
	}}
}

func TestPrometheusInstant(t *testing.T) {
	boom := errors.New("connection refused")
	cases := map[string]struct {
		value      float64
		err        error
		operator   string
		threshold  string
		wantPassed bool
		wantReason string
		wantErr    string
	}{
		">= passes at the threshold": {value: 1, operator: ">=", threshold: "1", wantPassed: true, wantReason: "up is 1, >= 1"},
		"> fails at the threshold":   {value: 1, operator: ">", threshold: "1", wantReason: "up is 1, want > 1"},
		"< passes below":             {value: 0.25, operator: "<", threshold: "0.5", wantPassed: true, wantReason: "up is 0.25, < 0.5"},
		"<= fails above":             {value: 0.75, operator: "<=", threshold: "0.5", wantReason: "up is 0.75, want <= 0.5"},
		"== compares exactly":        {value: 3, operator: "==", threshold: "3.0", wantPassed: true, wantReason: "up is 3, == 3"},
		"!= fails on equal values":   {value: 3, operator: "!=", threshold: "3", wantReason: "up is 3, want != 3"},
		"NaN is only unequal":        {value: math.NaN(), operator: "!=", threshold: "0", wantPassed: true, wantReason: "up is NaN, != 0"},
		"NaN is not at least anything": {
			value: math.NaN(), operator: ">=", threshold: "0", wantReason: "up is NaN, want >= 0",
		},
		"returns the query's error, so the transition does not pass, and asks again later": {
			err: boom, operator: ">=", threshold: "1", wantErr: "querying http://prometheus:9090: connection refused",
		},
	}
	n := node("n1")
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, err := New(promCheck("http://prometheus:9090", "up", tc.operator, tc.threshold), Deps{Prometheus: fixedPrometheus{tc.value, tc.err}})
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.Evaluate(context.Background(), Context{Node: &n, Now: noon})
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr || !errors.Is(err, boom) {
					t.Fatalf("got error %v, want %q wrapping the query's", err, tc.wantErr)
				}
				if want := noon.Add(prometheusRecheck); !got.NextChange.Equal(want) {
					t.Errorf("after a failed query, evaluated again at %s, want %s", got.NextChange, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			assertQueried(t, got, Result{Passed: tc.wantPassed, Reason: tc.wantReason}, noon)
		})
	}
}

// TestAProfilesRecheckSetsWhenOutsideAnswersAreAskedAgain: the checks
// whose answer comes from outside the cluster ask to be evaluated again
// after the profile's spec.recheck, when it sets one, instead of their own
// time: a Prometheus that answers and one that fails (kubernikusCount:
// TestKubernikusCountComparesTheNodesWithTheNodePools).
func TestAProfilesRecheckSetsWhenOutsideAnswersAreAskedAgain(t *testing.T) {
	n := node("n1")
	for _, tc := range []struct {
		name    string
		recheck time.Duration
		prom    fixedPrometheus
		want    time.Time
	}{
		{name: "answered, own time", prom: fixedPrometheus{value: 0}, want: noon.Add(prometheusRecheck)},
		{name: "answered, the profile's", recheck: 5 * time.Second, prom: fixedPrometheus{value: 0}, want: noon.Add(5 * time.Second)},
		{name: "failed, the profile's", recheck: 2 * time.Minute, prom: fixedPrometheus{err: errors.New("connection refused")}, want: noon.Add(2 * time.Minute)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(promCheck("http://prometheus:9090", "up", ">=", "1"), Deps{Prometheus: tc.prom})
			if err != nil {
				t.Fatal(err)
			}
			got, _ := c.Evaluate(context.Background(), Context{Node: &n, Now: noon, Recheck: tc.recheck})
			if !got.NextChange.Equal(tc.want) {
				t.Errorf("evaluated again at %s, want %s", got.NextChange, tc.want)
			}
		})
	}
}

// TestPrometheusInstantExpr judges the value with a CEL expression: a
// range, integers beside the double value, arithmetic on doubles.
func TestPrometheusInstantExpr(t *testing.T) {
	n := node("n1")
	for _, tc := range []struct {
		expr  string
		value float64
		want  Result
	}{
		{"value >= 1 && value < 5", 3, Result{Passed: true, Reason: "up is 3, value >= 1 && value < 5"}},
		{"value >= 1 && value < 5", 5, Result{Reason: "up is 5, want value >= 1 && value < 5"}},
		{"value == 0 || value > 10", 0, Result{Passed: true, Reason: "up is 0, value == 0 || value > 10"}},
		{"value / 1024 > 2", 1024, Result{Reason: "up is 1024, want value / 1024 > 2"}},
		{"value / 1024 >= 1", 1024, Result{Passed: true, Reason: "up is 1024, value / 1024 >= 1"}},
		{"value > 1 ? value < 3 : false", 2, Result{Passed: true, Reason: "up is 2, value > 1 ? value < 3 : false"}},
	} {
		t.Run(fmt.Sprintf("%s at %g", tc.expr, tc.value), func(t *testing.T) {
			c, err := New(pitstopv1alpha1.CheckInstance{PrometheusInstant: &pitstopv1alpha1.PrometheusInstantCheck{
				URL: "http://prometheus:9090", Query: "up", Expr: tc.expr,
			}}, Deps{Prometheus: fixedPrometheus{tc.value, nil}})
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.Evaluate(context.Background(), Context{Node: &n, Now: noon})
			if err != nil {
				t.Fatal(err)
			}
			assertQueried(t, got, tc.want, noon)
		})
	}
}

// TestPrometheusClient runs the checks against a real Prometheus that
// scrapes a target served by the test.
func TestPrometheusClient(t *testing.T) {
	url := startPrometheus(t, "# TYPE pitstop_test_health gauge\npitstop_test_health 1\n"+
		"# TYPE pitstop_test_series gauge\npitstop_test_series{shard=\"a\"} 1\npitstop_test_series{shard=\"b\"} 2\n")
	client := NewPrometheusClient()
	testutil.Eventually(t, time.Minute, 250*time.Millisecond, func() error {
		_, err := client.Query(context.Background(), url, Credentials{}, "pitstop_test_health", time.Now())
		return err
	})

	cases := map[string]struct {
		query, operator, threshold string
		wantPassed                 bool
		wantReason                 string
		wantErr                    string
	}{
		"passes when the value meets the threshold": {
			query: "pitstop_test_health", operator: ">=", threshold: "1",
			wantPassed: true, wantReason: "pitstop_test_health is 1, >= 1",
		},
		"fails when the value misses the threshold": {
			query: "pitstop_test_health", operator: ">=", threshold: "1.5",
			wantReason: "pitstop_test_health is 1, want >= 1.5",
		},
		"passes below an upper bound": {
			query: "pitstop_test_health", operator: "<", threshold: "2",
			wantPassed: true, wantReason: "pitstop_test_health is 1, < 2",
		},
		"fails at an upper bound": {
			query: "pitstop_test_health", operator: "<", threshold: "1",
			wantReason: "pitstop_test_health is 1, want < 1",
		},
		"reads one series out of an aggregation": {
			query: "sum(pitstop_test_series)", operator: "==", threshold: "3",
			wantPassed: true, wantReason: "sum(pitstop_test_series) is 3, == 3",
		},
		"reads a scalar": {
			query: "scalar(pitstop_test_health) * 2", operator: "==", threshold: "2",
			wantPassed: true, wantReason: "scalar(pitstop_test_health) * 2 is 2, == 2",
		},
		"refuses a query returning two series": {
			query: "pitstop_test_series", operator: ">=", threshold: "0",
			wantErr: `query "pitstop_test_series" returned 2 series, want exactly 1`,
		},
		"refuses a query returning no series": {
			query: "pitstop_test_missing", operator: ">=", threshold: "0",
			wantErr: `query "pitstop_test_missing" returned 0 series, want exactly 1`,
		},
		"refuses a range vector": {
			query: "pitstop_test_health[1m]", operator: ">=", threshold: "0",
			wantErr: `query "pitstop_test_health[1m]" returned a matrix, want a vector of one series or a scalar`,
		},
		"returns PromQL errors": {
			query: "sum(", operator: ">=", threshold: "0",
			wantErr: `running query "sum(": bad_data:`,
		},
	}
	n := node("n1")
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, err := New(promCheck(url, tc.query, tc.operator, tc.threshold), Deps{Prometheus: client})
			if err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			got, err := c.Evaluate(context.Background(), Context{Node: &n, Now: now})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			assertQueried(t, got, Result{Passed: tc.wantPassed, Reason: tc.wantReason}, now)
		})
	}
}

func TestPrometheusClientGivesUp(t *testing.T) {
	stop := make(chan struct{})
	hanging := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		// The server notices a client going away only once the body is read.
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	t.Cleanup(hanging.Close)
	t.Cleanup(func() { close(stop) })
	client := &prometheusClient{timeout: 200 * time.Millisecond}
	began := time.Now()
	_, err := client.Query(context.Background(), hanging.URL, Credentials{}, "up", time.Now())
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got error %v, want the deadline exceeded", err)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("gave up after %s, want about 200ms", took)
	}

	unreachable := fmt.Sprintf("http://127.0.0.1:%d", testutil.FreePort(t))
	if _, err := client.Query(context.Background(), unreachable, Credentials{}, "up", time.Now()); err == nil {
		t.Errorf("querying %s: got no error", unreachable)
	}
}

// startPrometheus runs the prometheus binary (Debian's package, installed
// by `make deps`) scraping a target that serves metrics every second, and
// returns its URL once it is ready. It is killed when the test ends.
func startPrometheus(t *testing.T, metrics string) string {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("the prometheus binary is needed to test the Prometheus client (%v): run `make deps`", err)
	}
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write([]byte(metrics))
	}))
	t.Cleanup(target.Close)

	dir := t.TempDir()
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
- job_name: pitstop-test
  static_configs:
  - targets: [%q]
`, strings.TrimPrefix(target.URL, "http://"))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	cmd := exec.Command(bin,
		"--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		_ = logFile.Close()
	})

	url := "http://" + addr
	testutil.Eventually(t, time.Minute, 100*time.Millisecond, func() error {
		select {
		case err := <-exited:
			exited <- err
			log, _ := os.ReadFile(logFile.Name())
			t.Fatalf("prometheus exited (%v):\n%s", err, log)
		default:
		}
		resp, err := http.Get(url + "/-/ready")
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s/-/ready: %s", url, resp.Status)
		}
		return nil
	})
	return url
}

// TestPrometheusURLCarriesNoCredentials: a URL with user:password@ is
// refused when the profile compiles, and the password is not in the error.
func TestPrometheusURLCarriesNoCredentials(t *testing.T) {
	_, err := New(promCheck("https://pitstop:s3cret@prometheus.example.com:9090", "up", ">=", "1"), Deps{Prometheus: fixedPrometheus{}})
	if err == nil || !strings.Contains(err.Error(), "must not carry credentials") {
		t.Fatalf("got %v, want a refusal of credentials in the URL", err)
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("the error echoes the password: %v", err)
	}
}

// TestPrometheusClientStaysOnItsHost: a Prometheus that redirects a query
// to another host is not followed there; a redirect within its own host
// is.
func TestPrometheusClientStaysOnItsHost(t *testing.T) {
	var elsewhereCalled atomic.Bool
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		elsewhereCalled.Store(true)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"scalar","result":[0,"1"]}}`))
	}))
	t.Cleanup(elsewhere.Close)
	mux := http.NewServeMux()
	mux.HandleFunc("/away/api/v1/query", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/api/v1/query", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/moved/api/v1/query", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/api/v1/query", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/api/v1/query", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"scalar","result":[0,"7"]}}`))
	})
	prometheus := httptest.NewServer(mux)
	t.Cleanup(prometheus.Close)
	client := &prometheusClient{timeout: 5 * time.Second}

	if _, err := client.Query(context.Background(), prometheus.URL+"/away", Credentials{}, "up", time.Now()); !errors.Is(err, errRedirectElsewhere) {
		t.Errorf("a redirect to another host: got %v, want it refused", err)
	}
	if elsewhereCalled.Load() {
		t.Error("the query was sent to the other host")
	}
	if v, err := client.Query(context.Background(), prometheus.URL+"/moved", Credentials{}, "up", time.Now()); err != nil || v != 7 {
		t.Errorf("a redirect within the host: got %v, %v; want 7", v, err)
	}
}
