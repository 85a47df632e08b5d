package kubernikus

import (
	"errors"
	"fmt"
	"time"

	"github.com/pitstop-dev/pitstop/internal/seedconfig"
)

// Config is the Kubernikus integration's file, in the
// maintenance-controller's kubernikus.yaml format, read before every
// reconcile. A missing file means the defaults.
type Config struct {
	Intervals Intervals `json:"intervals"`
	// CloudProviderSecret, when set, is the Secret whose key
	// cloudprovider.conf holds the OpenStack account (pitstop must be
	// allowed to get it); unset, the file --openstack-cloud-config is read.
	CloudProviderSecret *SecretRef `json:"cloudProviderSecret,omitempty"`
	// Cluster, when set, is the Kubernikus cluster's name: a server is
	// deleted only if its metadata kubernikus:kluster names it (pitstop's
	// own; the maintenance-controller has no such field).
	Cluster string `json:"cluster,omitempty"`
	// MaxMaintenance is how many nodes the integration may have in hand at
	// once, from the start of a node's drain until the node is gone or
	// given back (pitstop's own field); default DefaultMaxMaintenance.
	MaxMaintenance int `json:"maxMaintenance,omitempty"`
}

// Intervals time the integration.
type Intervals struct {
	// Requeue is how often each node is looked at again (the API server's
	// version may change).
	Requeue seedconfig.Duration `json:"requeue"`
	// PodDeletion is accepted for compatibility: the drain waits for
	// deleted pods to be gone itself.
	PodDeletion seedconfig.Timed `json:"podDeletion"`
	// PodEviction tunes the drain, as in esx.yaml.
	PodEviction seedconfig.Eviction `json:"podEviction"`
}

// SecretRef names a Secret.
type SecretRef struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
}

// DefaultRequeue is intervals.requeue when a file leaves it out.
const DefaultRequeue = 30 * time.Second

// DefaultMaxMaintenance is maxMaintenance when a file leaves it out: one
// node at a time.
const DefaultMaxMaintenance = 1

// LoadConfig reads and checks the file at path; a missing file gives the
// defaults.
func LoadConfig(path string) (*Config, error) {
	return seedconfig.Load(path, "the Kubernikus configuration", true, ParseConfig)
}

// ParseConfig reads a configuration, fills in the defaults and checks it;
// an error names the field.
func ParseConfig(raw []byte) (*Config, error) {
	var cfg Config
	if err := seedconfig.Unmarshal(raw, &cfg); err != nil {
		return nil, err
	}
	iv := &cfg.Intervals
	if iv.Requeue.Duration == 0 {
		iv.Requeue.Duration = DefaultRequeue
	}
	if cfg.MaxMaintenance == 0 {
		cfg.MaxMaintenance = DefaultMaxMaintenance
	}
	var errs []error
	if cfg.MaxMaintenance < 0 {
		errs = append(errs, fmt.Errorf("maxMaintenance: must be at least 1, got %d", cfg.MaxMaintenance))
	}
	if iv.Requeue.Duration < time.Second {
		errs = append(errs, fmt.Errorf("intervals.requeue: must be at least 1s, got %s", iv.Requeue.Duration))
	}
	errs = append(errs, iv.PodEviction.Check("intervals.podEviction")...)
	if s := cfg.CloudProviderSecret; s != nil && (s.Name == "" || s.Namespace == "") {
		errs = append(errs, errors.New("cloudProviderSecret: needs name and namespace"))
	}
	return &cfg, errors.Join(errs...)
}
