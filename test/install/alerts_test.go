package install

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// TestChartAlertsFire renders the chart's PrometheusRule and runs
// Prometheus's own rule tests on it (promtool, from Debian's prometheus
// package): each alert is valid PromQL and fires when its condition has
// held long enough, and not before.
func TestChartAlertsFire(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is missing: `make deps` installs Debian's prometheus package, which has it")
	}
	rule := find(testutil.RenderChart(t, "metrics.prometheusRule.enabled=true"), "PrometheusRule", namespace, "pitstop")
	if rule == nil {
		t.Fatal("no PrometheusRule with metrics.prometheusRule.enabled")
	}
	rules, err := yaml.Marshal(rule.Object["spec"])
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile("testdata/alerts.promtest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts.promtest.yaml"), tests, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(promtool, "test", "rules", "alerts.promtest.yaml")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}
