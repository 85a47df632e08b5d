package localcluster

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestDefaultClientLimitsLeaveTheComponentsAtTheirDefaults: the tuned
// cluster raises the controller-manager's and the scheduler's client
// limits and workers; DefaultClientLimits leaves every one of them out.
func TestDefaultClientLimitsLeaveTheComponentsAtTheirDefaults(t *testing.T) {
	tuned := []string{"--kube-api-qps=500", "--kube-api-burst=1000", "--concurrent-deployment-syncs=10", "--concurrent-replicaset-syncs=10"}
	for _, want := range tuned {
		if args := controllerManagerArgs("kc", 1, time.Minute, false); !slices.Contains(args, want) {
			t.Errorf("tuned controller-manager lacks %s: %v", want, args)
		}
	}
	for _, arg := range controllerManagerArgs("kc", 1, time.Minute, true) {
		if slices.Contains(tuned, arg) {
			t.Errorf("controller-manager at its defaults has %s", arg)
		}
	}
	for _, defaults := range []bool{false, true} {
		c := &Cluster{Dir: t.TempDir(), KubeconfigPath: "kc", opts: Options{DefaultClientLimits: defaults}}
		f, err := c.writeComponentConfigs(nil)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(f.schedulerConfig)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(string(raw), "qps: 500"); got == defaults {
			t.Errorf("DefaultClientLimits=%v: scheduler configuration\n%s", defaults, raw)
		}
	}
}
