//go:build e2e && linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// TestMachinesDemo runs the demo's Machine API part: a MachineSet scaled
// to 3 on the kwok provider, then a MachineHealthCheck replacing the
// machine whose node stopped its heartbeat; kubectl sees the machines.
// Beside it, the cloud events demo: an aws MachineSet of 5 on the local
// EC2 endpoint, its scheduled events handled in the window.
func TestMachinesDemo(t *testing.T) {
	p := startPitstop(t, "dev", "--nodes=2", "--control-plane-nodes=1", "--rolling=false", "--node-monitor-grace-period=10s", "--log-file=-",
		"--metrics-bind-address=0", "--health-probe-bind-address=0", "--dashboard-addr=0", fmt.Sprintf("--webhook-port=%d", testutil.FreePort(t)))
	line, _ := p.awaitLine("export KUBECONFIG=", 3*time.Minute)
	environ, _ := devEnv(t, line)
	running, _ := p.awaitLine("Machines: 3 Running", time.Minute)
	replaced, _ := p.awaitLine("Machines: the MachineHealthCheck replaced machine", 2*time.Minute)
	first := strings.Fields(running[strings.Index(running, "node: ")+len("node: "):])
	sick := strings.TrimSuffix(first[0], ",")
	if !strings.Contains(replaced, "replaced machine "+sick+" ") {
		t.Errorf("replaced %q, want the machine whose heartbeat stopped, %s", replaced, sick)
	}
	machines := kubectl(t, environ, "get", "machines.machine.openshift.io", "-n", "machines", "--no-headers")
	if strings.Contains(machines, sick+" ") || strings.Count(strings.TrimSpace(machines), "\n") != 2 {
		t.Errorf("kubectl get machines after the replacement:\n%s", machines)
	}
	// The cloud events part: retirements and a reboot EC2 schedules on
	// the aws MachineSet, Planned while the window is shut, then handled.
	p.awaitLineAnywhere("Cloud events: 4 MachineMaintenances Planned", 2*time.Minute)
	done := p.awaitLineAnywhere("Cloud events: all 4 Completed", 3*time.Minute)
	if !strings.Contains(done, "5 of 5") {
		t.Errorf("capacity during the replacements: %q", done)
	}
	mms := kubectl(t, environ, "get", "machinemaintenances", "-n", "openshift-machine-api")
	if strings.Count(mms, "Completed") != 4 || !strings.Contains(mms, "instance-retirement") || !strings.Contains(mms, "START BY") {
		t.Errorf("kubectl get machinemaintenances:\n%s", mms)
	}
	if code := p.signal(syscall.SIGINT, 30*time.Second); code != 0 {
		t.Errorf("exit code %d after Ctrl-C", code)
	}
}

// TestRollingDemo runs the demo's rolling reboot: every worker goes through
// maintenance (drained, "rebooted", restored), never more than 2 at once,
// and the terminal shows the progress.
func TestRollingDemo(t *testing.T) {
	p := startPitstop(t, "dev", "--nodes=8", "--control-plane-nodes=2", "--machines=false", "--log-file=-", "--metrics-bind-address=0", "--health-probe-bind-address=0", "--dashboard-addr=0", fmt.Sprintf("--webhook-port=%d", testutil.FreePort(t)))
	line, _ := p.awaitLine("export KUBECONFIG=", 3*time.Minute)
	environ, dir := devEnv(t, line)
	p.awaitLine("Applied MaintenanceProfile rolling-reboot", time.Minute)
	last := ""
	inMaintenance := regexp.MustCompile(`in-maintenance (\d+) \[`)
	deadline := time.After(3 * time.Minute)
	most := 0
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				t.Fatal("pitstop dev exited during the rolling demo")
			}
			m := inMaintenance.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			last = line
			n, _ := strconv.Atoi(m[1])
			most = max(most, n)
			if n > 2 {
				t.Errorf("%d workers in maintenance at once, the profile allows 2: %s", n, line)
			}
			if strings.Contains(line, "rebooted 6 of 6") {
				if most < 1 {
					t.Error("no progress line showed a node in maintenance")
				}
				if code := p.signal(syscall.SIGINT, 30*time.Second); code != 0 {
					t.Errorf("exit code %d after Ctrl-C", code)
				}
				return
			}
		case <-deadline:
			// CI shows the end of the output: the long lists first, the
			// summary last.
			t.Logf("events:\n%s", kubectl(t, environ, "get", "events", "-A", "--sort-by=.lastTimestamp"))
			t.Logf("pods:\n%s", kubectl(t, environ, "get", "pods", "-n", "demo", "-o", "wide"))
			for _, component := range []string{"kwok", "kube-controller-manager"} {
				log, _ := os.ReadFile(filepath.Join(dir, "logs", component+".log"))
				lines := strings.Split(strings.TrimSpace(string(log)), "\n")
				t.Logf("last lines of %s.log:\n%s", component, strings.Join(lines[max(0, len(lines)-30):], "\n"))
			}
			t.Logf("nodes:\n%s", kubectl(t, environ, "get", "nodes", "-L", "pitstop.dev/state"))
			t.Logf("NodeMaintenances:\n%s", kubectl(t, environ, "get", "nm", "-o", `custom-columns=NAME:.metadata.name,PHASE:.status.phase,DRAINED:.status.conditions[?(@.type=="Drained")].message`))
			t.Logf("last progress: %s", last)
			t.Fatalf("the rolling reboot did not finish in 3 minutes (most in maintenance at once: %d)", most)
		}
	}
}
