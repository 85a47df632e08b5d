package esx

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"

	"github.com/pitstop-dev/pitstop/internal/seedconfig"
)

// The maintenance-controller's own esx.yaml example reads unchanged.
const seedConfig = `intervals:
  check:
    jitter: 0.1
    period: 5m
  podDeletion:
    period: 20s
    timeout: 5m
  vmShutdown:
    period: 30s
    timeout: 5m
  podEviction:
    period: 20s
    timeout: 10m
    force: true
alarms:
- Host memory usage
vCenters:
  templateUrl: https://vc-$AZ.example.com
  insecure: false
  credentials:
    a:
      username: user
      password: secret
`

func TestTheSeedsConfigurationReads(t *testing.T) {
	cfg, err := ParseConfig([]byte(seedConfig))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Intervals.Check.Period.Duration != 5*time.Minute || cfg.Intervals.Check.Jitter != 0.1 ||
		cfg.Intervals.VMShutdown.Timeout.Duration != 5*time.Minute || !cfg.Intervals.PodEviction.Force ||
		cfg.Intervals.PodEviction.Timeout.Duration != 10*time.Minute || cfg.Alarms[0] != "Host memory usage" {
		t.Fatalf("read %+v", cfg)
	}
	if got := cfg.URL("b"); got != "https://vc-b.example.com" {
		t.Fatalf("URL(b) = %s", got)
	}
}

func TestDefaultsFillWhatAFileLeavesOut(t *testing.T) {
	cfg, err := ParseConfig([]byte("vCenters:\n  templateUrl: https://vc-$AZ.example.com\n  credentials:\n    a: {username: u, password: p}\n"))
	if err != nil {
		t.Fatal(err)
	}
	iv := cfg.Intervals
	if iv.Check.Period.Duration != DefaultCheckPeriod || iv.VMShutdown.Period.Duration != DefaultShutdownPeriod ||
		iv.VMShutdown.Timeout.Duration != DefaultShutdownTimeout || iv.PodEviction.Period.Duration != seedconfig.DefaultEvictionPeriod ||
		cfg.MaxMaintenance != DefaultMaxMaintenance {
		t.Fatalf("defaults: %+v", iv)
	}
}

func TestABadConfigurationNamesTheField(t *testing.T) {
	for _, tc := range []struct{ name, edit, want string }{
		{"unknown field", "alarm: [x]\n", `unknown field "alarm"`},
		{"bad duration", "intervals:\n  check:\n    period: soon\n", `intervals.check.period (line 3): "soon" is not a duration`},
		{"short period", "intervals:\n  check:\n    period: 10ms\n", "intervals.check.period: must be at least 1s"},
		{"jitter", "intervals:\n  check:\n    period: 1m\n    jitter: 2\n", "intervals.check.jitter: must be from 0 to 1"},
		{"no $AZ", "vCenters:\n  templateUrl: https://vc.example.com\n  credentials: {a: {username: u, password: p}}\n", "vCenters.templateUrl: \"https://vc.example.com\" has no $AZ"},
		{"credentials in URL", "vCenters:\n  templateUrl: https://u:p@vc-$AZ.example.com\n  credentials: {a: {username: u, password: p}}\n", "vCenters.templateUrl: must not hold credentials"},
		{"no password", "vCenters:\n  templateUrl: https://vc-$AZ.example.com\n  credentials: {b: {username: u}}\n", "vCenters.credentials.b: needs both username and password"},
		{"negative budget", "maxMaintenance: -2\n", "maxMaintenance: must be at least 1, got -2"},
		{"no credentials", "vCenters:\n  templateUrl: https://vc-$AZ.example.com\n", "vCenters.credentials: required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := tc.edit
			if !strings.Contains(raw, "vCenters") {
				raw += "vCenters:\n  templateUrl: https://vc-$AZ.example.com\n  credentials: {a: {username: u, password: p}}\n"
			}
			_, err := ParseConfig([]byte(raw))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestAnEditThatDoesNotParseKeepsTheLastGoodFile: the file is read again
// before every check; an edit that does not parse is logged and the last
// good configuration kept, and the next good edit is taken as it is.
func TestAnEditThatDoesNotParseKeepsTheLastGoodFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "esx.yaml")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(seedConfig)
	var logged strings.Builder
	c := &Controller{path: path, log: funcr.New(func(prefix, args string) { logged.WriteString(args + "\n") }, funcr.Options{})}
	if got := c.config(); got.Intervals.Check.Period.Duration != 5*time.Minute {
		t.Fatalf("first read: check period %s, want 5m", got.Intervals.Check.Period.Duration)
	}

	write(strings.Replace(seedConfig, "period: 5m", "period: 100ms", 1))
	if got := c.config(); got == nil || got.Intervals.Check.Period.Duration != 5*time.Minute || got.Alarms[0] != "Host memory usage" {
		t.Fatalf("after a bad edit: %+v, want the last good configuration", got)
	}
	if !strings.Contains(logged.String(), "Keeping the last good ESX configuration") || !strings.Contains(logged.String(), "intervals.check.period") {
		t.Errorf("the bad edit was logged as %q, want the field named", logged.String())
	}

	write(strings.Replace(seedConfig, "period: 5m", "period: 2m", 1))
	if got := c.config(); got.Intervals.Check.Period.Duration != 2*time.Minute {
		t.Fatalf("after a good edit: check period %s, want 2m", got.Intervals.Check.Period.Duration)
	}
}
