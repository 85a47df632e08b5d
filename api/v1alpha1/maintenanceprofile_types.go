package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MaintenanceState is one of the three states a node has in each profile.
// +kubebuilder:validation:Enum=operational;maintenance-required;in-maintenance
type MaintenanceState string

const (
	// StateOperational: the node serves normally.
	StateOperational MaintenanceState = "operational"
	// StateMaintenanceRequired: the node needs maintenance and waits until
	// it may have it.
	StateMaintenanceRequired MaintenanceState = "maintenance-required"
	// StateInMaintenance: the node is being maintained. At most one profile
	// holds a node in this state at a time.
	StateInMaintenance MaintenanceState = "in-maintenance"
)

// CheckInstance is a named check: exactly one of its plugin fields is set.
// +kubebuilder:validation:XValidation:rule="[has(self.hasLabel), has(self.hasAnnotation), has(self.anyLabel), has(self.condition), has(self.maxMaintenance), has(self.stagger), has(self.timeWindow), has(self.wait), has(self.waitExclude), has(self.clusterSemver), has(self.affinity), has(self.nodeCount), has(self.prometheusInstant), has(self.freeze), has(self.deadline), has(self.kubernikusCount), has(self.checkHypervisor), has(self.hypervisorCondition)].filter(x, x).size() == 1",message="exactly one plugin must be set"
type CheckInstance struct {
	// Name is how transitions refer to the check: letters, digits and _.
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_]*$`
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// HasLabel passes when the node has the label (with the value, if set).
	// +optional
	HasLabel *KeyValueCheck `json:"hasLabel,omitempty"`
	// HasAnnotation passes when the node has the annotation (with the value,
	// if set).
	// +optional
	HasAnnotation *KeyValueCheck `json:"hasAnnotation,omitempty"`
	// AnyLabel passes when any node in the cluster has the label.
	// +optional
	AnyLabel *KeyValueCheck `json:"anyLabel,omitempty"`
	// Condition passes when the node's condition has the status.
	// +optional
	Condition *ConditionCheck `json:"condition,omitempty"`
	// MaxMaintenance passes while fewer than max nodes are in maintenance.
	// +optional
	MaxMaintenance *MaxMaintenanceCheck `json:"maxMaintenance,omitempty"`
	// Stagger lets at most parallel nodes through per duration.
	// +optional
	Stagger *StaggerCheck `json:"stagger,omitempty"`
	// TimeWindow passes inside a weekly time window.
	// +optional
	TimeWindow *TimeWindowCheck `json:"timeWindow,omitempty"`
	// Wait passes once the node has been in its state for the duration.
	// +optional
	Wait *WaitCheck `json:"wait,omitempty"`
	// WaitExclude is Wait, with time not passing on the excluded weekdays.
	// +optional
	WaitExclude *WaitExcludeCheck `json:"waitExclude,omitempty"`
	// ClusterSemver passes when the node's version label is lower than the
	// highest in the cluster (or profile).
	// +optional
	ClusterSemver *ClusterSemverCheck `json:"clusterSemver,omitempty"`
	// Affinity prefers nodes whose pods do not prefer operational nodes.
	// +optional
	Affinity *AffinityCheck `json:"affinity,omitempty"`
	// NodeCount passes when the cluster has at least count nodes.
	// +optional
	NodeCount *NodeCountCheck `json:"nodeCount,omitempty"`
	// PrometheusInstant compares a PromQL query's value with a threshold.
	// +optional
	PrometheusInstant *PrometheusInstantCheck `json:"prometheusInstant,omitempty"`
	// Freeze fails while any freeze period is active.
	// +optional
	Freeze *FreezeCheck `json:"freeze,omitempty"`
	// Deadline passes when the node's scheduled cloud event is near: it
	// starts within the duration, or (without one) its latest safe start
	// has come.
	// +optional
	Deadline *DeadlineCheck `json:"deadline,omitempty"`
	// KubernikusCount passes while the cluster has at least as many nodes
	// as its Kubernikus node pools should have.
	// +optional
	KubernikusCount *KubernikusCountCheck `json:"kubernikusCount,omitempty"`
	// CheckHypervisor passes when the node's KVM Hypervisor
	// (kvm.cloud.sap/v1, named like the node) has each status field given
	// at its value.
	// +optional
	CheckHypervisor *CheckHypervisorCheck `json:"checkHypervisor,omitempty"`
	// HypervisorCondition passes when the node's KVM Hypervisor has the
	// condition with the status.
	// +optional
	HypervisorCondition *ConditionCheck `json:"hypervisorCondition,omitempty"`
}

// DeadlineCheck passes when the node's earliest scheduled cloud event (see
// MachineMaintenance) starts within Within, or, when Within is unset, once
// the event's latest safe start has come. A node without an event fails it.
type DeadlineCheck struct {
	// Within is a Go duration ("6h"). Unset: pass at the latest safe start
	// pitstop computed (the event's start minus the time the action takes
	// on this cluster, minus a margin).
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') || duration(self) >= duration('1s')",message="must be at least 1s"
	// +optional
	Within *Duration `json:"within,omitempty"`
}

// KeyValueCheck names a label or annotation and optionally its value.
type KeyValueCheck struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	Key string `json:"key"`
	// Value, when set, must match too.
	// +optional
	Value *string `json:"value,omitempty"`
}

// ConditionCheck names a node condition and the status it must have.
type ConditionCheck struct {
	// +kubebuilder:validation:MinLength=1
	Type string `json:"type"`
	// +kubebuilder:validation:Enum=True;False;Unknown
	Status string `json:"status"`
}

// MaxMaintenanceCheck bounds how many nodes are in maintenance at once.
// Entry into in-maintenance takes a slot Lease, so the bound holds with
// concurrent reconciles and several replicas.
// +kubebuilder:validation:XValidation:rule="!has(self.profile) || (has(self.profileScoped) && self.profileScoped)",message="profile counts one profile's nodes: set profileScoped too"
type MaxMaintenanceCheck struct {
	// Max is how many nodes may be in maintenance at once (per group).
	// +kubebuilder:validation:Minimum=1
	Max int32 `json:"max"`
	// ProfileScoped counts only this profile's nodes; otherwise every
	// node in maintenance counts.
	// +optional
	ProfileScoped bool `json:"profileScoped,omitempty"`
	// Profile, with ProfileScoped, counts the nodes of that profile
	// instead of this one's (their maintenance for it, and its budget's
	// slots): this profile's nodes go in while fewer than Max of that
	// profile's are in maintenance.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Profile string `json:"profile,omitempty"`
	// GroupBy is a node label (for example topology.kubernetes.io/zone):
	// the bound applies per value of it.
	// +optional
	GroupBy string `json:"groupBy,omitempty"`
	// GroupByLabels are more node labels, after GroupBy: the bound applies
	// per combination of their values (per zone and rack, say).
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MinLength=1
	// +listType=atomic
	// +optional
	GroupByLabels []string `json:"groupByLabels,omitempty"`
	// SkipAfter leaves out of the count a node that has been in
	// maintenance for longer (since it entered in-maintenance), as the
	// maintenance-controller's option: a node stuck in maintenance stops
	// holding the others back, and its slot may be taken by the next node,
	// so the nodes in maintenance may then be more than Max. At least 1s.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') || duration(self) >= duration('1s')",message="must be at least 1s"
	// +optional
	SkipAfter *Duration `json:"skipAfter,omitempty"`
}

// StaggerCheck spaces maintenances out in time.
type StaggerCheck struct {
	// Duration each slot stays taken after a node enters maintenance, at
	// least 1s.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') || duration(self) >= duration('1s')",message="must be at least 1s"
	Duration Duration `json:"duration"`
	// Parallel is how many slots there are.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +optional
	Parallel int32 `json:"parallel,omitempty"`
	// Group shares the slots with every stagger check, of any profile,
	// that names the same group: their nodes' entries are spaced out
	// together (as the maintenance-controller's stagger checks that name
	// one Lease are). Without it the slots are this check's own.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	Group string `json:"group,omitempty"`
}

// TimeWindowCheck is a weekly window in a time zone. A window whose end is
// before its start crosses midnight.
type TimeWindowCheck struct {
	// Start is "hh:mm".
	// +kubebuilder:validation:Pattern=`^([01][0-9]|2[0-3]):[0-5][0-9]$`
	Start string `json:"start"`
	// End is "hh:mm"; before Start means the window ends the next day.
	// +kubebuilder:validation:Pattern=`^([01][0-9]|2[0-3]):[0-5][0-9]$`
	End string `json:"end"`
	// Weekdays the window opens on (the day it starts); empty means every
	// day.
	// +kubebuilder:validation:MaxItems=7
	// +optional
	Weekdays []Weekday `json:"weekdays,omitempty"`
	// Exclude lists dates ("Dec 24" or "2026-12-24") the window stays shut.
	// +kubebuilder:validation:MaxItems=366
	// +optional
	Exclude []string `json:"exclude,omitempty"`
	// TimeZone is an IANA time zone name; UTC when empty.
	// +optional
	TimeZone string `json:"timeZone,omitempty"`
}

// Weekday is a day of the week, by its three-letter name.
// +kubebuilder:validation:Enum=Mon;Tue;Wed;Thu;Fri;Sat;Sun
type Weekday string

// WaitCheck passes once the node has been in its state for Duration.
type WaitCheck struct {
	// Duration is a Go duration ("20m", "1h30m").
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') || duration(self) >= duration('0s')",message="must be at least 0s"
	Duration Duration `json:"duration"`
}

// WaitExcludeCheck is WaitCheck with time not counted on Exclude days.
type WaitExcludeCheck struct {
	// Duration is a Go duration ("20m", "1h30m").
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') || duration(self) >= duration('0s')",message="must be at least 0s"
	Duration Duration `json:"duration"`
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=6
	Exclude []Weekday `json:"exclude"`
	// TimeZone the weekdays are counted in; UTC when empty.
	// +optional
	TimeZone string `json:"timeZone,omitempty"`
}

// ClusterSemverCheck compares the node's semantic-version label with the
// other nodes'.
type ClusterSemverCheck struct {
	// Key is the label holding a semantic version.
	// +kubebuilder:validation:MinLength=1
	Key string `json:"key"`
	// ProfileScoped compares only with this profile's nodes.
	// +optional
	ProfileScoped bool `json:"profileScoped,omitempty"`
}

// AffinityCheck passes for nodes none of whose pods prefer operational
// nodes, so those go first.
type AffinityCheck struct {
	// MinOperational makes the check pass, whatever the pods, while at
	// least this many nodes of the profile are operational (as the
	// maintenance-controller's affinity check does); 0 always orders.
	// +optional
	MinOperational int32 `json:"minOperational,omitempty"`
}

// NodeCountCheck passes when the cluster has at least Count nodes.
type NodeCountCheck struct {
	// +kubebuilder:validation:Minimum=0
	Count int32 `json:"count"`
}

// PrometheusInstantCheck is a health gate: a PromQL instant query whose one
// value is compared with a threshold, or judged by an expression.
// +kubebuilder:validation:XValidation:rule="!(has(self.bearerToken) && has(self.basicAuth))",message="set at most one of bearerToken and basicAuth"
// +kubebuilder:validation:XValidation:rule="has(self.expr) ? !has(self.operator) && !has(self.threshold) : has(self.operator) && has(self.threshold)",message="set either expr, or operator and threshold"
type PrometheusInstantCheck struct {
	// URL of the Prometheus server (its HTTP API root).
	// +kubebuilder:validation:Pattern=`^https?://`
	URL string `json:"url"`
	// Query is PromQL; it must return exactly one sample.
	// +kubebuilder:validation:MinLength=1
	Query string `json:"query"`
	// Operator compares the value with Threshold.
	// +kubebuilder:validation:Enum="<";"<=";"==";"!=";">=";">"
	// +optional
	Operator string `json:"operator,omitempty"`
	// Threshold is the number the value is compared with.
	// +optional
	Threshold string `json:"threshold,omitempty"`
	// Expr, instead of Operator and Threshold, is a CEL expression over
	// value (the query's sample, a double) that passes when true, for what
	// one comparison cannot say: "value >= 1 && value < 5". Every number
	// in it is a double (1 is 1.0), as in the maintenance-controller's.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Expr string `json:"expr,omitempty"`
	// BearerToken is the Secret key holding a token sent with each query
	// as "Authorization: Bearer <token>". At most one of BearerToken and
	// BasicAuth is set.
	// +optional
	BearerToken *SecretKeyRef `json:"bearerToken,omitempty"`
	// BasicAuth sends a username and a password with each query (HTTP
	// basic authentication).
	// +optional
	BasicAuth *BasicAuth `json:"basicAuth,omitempty"`
}

