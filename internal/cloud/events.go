// Package cloud is the contract between pitstop and the clouds its
// machines run in, in pitstop's own types: the instance behind a Machine
// or a Node, the maintenance events a cloud schedules for it, and a
// reboot. Each cloud's client lives once, in a package of its own beside
// this one (aws, openstack, vsphere, clusterapi); the controllers see a
// cloud only through this contract or through the Machine API's provider
// contract (internal/machineapi/provider).
package cloud

import (
	"context"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
)

// Events is a cloud that schedules maintenance events for its instances:
// which instance backs a Machine or a Node, the instances' events, and a
// reboot.
type Events interface {
	// Name is the provider's name in MachineMaintenance spec.provider.
	Name() string
	// MachineTarget and NodeTarget name the instance behind a Machine or
	// a Node; false when it has none of this provider's.
	MachineTarget(m *machinev1beta1.Machine) (Target, bool)
	NodeTarget(node *corev1.Node) (Target, bool)
	// NodeNames reads the provider's own record of each target's instance:
	// the name its Node registers under ("" when the provider knows none).
	// A node's spec.providerID is the kubelet's word; this is the
	// provider's, and a node is taken to run on an instance without a
	// Machine only when the two agree. Targets whose record could not be
	// read are in the second map.
	NodeNames(ctx context.Context, targets []Target) (map[string]string, map[string]error)
	// Poll reads the scheduled events of the targets.
	Poll(ctx context.Context, targets []Target) PollResult
	// Reboot reboots a target's instance.
	Reboot(ctx context.Context, t Target) error
}

// Target is an instance whose scheduled events pitstop follows: one that
// backs a Machine (its region and credentials are the Machine's, as its
// provider uses them) or a Node without one (the region of its zone, the
// default credentials).
type Target struct {
	InstanceID string
	// Region is the instance's region; empty: the provider's default.
	Region string
	// Namespace and CredentialsSecret name the Secret holding the keys
	// (the Machine's providerSpec credentialsSecret); empty: the cloud
	// client's default credentials.
	Namespace, CredentialsSecret string
}

// EventState is where the cloud says a scheduled event stands.
type EventState string

const (
	EventScheduled EventState = "Scheduled"
	// EventCompleted and EventCanceled: the cloud still lists the event
	// for a while after it is over.
	EventCompleted EventState = "Completed"
	EventCanceled  EventState = "Canceled"
)

// ScheduledEvent is an event the cloud has scheduled for an instance.
type ScheduledEvent struct {
	InstanceID, ID, Code, Description string
	State                             EventState
	// NotBefore is the earliest the event starts, NotAfter the latest it
	// ends (zero when the cloud does not say); NotBeforeDeadline the
	// latest NotBefore may be moved to, where the event can be
	// rescheduled.
	NotBefore, NotAfter, NotBeforeDeadline time.Time
}

// PollResult is what one poll of the cloud found.
type PollResult struct {
	// Events are the scheduled events of the targets that could be read.
	Events []ScheduledEvent
	// Failed are the targets whose events could not be read, by instance
	// ID, with the error: they must not look free of events.
	Failed map[string]error
	// Calls is how many API calls the poll made.
	Calls int
}
