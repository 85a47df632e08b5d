package kubernikus

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pitstop-dev/pitstop/internal/seedconfig"
)

func TestTheSeedsConfigurationReads(t *testing.T) {
	cfg, err := ParseConfig([]byte("intervals:\n  requeue: 30s\n  podDeletion:\n    period: 20s\n    timeout: 5m\n  podEviction:\n    period: 20s\n    timeout: 10m\n    force: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Intervals.Requeue.Duration != 30*time.Second || !cfg.Intervals.PodEviction.Force || cfg.Intervals.PodEviction.Timeout.Duration != 10*time.Minute {
		t.Fatalf("read %+v", cfg)
	}
}

func TestAMissingFileIsTheDefaults(t *testing.T) {
	cfg, err := LoadConfig(filepath.Join(t.TempDir(), "kubernikus.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Intervals.Requeue.Duration != DefaultRequeue || cfg.Intervals.PodEviction.Period.Duration != seedconfig.DefaultEvictionPeriod || cfg.MaxMaintenance != 1 {
		t.Fatalf("defaults %+v", cfg.Intervals)
	}
}

func TestABadConfigurationNamesTheField(t *testing.T) {
	for raw, want := range map[string]string{
		"intervals:\n  requeue: 10ms\n":                "intervals.requeue: must be at least 1s",
		"intervals:\n  requeue: often\n":               `intervals.requeue (line 2): "often" is not a duration`,
		"cloudProviderSecret:\n  name: cloud-config\n": "cloudProviderSecret: needs name and namespace",
		"interval:\n  requeue: 1m\n":                   `unknown field "interval"`,
		"intervals:\n  podEviction:\n    period: 2h\n": "intervals.podEviction.period: must be from 1s to 1h",
		"maxMaintenance: -1\n":                         "maxMaintenance: must be at least 1, got -1",
	} {
		if _, err := ParseConfig([]byte(raw)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", raw, err, want)
		}
	}
}