// BasicAuth is an HTTP basic authentication login.
type BasicAuth struct {
	// Username cannot hold a colon: basic authentication joins it to the
	// password with one (RFC 7617).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[^:]+$`
	Username string `json:"username"`
	// Password is the Secret key holding the password.
	Password SecretKeyRef `json:"password"`
}

// FreezeCheck fails while any of its periods is active.
type FreezeCheck struct {
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	Periods []FreezePeriod `json:"periods"`
}

// FreezePeriod is an absolute time range.
// +kubebuilder:validation:XValidation:rule="self.start < self.end",message="end must be after start"
type FreezePeriod struct {
	Start metav1.Time `json:"start"`
	End   metav1.Time `json:"end"`
	// Reason is shown when the freeze holds a node back.
	// +optional
	Reason string `json:"reason,omitempty"`
}

// TriggerInstance is a named trigger: exactly one plugin field is set.
// +kubebuilder:validation:XValidation:rule="[has(self.alterLabel), has(self.alterAnnotation), has(self.alterFinalizer), has(self.cordon), has(self.drain), has(self.restore), has(self.replaceMachine), has(self.rebootInstance), has(self.alterHypervisor)].filter(x, x).size() == 1",message="exactly one plugin must be set"
type TriggerInstance struct {
	// Name is how transitions refer to the trigger: letters, digits and _.
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_]*$`
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// AlterLabel sets or removes a node label.
	// +optional
	AlterLabel *AlterTrigger `json:"alterLabel,omitempty"`
	// AlterAnnotation sets or removes a node annotation.
	// +optional
	AlterAnnotation *AlterTrigger `json:"alterAnnotation,omitempty"`
	// AlterFinalizer adds or removes a node finalizer.
	// +optional
	AlterFinalizer *AlterFinalizerTrigger `json:"alterFinalizer,omitempty"`
	// Cordon cordons the node without draining it: it creates the node's
	// NodeMaintenance with the drain skipped and waits until the node is
	// cordoned. A later drain trigger drains it; restore uncordons it.
	// +optional
	Cordon *CordonTrigger `json:"cordon,omitempty"`
	// Drain creates the node's NodeMaintenance and waits until it is Ready.
	// +optional
	Drain *DrainTrigger `json:"drain,omitempty"`
	// Restore deletes the node's NodeMaintenance and waits until it is gone.
	// +optional
	Restore *RestoreTrigger `json:"restore,omitempty"`
	// ReplaceMachine replaces the node's Machine (with surge: a new one
	// first) and waits until the old one is gone.
	// +optional
	ReplaceMachine *ReplaceMachineTrigger `json:"replaceMachine,omitempty"`
	// RebootInstance drains the node, reboots its instance through the
	// cloud provider, waits for it to come back and restores it.
	// +optional
	RebootInstance *RebootInstanceTrigger `json:"rebootInstance,omitempty"`
	// AlterHypervisor sets spec fields of the node's KVM Hypervisor
	// (kvm.cloud.sap/v1, named like the node).
	// +optional
	AlterHypervisor *AlterHypervisorTrigger `json:"alterHypervisor,omitempty"`
}

// CheckHypervisorCheck names the Hypervisor status fields to compare.
type CheckHypervisorCheck struct {
	// Status maps top-level status fields, by their JSON names (evicted,
	// hypervisorId, aggregates, numInstances, ...), to the values they
	// must have.
	Status HypervisorFields `json:"status"`
}

// AlterHypervisorTrigger names the Hypervisor spec fields to set.
type AlterHypervisorTrigger struct {
	// Spec maps spec fields, by their JSON names (maintenance,
	// maintenanceReason, reboot, customTraits, ...), to their new values.
	Spec HypervisorFields `json:"spec"`
}

// HypervisorFields are fields of a KVM Hypervisor by their JSON names,
// each with a boolean, string, number or list of strings.
// +kubebuilder:validation:MinProperties=1
type HypervisorFields map[string]apiextensionsv1.JSON

// ControlPlanePolicy says what replaceMachine does with a control-plane
// machine.
// +kubebuilder:validation:Enum=Replace;AlertOnly
type ControlPlanePolicy string

const (
	// ControlPlaneReplace replaces it with surge only, one control-plane
	// machine at a time, its node drained under the quorum guard.
	ControlPlaneReplace ControlPlanePolicy = "Replace"
	// ControlPlaneAlertOnly never replaces it: the trigger waits and the
	// MachineMaintenance says that someone must act.
	ControlPlaneAlertOnly ControlPlanePolicy = "AlertOnly"
)

// ReplaceMachineTrigger replaces the node's Machine. Its progress is kept in
// the node's MachineMaintenance, so a restart resumes it.
type ReplaceMachineTrigger struct {
	// Surge scales the Machine's MachineSet up by one, waits for the new
	// Machine Running and its Node Ready, then removes the old Machine
	// and scales back: capacity never drops. Default: true when the
	// Machine belongs to a MachineSet. Without surge the Machine is
	// deleted and its node drained as for any Machine deletion.
	// +optional
	Surge *bool `json:"surge,omitempty"`
	// ControlPlane says what happens to a control-plane machine.
	// +kubebuilder:default=Replace
	// +optional
	ControlPlane ControlPlanePolicy `json:"controlPlane,omitempty"`
	// Timeout bounds the surge's wait for the new Machine to run with its
	// Node Ready, from the scale-up; past it the surge is undone (the new
	// Machine is marked for deletion and the set shrinks back), the old
	// Machine is kept and the action fails.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:default="20m"
	// +optional
	Timeout *Duration `json:"timeout,omitempty"`
}

// RebootInstanceTrigger reboots the node's instance in place.
type RebootInstanceTrigger struct {
	// Drain tunes the drain before the reboot, as NodeMaintenance
	// spec.drain.
	// +optional
	Drain DrainSpec `json:"drain,omitempty"`
	// Timeout bounds the wait for the node to come back (a new boot ID
	// and Ready); past it the action fails and the node stays cordoned.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:default="30m"
	// +optional
	Timeout *Duration `json:"timeout,omitempty"`
}

// AlterTrigger sets (or removes) a key on the node.
// +kubebuilder:validation:XValidation:rule="self.remove || has(self.value)",message="value is required unless remove is true"
type AlterTrigger struct {
	// +kubebuilder:validation:MinLength=1
	Key string `json:"key"`
	// +optional
	Value *string `json:"value,omitempty"`
	// +optional
	Remove bool `json:"remove,omitempty"`
}

// AlterFinalizerTrigger adds (or removes) a finalizer on the node.
type AlterFinalizerTrigger struct {
	// +kubebuilder:validation:MinLength=1
	Key string `json:"key"`
	// +optional
	Remove bool `json:"remove,omitempty"`
}

// DrainTrigger creates a NodeMaintenance for the node.
type DrainTrigger struct {
	// Drain tunes it, as NodeMaintenance spec.drain.
	// +optional
	Drain DrainSpec `json:"drain,omitempty"`
}

// RestoreTrigger deletes the node's NodeMaintenance.
type RestoreTrigger struct {
	// Uncordon also makes a cordoned node schedulable when no
	// NodeMaintenance holds it: a node cordoned by hand, or by the
	// maintenance-controller before pitstop took over. It is what the
	// maintenance-controller's eviction trigger with `action: uncordon`
	// does, and what `pitstop import` maps it to. A node a NodeMaintenance
	// holds is left to that NodeMaintenance.
	// +optional
	Uncordon bool `json:"uncordon,omitempty"`
}

// CordonTrigger has no settings: `cordon: {}`.
type CordonTrigger struct{}

// NotificationInstance is a named notification: exactly one plugin field is
// set, and a schedule says when it is sent. Its texts are Go templates (see
// docs/profiles.md, "Notifications") of at most 8 KiB each; a template that
// does not parse, names a field that does not exist or goes past a bound
// of pitstop's (a rendered text is at most 64 KiB) is refused when the
// profile is applied.
// +kubebuilder:validation:XValidation:rule="[has(self.slack), has(self.slackThread), has(self.mail), has(self.webhook)].filter(x, x).size() == 1",message="exactly one plugin must be set"
type NotificationInstance struct {
	// Name is how states refer to the notification: letters, digits and _.
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_]*$`
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// Schedule says when it is sent.
	Schedule NotificationSchedule `json:"schedule"`

	// Slack posts to a Slack incoming webhook.
	// +optional
	Slack *SlackNotification `json:"slack,omitempty"`
	// SlackThread posts with a Slack bot token, replies grouped in one
	// thread per period.
	// +optional
	SlackThread *SlackThreadNotification `json:"slackThread,omitempty"`
	// Mail sends an e-mail through an SMTP server.
	// +optional
	Mail *MailNotification `json:"mail,omitempty"`
	// Webhook POSTs a JSON document to a URL (Microsoft Teams, Mattermost or
	// any receiver that takes {"text": ...}).
	// +optional
	Webhook *WebhookNotification `json:"webhook,omitempty"`
}

