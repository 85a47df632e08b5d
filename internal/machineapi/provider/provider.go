// Package provider is the seam between the Machine controller and the
// infrastructure that runs machines: a Provider creates, describes and
// deletes the instance behind a Machine. Which provider serves a Machine
// is decided by the kind of its providerSpec (AWSMachineProviderConfig,
// KwokMachineProviderConfig, ...), so one manager can serve several.
package provider

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// Provider runs the instances behind Machines. Every method must be safe
// to call again after a crash at any point: Create for a machine whose
// instance already exists returns that instance instead of a second one.
type Provider interface {
	// Kind is the providerSpec kind this provider serves.
	Kind() string
	// Create starts the machine's instance, or returns it if it exists.
	// An error wrapping ErrInvalidConfig is final: the Machine fails.
	Create(ctx context.Context, m *machinev1beta1.Machine) (*Instance, error)
	// Describe returns the machine's instance; ErrNotFound when there is
	// none (never created, or gone after Delete).
	Describe(ctx context.Context, m *machinev1beta1.Machine) (*Instance, error)
	// Delete asks for the instance to go away. The instance may take time
	// to disappear; the caller polls Describe until ErrNotFound.
	Delete(ctx context.Context, m *machinev1beta1.Machine) error
}

// Instance is what a provider says about a machine's instance.
type Instance struct {
	// ID is the provider's name for the instance (an EC2 instance ID).
	ID string
	// ProviderID is what the instance's Node carries in spec.providerID
	// (aws:///us-east-1a/i-0123, kwok://node-name).
	ProviderID string
	// State is the provider's word for the instance's state (pending,
	// running, shutting-down, ...), shown in the
	// machine.openshift.io/instance-state annotation.
	State string
	// Running is true once the instance runs (its node may still be
	// joining); false while it starts or stops.
	Running bool
	// Addresses are the instance's addresses, for status.addresses and for
	// linking the Node by internal IP.
	Addresses []corev1.NodeAddress
	// Region, Zone and InstanceType become the Machine's
	// machine.openshift.io/{region,zone,instance-type} labels.
	Region, Zone, InstanceType string
	// Status is the provider-specific status, stored in
	// status.providerStatus as JSON (nil leaves it unchanged).
	Status any
	// PollAfter is when to look again while the instance starts or stops
	// (zero: the provider's default).
	PollAfter time.Duration
}

// ErrNotFound says that a machine has no instance.
var ErrNotFound = errors.New("instance not found")

// ErrInvalidConfig marks errors that retrying cannot fix: a providerSpec
// that cannot be decoded, a required field missing.
var ErrInvalidConfig = errors.New("invalid provider configuration")

// InvalidConfig returns an error wrapping ErrInvalidConfig, naming the
// providerSpec field and the problem.
func InvalidConfig(field, format string, args ...any) error {
	return fmt.Errorf("%w: spec.providerSpec.value.%s: %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...))
}

// Registry picks the provider for a Machine by its providerSpec's kind.
type Registry map[string]Provider

// NewRegistry returns a registry of the providers, keyed by their kinds.
func NewRegistry(providers ...Provider) Registry {
	r := Registry{}
	for _, p := range providers {
		r[p.Kind()] = p
	}
	return r
}

// For returns the provider serving the machine. The error names the kind
// and the kinds that are served; it wraps ErrInvalidConfig when the
// providerSpec has no kind at all.
func (r Registry) For(m *machinev1beta1.Machine) (Provider, error) {
	kind, err := SpecKind(m)
	if err != nil {
		return nil, err
	}
	if p, ok := r[kind]; ok {
		return p, nil
	}
	return nil, &NotServedError{Kind: kind, Served: r.Kinds()}
}

// Kinds lists the kinds served, sorted.
func (r Registry) Kinds() []string {
	kinds := make([]string, 0, len(r))
	for k := range r {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	return kinds
}

// NotServedError says that no provider of this manager serves a Machine's
// providerSpec kind: the manager's configuration, not the Machine, must
// change, so the Machine does not fail.
type NotServedError struct {
	Kind   string
	Served []string
}

func (e *NotServedError) Error() string {
	served := "none (see --machine-providers)"
	if len(e.Served) > 0 {
		served = strings.Join(e.Served, ", ")
	}
	return fmt.Sprintf("spec.providerSpec.value.kind: no provider serves %q; this manager serves %s", e.Kind, served)
}

// SpecKind returns the kind of the machine's providerSpec.
func SpecKind(m *machinev1beta1.Machine) (string, error) {
	v := m.Spec.ProviderSpec.Value
	if v == nil || len(v.Raw) == 0 && v.Object == nil {
		return "", fmt.Errorf("%w: spec.providerSpec.value is empty", ErrInvalidConfig)
	}
	if v.Object != nil {
		if kind := v.Object.GetObjectKind().GroupVersionKind().Kind; kind != "" {
			return kind, nil
		}
	}
	var meta struct {
		Kind string `json:"kind"`
	}
	if err := yaml.Unmarshal(v.Raw, &meta); err != nil {
		return "", fmt.Errorf("%w: spec.providerSpec.value: %v", ErrInvalidConfig, err)
	}
	if meta.Kind == "" {
		return "", fmt.Errorf("%w: spec.providerSpec.value.kind is missing", ErrInvalidConfig)
	}
	return meta.Kind, nil
}

// DecodeSpec decodes the machine's providerSpec into out. Strict refuses
// fields out does not have, so that a typo is an error naming the field
// instead of a setting silently ignored; a provider whose spec type is
// defined elsewhere and gains fields over time (AWSMachineProviderConfig)
// decodes leniently, so that a newer cluster's Machines do not fail.
func DecodeSpec(m *machinev1beta1.Machine, out any, strict bool) error {
	v := m.Spec.ProviderSpec.Value
	if v == nil || len(v.Raw) == 0 {
		return fmt.Errorf("%w: spec.providerSpec.value is empty", ErrInvalidConfig)
	}
	unmarshal := func(data []byte, out any) error { return yaml.Unmarshal(data, out) }
	if strict {
		unmarshal = func(data []byte, out any) error { return yaml.UnmarshalStrict(data, out) }
	}
	if err := unmarshal(v.Raw, out); err != nil {
		return fmt.Errorf("%w: spec.providerSpec.value: %v", ErrInvalidConfig, err)
	}
	return nil
}

// DecodeStatus decodes the machine's providerStatus into out; an empty
// status leaves out as it is.
func DecodeStatus(m *machinev1beta1.Machine, out any) error {
	v := m.Status.ProviderStatus
	if v == nil || len(v.Raw) == 0 {
		return nil
	}
	if err := yaml.Unmarshal(v.Raw, out); err != nil {
		return fmt.Errorf("status.providerStatus: %w", err)
	}
	return nil
}
