package main

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// asPitstop, when set, makes the test binary behave as the pitstop binary:
// tests run the real command line in a child process they can signal.
const asPitstop = "PITSTOP_TEST_AS_MAIN"

// env is the API server the `run` tests talk to.
var env *testutil.Env

func TestMain(m *testing.M) {
	if os.Getenv(asPitstop) == "1" {
		os.Exit(execute(os.Args[1:], os.Stdout, os.Stderr))
	}
	testutil.Main(m, &env)
}

// child is pitstop running in a child process.
type child struct {
	t      *testing.T
	cmd    *exec.Cmd
	lines  chan string // stdout, line by line
	stderr *syncBuffer
	done   chan struct{}
	err    error
	// read are the lines awaitLine has read so far.
	read []string
}

// startPitstop runs `pitstop args...` as a child process. It is killed when
// the test ends if it is still running.
func startPitstop(t *testing.T, args ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), asPitstop+"=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &child{t: t, cmd: cmd, lines: make(chan string, 1000), stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			c.lines <- scanner.Text()
		}
		close(c.lines)
	}()
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		select {
		case <-c.done:
		default:
			_ = cmd.Process.Kill()
			<-c.done
		}
		if t.Failed() {
			t.Logf("stderr of pitstop %s:\n%s", strings.Join(args, " "), c.stderr.String())
		}
	})
	return c
}

// awaitLine returns the first stdout line with prefix, and every line read
// up to it.
func (c *child) awaitLine(prefix string, timeout time.Duration) (string, []string) {
	c.t.Helper()
	var seen []string
	deadline := time.After(timeout)
	for {
		select {
		case line, ok := <-c.lines:
			if !ok {
				c.t.Fatalf("pitstop exited before printing %q; stdout:\n%s", prefix, strings.Join(seen, "\n"))
			}
			seen = append(seen, line)
			c.read = append(c.read, line)
			if strings.HasPrefix(strings.TrimSpace(line), prefix) {
				return strings.TrimSpace(line), seen
			}
		case <-deadline:
			c.t.Fatalf("pitstop did not print %q within %s; stdout:\n%s", prefix, timeout, strings.Join(seen, "\n"))
		}
	}
}

// awaitLineAnywhere is awaitLine, also finding a line an earlier
// awaitLine read past: for lines of demos that run side by side.
func (c *child) awaitLineAnywhere(prefix string, timeout time.Duration) string {
	c.t.Helper()
	for _, line := range c.read {
		if strings.HasPrefix(strings.TrimSpace(line), prefix) {
			return strings.TrimSpace(line)
		}
	}
	line, _ := c.awaitLine(prefix, timeout)
	return line
}

// signal sends sig and waits for the process to exit, returning its exit
// code (-1 when killed by a signal).
func (c *child) signal(sig syscall.Signal, timeout time.Duration) int {
	c.t.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil {
		c.t.Fatal(err)
	}
	return c.wait(timeout)
}

func (c *child) wait(timeout time.Duration) int {
	c.t.Helper()
	select {
	case <-c.done:
	case <-time.After(timeout):
		// SIGQUIT makes the Go runtime write every goroutine's stack to
		// stderr, which the test prints: what pitstop was stuck in.
		_ = c.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-c.done:
		case <-time.After(5 * time.Second):
		}
		c.t.Fatalf("pitstop still running %s after the signal (its goroutines are in its stderr)", timeout)
	}
	return c.cmd.ProcessState.ExitCode()
}