// NotificationSchedule says when a notification is sent: exactly one field
// is set.
// +kubebuilder:validation:XValidation:rule="[has(self.oneshot), has(self.periodic), has(self.scheduled), has(self.deadlineAtRisk)].filter(x, x).size() == 1",message="exactly one of oneshot, periodic, scheduled and deadlineAtRisk must be set"
type NotificationSchedule struct {
	// Oneshot sends once on entering the state, after Delay.
	// +optional
	Oneshot *OneshotSchedule `json:"oneshot,omitempty"`
	// Periodic sends on entering the state and then every Interval while
	// the node stays in it; in operational only once, on entering it.
	// +optional
	Periodic *PeriodicSchedule `json:"periodic,omitempty"`
	// Scheduled sends at a time of day on the given weekdays while the node
	// is in the state, and later that day to a node entering it.
	// +optional
	Scheduled *ScheduledSchedule `json:"scheduled,omitempty"`
	// DeadlineAtRisk sends once each time a scheduled cloud event of a
	// node the profile selects is found at risk of missing its deadline
	// (its MachineMaintenance's DeadlineAtRisk condition turns True, or
	// its reason changes), whatever the node's state. Such a notification
	// is not listed in a state's notify.
	// +optional
	DeadlineAtRisk *DeadlineAtRiskSchedule `json:"deadlineAtRisk,omitempty"`
}

