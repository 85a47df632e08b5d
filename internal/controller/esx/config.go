package esx

import (
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/pitstop-dev/pitstop/internal/cloud/vsphere"
	"github.com/pitstop-dev/pitstop/internal/seedconfig"
)

// Config is the ESX integration's file, in the maintenance-controller's
// esx.yaml format, so that file works unchanged. It is read again before
// every check: an edit needs no restart, and an edit that does not parse
// keeps the last good one.
type Config struct {
	Intervals Intervals `json:"intervals"`
	// Alarms are vCenter alarm names: a host with one of them triggered is
	// labelled cloud.sap/esx-in-maintenance=alarm and its nodes are
	// drained as for a maintenance, each pod with its own grace period.
	Alarms   []string `json:"alarms,omitempty"`
	VCenters VCenters `json:"vCenters"`
	// MaxMaintenance is how many nodes the integration takes down at once,
	// from the start of a node's drain until its host is back and the node
	// restored (pitstop's own field); default DefaultMaxMaintenance.
	MaxMaintenance int `json:"maxMaintenance,omitempty"`
}

// Intervals time the checks and the actions.
type Intervals struct {
	// Check is how often the hosts are read.
	Check Period `json:"check"`
	// PodDeletion is accepted for compatibility: pitstop's drain waits for
	// deleted pods to be gone itself.
	PodDeletion seedconfig.Timed `json:"podDeletion"`
	// VMShutdown is how often a guest shutdown is looked at, and how long
	// it may take before the VM is powered off.
	VMShutdown seedconfig.Timed `json:"vmShutdown"`
	// PodEviction tunes the drain: how often a refused eviction is asked
	// again, how long the drain may take, and whether the pods left then
	// are deleted (force) or the drain fails.
	PodEviction seedconfig.Eviction `json:"podEviction"`
}

// Period is a period with a jitter factor (0.1: up to 10% longer).
type Period struct {
	Jitter float64             `json:"jitter,omitempty"`
	Period seedconfig.Duration `json:"period"`
}

// VCenters says how to reach the vCenter of each availability zone.
type VCenters struct {
	// TemplateURL is the vCenter's URL with $AZ standing for the zone's
	// letter, e.g. https://vc-$AZ.example.com.
	TemplateURL string `json:"templateUrl"`
	// Insecure skips the check of the vCenter's certificate.
	Insecure bool `json:"insecure,omitempty"`
	// Credentials are the user and password per availability zone.
	Credentials map[string]vsphere.Credentials `json:"credentials"`
}

// Defaults of the fields a file leaves out: the maintenance-controller's
// own examples.
const (
	DefaultCheckPeriod     = 5 * time.Minute
	DefaultShutdownPeriod  = 30 * time.Second
	DefaultShutdownTimeout = 5 * time.Minute
	// DefaultMaxMaintenance is pitstop's own: one node at a time.
	DefaultMaxMaintenance = 1
)

// LoadConfig reads and checks the file at path.
func LoadConfig(path string) (*Config, error) {
	return seedconfig.Load(path, "the ESX configuration", false, ParseConfig)
}

// ParseConfig reads a configuration, fills in the defaults and checks it;
// an error names the field.
func ParseConfig(raw []byte) (*Config, error) {
	var cfg Config
	if err := seedconfig.Unmarshal(raw, &cfg); err != nil {
		return nil, err
	}
	iv := &cfg.Intervals
	def := func(d *seedconfig.Duration, v time.Duration) {
		if d.Duration == 0 {
			d.Duration = v
		}
	}
	def(&iv.Check.Period, DefaultCheckPeriod)
	def(&iv.VMShutdown.Period, DefaultShutdownPeriod)
	def(&iv.VMShutdown.Timeout, DefaultShutdownTimeout)
	if cfg.MaxMaintenance == 0 {
		cfg.MaxMaintenance = DefaultMaxMaintenance
	}
	var errs []error
	if cfg.MaxMaintenance < 0 {
		errs = append(errs, fmt.Errorf("maxMaintenance: must be at least 1, got %d", cfg.MaxMaintenance))
	}
	positive := func(field string, d seedconfig.Duration) {
		if d.Duration < 0 {
			errs = append(errs, fmt.Errorf("%s: must not be negative, got %s", field, d.Duration))
		}
	}
	positive("intervals.check.period", iv.Check.Period)
	positive("intervals.vmShutdown.period", iv.VMShutdown.Period)
	positive("intervals.vmShutdown.timeout", iv.VMShutdown.Timeout)
	if iv.Check.Period.Duration < time.Second {
		errs = append(errs, fmt.Errorf("intervals.check.period: must be at least 1s, got %s", iv.Check.Period.Duration))
	}
	if iv.Check.Jitter < 0 || iv.Check.Jitter > 1 {
		errs = append(errs, fmt.Errorf("intervals.check.jitter: must be from 0 to 1, got %g", iv.Check.Jitter))
	}
	errs = append(errs, iv.PodEviction.Check("intervals.podEviction")...)
	vc := cfg.VCenters
	switch {
	case vc.TemplateURL == "":
		errs = append(errs, errors.New("vCenters.templateUrl: required"))
	case !strings.Contains(vc.TemplateURL, "$AZ"):
		errs = append(errs, fmt.Errorf("vCenters.templateUrl: %q has no $AZ, which stands for the availability zone", vc.TemplateURL))
	default:
		if u, err := url.Parse(strings.ReplaceAll(vc.TemplateURL, "$AZ", "a")); err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
			errs = append(errs, fmt.Errorf("vCenters.templateUrl: %q is not an http(s) URL", vc.TemplateURL))
		} else if u.User != nil {
			errs = append(errs, errors.New("vCenters.templateUrl: must not hold credentials; put them in vCenters.credentials"))
		}
	}
	if len(vc.Credentials) == 0 {
		errs = append(errs, errors.New("vCenters.credentials: required, one entry per availability zone"))
	}
	zones := make([]string, 0, len(vc.Credentials))
	for az := range vc.Credentials {
		zones = append(zones, az)
	}
	sort.Strings(zones)
	for _, az := range zones {
		c := vc.Credentials[az]
		if c.Username == "" || c.Password == "" {
			errs = append(errs, fmt.Errorf("vCenters.credentials.%s: needs both username and password", az))
		}
	}
	return &cfg, errors.Join(errs...)
}

// URL is the vCenter of availability zone az.
func (c *Config) URL(az string) string {
	return strings.ReplaceAll(c.VCenters.TemplateURL, "$AZ", az)
}
