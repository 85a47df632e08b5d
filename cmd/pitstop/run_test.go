package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/ptr"

	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// runArgs are the flags of a `pitstop run` under test: the envtest API
// server, free ports (the dashboard's too, so replicas can run side by
// side), a Lease of its own and short leader-election timings.
func runArgs(t *testing.T, leaseName string) (args []string, metrics, health string) {
	t.Helper()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	metrics, health = freeAddr(t), freeAddr(t)
	return []string{
		"run",
		"--kubeconfig=" + kubeconfig,
		"--metrics-bind-address=" + metrics,
		"--health-probe-bind-address=" + health,
		"--dashboard-addr=" + freeAddr(t),
		"--leader-election-namespace=default",
		"--leader-election-id=" + leaseName,
		"--leader-election-lease-duration=4s",
		"--leader-election-renew-deadline=3s",
		"--leader-election-retry-period=500ms",
		"--webhook-port=0",
	}, metrics, health
}

func freeAddr(t *testing.T) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
}

func get(url string) (int, string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

func awaitOK(t *testing.T, url string) string {
	t.Helper()
	var body string
	testutil.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		code, b, err := get(url)
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("GET %s: %d %s", url, code, b)
		}
		body = b
		return nil
	})
	return body
}

// leaseHolder returns the holder of the Lease, "" when released.
func leaseHolder(t *testing.T, name string) string {
	t.Helper()
	lease := &coordinationv1.Lease{}
	if err := env.Client.Get(t.Context(), clientKey("default", name), lease); err != nil {
		return "<" + err.Error() + ">"
	}
	return ptr.Deref(lease.Spec.HolderIdentity, "")
}

func awaitHolder(t *testing.T, lease string, ok func(string) bool, what string) string {
	t.Helper()
	var holder string
	testutil.Eventually(t, 20*time.Second, 100*time.Millisecond, func() error {
		holder = leaseHolder(t, lease)
		if !ok(holder) {
			return fmt.Errorf("Lease default/%s is held by %q, want %s", lease, holder, what)
		}
		return nil
	})
	return holder
}

// TestRunServesProbesAndMetricsAndLogsJSON starts `pitstop run` against a
// real API server and checks what a Deployment's probes and Prometheus see,
// that it takes the leader Lease, that it logs JSON lines, and that SIGTERM
// ends it cleanly and releases the Lease at once.
func TestRunServesProbesAndMetricsAndLogsJSON(t *testing.T) {
	args, metrics, health := runArgs(t, "pitstop-probes")
	p := startPitstop(t, args...)

	awaitOK(t, "http://"+health+"/healthz")
	awaitOK(t, "http://"+health+"/readyz")
	holder := awaitHolder(t, "pitstop-probes", func(h string) bool { return h != "" && h[0] != '<' }, "a holder")
	body := awaitOK(t, "http://"+metrics+"/metrics")
	for _, metric := range []string{`leader_election_master_status{name="pitstop-probes"} 1`, "rest_client_requests_total", "go_goroutines"} {
		if !strings.Contains(body, metric) {
			t.Errorf("/metrics lacks %s", metric)
		}
	}
	if strings.Contains(body, "pitstop_machinehealthcheck_") {
		t.Error("/metrics has the MachineHealthCheck metric without --machine-api")
	}

	if code := p.signal(syscall.SIGTERM, 15*time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0", code)
	}
	if h := leaseHolder(t, "pitstop-probes"); h != "" {
		t.Errorf("Lease still held by %q after a graceful stop (was %q); the next replica would wait a lease duration", h, holder)
	}
	assertJSONLogs(t, p.stderr.String())
}

// TestStandbyReplicaTakesOverOnShutdown runs two replicas: only one holds
// the Lease; when it stops, the other takes over without waiting for the
// Lease to expire. The standby serves the dashboard all along.
func TestStandbyReplicaTakesOverOnShutdown(t *testing.T) {
	argsA, metricsA, _ := runArgs(t, "pitstop-handover")
	a := startPitstop(t, argsA...)
	holderA := awaitHolder(t, "pitstop-handover", func(h string) bool { return h != "" && h[0] != '<' }, "a holder")

	argsB, metricsB, healthB := runArgs(t, "pitstop-handover")
	dashboardB := freeAddr(t)
	b := startPitstop(t, append(argsB, "--dashboard-addr="+dashboardB)...)
	awaitOK(t, "http://"+healthB+"/readyz")
	if body := awaitOK(t, "http://"+dashboardB+"/api/v1/fleet"); !strings.Contains(body, `"profiles"`) {
		t.Errorf("the standby's dashboard answers %s", body)
	}
	// The standby reports itself as not the leader and leaves the Lease alone.
	bodyB := awaitOK(t, "http://"+metricsB+"/metrics")
	if strings.Contains(bodyB, `leader_election_master_status{name="pitstop-handover"} 1`) {
		t.Fatal("both replicas report themselves leader")
	}
	if h := leaseHolder(t, "pitstop-handover"); h != holderA {
		t.Fatalf("Lease moved from %q to %q while the leader was healthy", holderA, h)
	}
	if body := awaitOK(t, "http://"+metricsA+"/metrics"); !strings.Contains(body, `leader_election_master_status{name="pitstop-handover"} 1`) {
		t.Error("the Lease holder does not report itself leader")
	}

	stopped := time.Now()
	if code := a.signal(syscall.SIGTERM, 15*time.Second); code != 0 {
		t.Fatalf("leader exit code %d after SIGTERM, want 0", code)
	}
	holderB := awaitHolder(t, "pitstop-handover", func(h string) bool { return h != "" && h != holderA && h[0] != '<' }, "the standby")
	// Released on shutdown, the Lease is taken within a retry period or two,
	// well before the 4s lease duration would have run out.
	if took := time.Since(stopped); took > 3500*time.Millisecond {
		t.Errorf("standby took over %s after the leader stopped; the Lease was not released", took)
	}
	t.Logf("Lease passed from %s to %s", holderA, holderB)
	if code := b.signal(syscall.SIGTERM, 15*time.Second); code != 0 {
		t.Fatalf("standby exit code %d after SIGTERM, want 0", code)
	}
}

// TestRunWithoutAClusterSaysSo checks the error when no kubeconfig can be
// found and pitstop is not in a pod.
func TestRunWithoutAClusterSaysSo(t *testing.T) {
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "missing"))
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	var stdout, stderr bytes.Buffer
	code := execute([]string{"run", "--metrics-bind-address=0", "--health-probe-bind-address=0"}, &stdout, &stderr)
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	if !strings.Contains(stderr.String(), "no cluster to talk to") {
		t.Errorf("stderr %q does not explain that there is no cluster", stderr.String())
	}
}

// assertJSONLogs checks that every log line is a JSON object with a time,
// a level and a message.
func assertJSONLogs(t *testing.T, logs string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(logs), "\n")
	if len(lines) < 2 {
		t.Fatalf("expected log lines, got %q", logs)
	}
	for _, line := range lines {
		var entry map[string]any
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		for _, key := range []string{"ts", "level", "msg"} {
			if _, ok := entry[key]; !ok {
				t.Errorf("log line lacks %q: %s", key, line)
			}
		}
	}
}