// DeadlineAtRiskSchedule has no settings: `deadlineAtRisk: {}`.
type DeadlineAtRiskSchedule struct{}

// OneshotSchedule sends once per entry into the state.
type OneshotSchedule struct {
	// Delay waits this long after the entry; if the node has left the state
	// by then, nothing is sent.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') || duration(self) >= duration('0s')",message="must be at least 0s"
	// +optional
	Delay Duration `json:"delay,omitempty"`
}

// PeriodicSchedule repeats while the node stays in the state.
type PeriodicSchedule struct {
	// Interval between two messages, at least 1s.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') || duration(self) >= duration('1s')",message="must be at least 1s"
	Interval Duration `json:"interval"`
}

// ScheduledSchedule sends at a time of day.
type ScheduledSchedule struct {
	// At is the time of day, "hh:mm".
	// +kubebuilder:validation:Pattern=`^([01][0-9]|2[0-3]):[0-5][0-9]$`
	At string `json:"at"`
	// Weekdays it is sent on; empty means every day.
	// +kubebuilder:validation:MaxItems=7
	// +optional
	Weekdays []Weekday `json:"weekdays,omitempty"`
	// TimeZone is an IANA time zone name; empty means UTC.
	// +optional
	TimeZone string `json:"timeZone,omitempty"`
}