// restOfStdout drains stdout after the process exited.
func (c *child) restOfStdout() string {
	var b strings.Builder
	for line := range c.lines {
		b.WriteString(line + "\n")
	}
	return b.String()
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader goroutine.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

var _ io.Writer = (*syncBuffer)(nil)

// TestBadFlagsExitWithOneLine checks that every bad flag value is refused at
// start, with exit code 2 and one line naming the flag and the value.
func TestBadFlagsExitWithOneLine(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want []string // parts of the one line
	}{
		{"unknown log level", []string{"run", "--log-level=loud"}, []string{"--log-level", `"loud"`}},
		{"negative verbosity", []string{"run", "--log-level=-1"}, []string{"--log-level", `"-1"`}},
		{"unknown log format", []string{"run", "--log-format=xml"}, []string{"--log-format", `"xml"`}},
		{"metrics address without port", []string{"run", "--metrics-bind-address=localhost"}, []string{"--metrics-bind-address", `"localhost"`}},
		{"slack API not a URL", []string{"run", "--slack-api-url=slack.example.com/api"}, []string{"--slack-api-url", `"slack.example.com/api"`, "http(s) URL"}},
		{"health port out of range", []string{"run", "--health-probe-bind-address=:70000"}, []string{"--health-probe-bind-address", `":70000"`}},
		{"same address twice", []string{"run", "--metrics-bind-address=:9090", "--health-probe-bind-address=:9090"}, []string{"--health-probe-bind-address", `":9090"`}},
		{"dashboard address without port", []string{"run", "--dashboard-addr=8082"}, []string{"--dashboard-addr", `"8082"`}},
		{"dashboard on the metrics port", []string{"run", "--metrics-bind-address=:9090", "--dashboard-addr=127.0.0.1:9090"}, []string{"--dashboard-addr", `"127.0.0.1:9090"`, "--metrics-bind-address"}},
		{"prometheus prefix not a URL", []string{"run", "--prometheus-url-allow=https://prometheus.monitoring.svc:9090/,prometheus:9090"}, []string{"--prometheus-url-allow", `"prometheus:9090"`, "http(s) URL"}},
		{"prometheus prefix with a query", []string{"run", "--prometheus-url-allow=https://prometheus.monitoring.svc:9090/?x=1"}, []string{"--prometheus-url-allow", "no credentials, query or fragment"}},
		{"aws endpoint not a URL", []string{"run", "--aws-endpoint=ec2.example.com"}, []string{"--aws-endpoint", `"ec2.example.com"`}},
		{"unknown machine provider", []string{"run", "--machine-providers=aws,gce"}, []string{"--machine-providers", `"aws,gce"`, `"gce"`}},
		{"machine drain timeout under a second", []string{"run", "--machine-drain-timeout=10ms"}, []string{"--machine-drain-timeout", `"10ms"`}},
		{"unknown machine drain policy", []string{"run", "--machine-drain-on-timeout=Evict"}, []string{"--machine-drain-on-timeout", `"Evict"`, "ForceDelete"}},
		{"pprof on the dashboard port", []string{"run", "--pprof-addr=127.0.0.1:8082"}, []string{"--pprof-addr", `"127.0.0.1:8082"`, "--dashboard-addr"}},
		{"dashboard on the health port", []string{"run", "--dashboard-addr=:8081"}, []string{"--dashboard-addr", `":8081"`, "--health-probe-bind-address"}},
		{"lease namespace not a DNS label", []string{"run", "--leader-election-namespace=Kube_System"}, []string{"--leader-election-namespace", `"Kube_System"`}},
		{"lease name not a DNS name", []string{"run", "--leader-election-id=my lease"}, []string{"--leader-election-id", `"my lease"`}},
		{"renew deadline past the lease", []string{"run", "--leader-election-renew-deadline=20s"}, []string{"--leader-election-renew-deadline", `"20s"`, "lease-duration"}},
		{"no profile workers", []string{"run", "--profile-concurrency=0"}, []string{"--profile-concurrency", `"0"`, "at least 1"}},
		{"zero retry period", []string{"run", "--leader-election-retry-period=0s"}, []string{"--leader-election-retry-period", `"0s"`}},
		{"not a duration", []string{"run", "--graceful-shutdown-timeout=soon"}, []string{"--graceful-shutdown-timeout", `"soon"`}},
		{"not a bool", []string{"run", "--leader-elect=maybe"}, []string{"--leader-elect", `"maybe"`}},
		{"missing kubeconfig", []string{"run", "--kubeconfig=/nonexistent/kubeconfig"}, []string{"--kubeconfig", `"/nonexistent/kubeconfig"`, "no such file"}},
		{"esx without its file", []string{"run", "--esx", "--esx-config=/nonexistent/esx.yaml"}, []string{"--esx-config", `"/nonexistent/esx.yaml"`, "no such file"}},
		{"esx file with a bad field", []string{"run", "--esx", "--esx-config=" + writeFile(t, "esx.yaml", "intervals:\n  check:\n    period: 10ms\nvCenters:\n  templateUrl: https://vc.example.com\n")}, []string{"--esx-config", "intervals.check.period: must be at least 1s", "has no $AZ", "vCenters.credentials: required"}},
		{"kubernikus file with a bad field", []string{"run", "--kubernikus", "--kubernikus-config=" + writeFile(t, "kubernikus.yaml", "intervals:\n  requeue: 10ms\n")}, []string{"--kubernikus-config", "intervals.requeue: must be at least 1s"}},
		{"unknown flag", []string{"run", "--metrics-addr=:8080"}, []string{"--metrics-addr"}},
		{"unknown version output", []string{"version", "-o", "yaml"}, []string{"--output", `"yaml"`}},
	} {
		t.Run(tc.name, func(t *testing.T) { assertUsageLine(t, tc.args, tc.want...) })
	}
}

// assertUsageLine runs `pitstop args...` and wants exit code 2 and one line
// on stderr that contains every part of want.
func assertUsageLine(t *testing.T, args []string, want ...string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := execute(args, &stdout, &stderr); code != 2 {
		t.Errorf("exit code %d, want 2", code)
	}
	lines := strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n")
	if len(lines) != 1 {
		t.Fatalf("stderr has %d lines, want 1:\n%s", len(lines), stderr.String())
	}
	for _, part := range want {
		if !strings.Contains(lines[0], part) {
			t.Errorf("%q does not mention %s", lines[0], part)
		}
	}
}

func TestVersionPrintsVersionCommitAndGo(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := execute([]string{"version"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit code %d: %s", code, stderr.String())
	}
	for _, part := range []string{"pitstop dev", "commit", "go1."} {
		if !strings.Contains(stdout.String(), part) {
			t.Errorf("version output %q lacks %q", stdout.String(), part)
		}
	}
	stdout.Reset()
	if code := execute([]string{"version", "-o", "json"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit code %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), `"goVersion": "go1.`) {
		t.Errorf("json version output lacks goVersion: %s", stdout.String())
	}
}

func clientKey(namespace, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: namespace, Name: name}
}

// writeFile writes content to a file named name in a new temporary
// directory and returns its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