// KubernikusCountCheck compares the cluster's node count with the sizes of
// its Kubernikus cluster's node pools, read from the Kubernikus API with
// an OpenStack account.
type KubernikusCountCheck struct {
	// Cluster is the Kubernikus cluster's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Cluster string `json:"cluster"`
	// CloudProviderSecret is the key of a Secret in pitstop's namespace,
	// labelled pitstop.dev/usable-by-profiles: "true", that holds the
	// account as a cloudprovider.conf ([Global] auth-url, username,
	// password, domain-name, tenant-id, region). Unset: the manager's own
	// (--openstack-cloud-config).
	// +optional
	CloudProviderSecret *SecretKeyRef `json:"cloudProviderSecret,omitempty"`
}

// SecretKeyRef names a key of a Secret in the namespace pitstop runs in
// (pitstop-system unless installed elsewhere). The Secret must be labelled
// pitstop.dev/usable-by-profiles: "true": pitstop reads no other for a
// profile. pitstop reads it when it sends a notification or queries
// Prometheus (a check keeps it for 10 seconds at most), and never logs it.
type SecretKeyRef struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key"`
}

// SlackNotification posts through a Slack incoming webhook.
type SlackNotification struct {
	// WebhookURL is the Secret key holding the incoming webhook's URL.
	WebhookURL SecretKeyRef `json:"webhookURL"`
	// Channel overrides the webhook's channel.
	// +optional
	Channel string `json:"channel,omitempty"`
	// Message is the text, a Go template.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=8192
	Message string `json:"message"`
}

// SlackThreadNotification posts with a bot token: the first message of a
// period (Title) opens a thread, every message (Message) is a reply in it.
// The thread is kept in a Lease, so every replica and restart uses it.
type SlackThreadNotification struct {
	// Token is the Secret key holding the bot token (xoxb-...).
	Token SecretKeyRef `json:"token"`
	// +kubebuilder:validation:MinLength=1
	Channel string `json:"channel"`
	// Title opens the thread, a Go template.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=8192
	Title string `json:"title"`
	// Message is each reply, a Go template.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=8192
	Message string `json:"message"`
	// Period is how long one thread collects replies before the next
	// message opens a new one, at least 1s.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') || duration(self) >= duration('1s')",message="must be at least 1s"
	Period Duration `json:"period"`
	// LeaseName names the Lease, in pitstop's namespace, holding the
	// thread; default pitstop-slack-<profile>-<notification>. It must start
	// with pitstop-slack-, so that it can never name the leader election's
	// Lease or a budget's slot; and pitstop only takes over a Lease that a
	// slackThread notification created.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^pitstop-slack-[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +optional
	LeaseName string `json:"leaseName,omitempty"`
}

// MailNotification sends an e-mail.
type MailNotification struct {
	// Address is the SMTP server, host:port.
	// +kubebuilder:validation:MinLength=1
	Address string `json:"address"`
	// +kubebuilder:validation:MinLength=1
	From string `json:"from"`
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	To []string `json:"to"`
	// Subject is a Go template.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=8192
	Subject string `json:"subject"`
	// Message is the plain-text body, a Go template.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=8192
	Message string `json:"message"`
	// TLS is how the connection is protected: StartTLS (the default: upgrade
	// a plain connection, refuse a server that cannot), TLS (implicit TLS,
	// as on port 465) or None (only for a server on a trusted network).
	// +kubebuilder:validation:Enum=StartTLS;TLS;None
	// +kubebuilder:default=StartTLS
	// +optional
	TLS string `json:"tls,omitempty"`
	// Auth logs in with PLAIN authentication; without it, none.
	// +optional
	Auth *MailAuth `json:"auth,omitempty"`
}

// MailAuth is the SMTP login.
type MailAuth struct {
	// +kubebuilder:validation:MinLength=1
	Username string `json:"username"`
	// Password is the Secret key holding the password.
	Password SecretKeyRef `json:"password"`
	// +optional
	Identity string `json:"identity,omitempty"`
}

// WebhookNotification POSTs {"text", "node", "profile", "state",
// "previous", "since", "blocking"} as JSON.
type WebhookNotification struct {
	// URL is the Secret key holding the URL (webhook URLs usually carry a
	// token).
	URL SecretKeyRef `json:"url"`
	// Message is the "text" field, a Go template.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=8192
	Message string `json:"message"`
}

// Transition leaves a state when its check passes.
type Transition struct {
	// Check is a boolean expression over check names with &&, ||, ! and
	// parentheses. Empty passes.
	// +kubebuilder:validation:MaxLength=4096
	// +optional
	Check string `json:"check,omitempty"`
	// Triggers run, in order, when the transition is taken.
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Triggers []string `json:"triggers,omitempty"`
	// Next is the state the node goes to.
	Next MaintenanceState `json:"next"`
}

// StateSpec is what a state does: its enter triggers, its transitions,
// first passing wins, and the notifications sent while a node is in it.
type StateSpec struct {
	// Enter names triggers run, in order, once a node has entered the
	// state: the node's state changes first, then they run, and they are
	// run again until each is done (a drain until the node is empty). The
	// state's transitions are evaluated, and its notifications sent, only
	// once they are. A transition into the state runs its own triggers
	// before the node moves; these run after. A node whose profile starts
	// selecting it enters operational without running them.
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Enter []string `json:"enter,omitempty"`
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Transitions []Transition `json:"transitions,omitempty"`
	// Notify names the notification instances sent while a node is in the
	// state, each on its own schedule.
	// +kubebuilder:validation:MaxItems=16
	// +listType=set
	// +optional
	Notify []string `json:"notify,omitempty"`
}

// StatesSpec holds the three states.
type StatesSpec struct {
	// +optional
	Operational StateSpec `json:"operational,omitempty"`
	// +optional
	MaintenanceRequired StateSpec `json:"maintenanceRequired,omitempty"`
	// +optional
	InMaintenance StateSpec `json:"inMaintenance,omitempty"`
}

// MaintenanceProfileSpec is a maintenance workflow.
type MaintenanceProfileSpec struct {
	// NodeSelector picks the nodes. Nodes labelled
	// cloud.sap/maintenance-profile with this profile's name (several names
	// joined by --) are picked too.
	// +optional
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	// +optional
	Checks []CheckInstance `json:"checks,omitempty"`
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	// +optional
	Triggers []TriggerInstance `json:"triggers,omitempty"`
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Notifications []NotificationInstance `json:"notifications,omitempty"`
	// +optional
	States StatesSpec `json:"states,omitempty"`
	// Recheck is how soon a node is evaluated again while a check of its
	// state's transitions asks a service outside the cluster, whose answer
	// can change with nothing in the cluster to say so: prometheusInstant,
	// checkHypervisor, hypervisorCondition and kubernikusCount. Unset, each
	// asks again after its own time: prometheusInstant every 30 s, the
	// hypervisor checks 30 s and kubernikusCount 1 min after a failure.
	// The maintenance-controller's intervals.requeue.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$') || duration(self) >= duration('1s')",message="must be at least 1s"
	// +optional
	Recheck *Duration `json:"recheck,omitempty"`
}

// MaintenanceProfileStatus reports the profile's nodes.
type MaintenanceProfileStatus struct {
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Nodes counts the profile's nodes by state.
	// +optional
	Nodes map[MaintenanceState]int32 `json:"nodes,omitempty"`
	// LastTransitionTime is when a node of the profile last changed state.
	// +optional
	LastTransitionTime *metav1.Time `json:"lastTransitionTime,omitempty"`
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// LastValid is the last generation of the spec that compiled: the one
	// the engine runs while a later generation does not compile. It is
	// kept here so that a restarted manager runs it too.
	// +optional
	LastValid *ProfileGeneration `json:"lastValid,omitempty"`
}

// ProfileGeneration is one generation of a MaintenanceProfile's spec.
type ProfileGeneration struct {
	Generation int64                  `json:"generation"`
	Spec       MaintenanceProfileSpec `json:"spec"`
}

// MaintenanceProfile is a maintenance workflow for the nodes it selects:
// named checks and triggers, and for each state the transitions out of it.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=mp,categories=pitstop
// +kubebuilder:printcolumn:name="Operational",type=integer,JSONPath=`.status.nodes.operational`
// +kubebuilder:printcolumn:name="Required",type=integer,JSONPath=`.status.nodes.maintenance-required`
// +kubebuilder:printcolumn:name="InMaintenance",type=integer,JSONPath=`.status.nodes.in-maintenance`
// +kubebuilder:printcolumn:name="Valid",type=string,JSONPath=`.status.conditions[?(@.type=="Valid")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type MaintenanceProfile struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec MaintenanceProfileSpec `json:"spec,omitempty"`
	// +optional
	Status MaintenanceProfileStatus `json:"status,omitempty"`
}

// MaintenanceProfileList is a list of MaintenanceProfile objects.
// +kubebuilder:object:root=true
type MaintenanceProfileList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MaintenanceProfile `json:"items"`
}

func init() {
	SchemeBuilder.Register(&MaintenanceProfile{}, &MaintenanceProfileList{})
}
