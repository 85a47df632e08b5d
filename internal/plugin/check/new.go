package check

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/profilesecret"
)

// Deps are the outside services checks may need.
type Deps struct {
	// Prometheus runs the queries of prometheusInstant checks; a profile
	// with such a check is refused when it is nil.
	Prometheus Prometheus
	// PrometheusURLs, when not empty, are the only URLs prometheusInstant
	// checks may query: a profile naming another is refused. A check that
	// sends credentials from a Secret needs its URL under one of them,
	// empty or not (where Secrets is set).
	PrometheusURLs URLPrefixes
	// MailServers are the SMTP servers mail notifications may log in to
	// with a password from a Secret (--notify-host-allow). A profile's
	// checks and notifications are compiled together, so the list travels
	// with the checks' services; it is enforced where Secrets is set, the
	// processes that send.
	MailServers profilesecret.Hosts
	// Secrets reads the Secrets that prometheusInstant checks take their
	// credentials from, in Namespace (pitstop's own), only those opted in
	// (profilesecret.Read). It should read from the API server, not a
	// cache, so that pitstop needs no watch on Secrets. When nil (`pitstop
	// explain`, which does not read pitstop's Secrets), a check with
	// credentials builds, and its evaluation fails saying so.
	Secrets   client.Reader
	Namespace string
	// Kubernikus reads node pools for kubernikusCount checks; nil (`pitstop
	// explain`): such a check builds, and its evaluation fails saying so.
	Kubernikus Kubernikus
	// Reader reads the objects checks look up (Hypervisors), from the API
	// server; nil: such a check builds, and its evaluation fails saying so.
	Reader client.Reader
}

// New builds the check an instance configures. It validates what the CRD
// schema cannot (time zones exist, dates and thresholds parse, durations
// are positive), so a profile that builds cannot fail later on its
// configuration. Errors name the field relative to the instance:
// `timeWindow.timeZone: unknown time zone "Mars/Olympus"`.
func New(inst pitstopv1alpha1.CheckInstance, deps Deps) (Check, error) {
	var set []plugin
	for _, p := range plugins(inst, deps) {
		if p.set {
			set = append(set, p)
		}
	}
	switch len(set) {
	case 0:
		return nil, errors.New("exactly one plugin must be set, found none")
	case 1:
	default:
		names := make([]string, len(set))
		for i, p := range set {
			names[i] = p.name
		}
		return nil, fmt.Errorf("exactly one plugin must be set, found %d: %s", len(set), strings.Join(names, ", "))
	}
	if inst.PrometheusInstant != nil && deps.Prometheus == nil {
		return nil, errors.New("prometheusInstant: no Prometheus client configured")
	}
	c, err := set[0].build()
	if err != nil {
		// The constructors' errors start with the field they refuse.
		return nil, fmt.Errorf("%s.%w", set[0].name, err)
	}
	return c, nil
}

// PluginName names the plugin an instance configures ("" if none is set).
func PluginName(inst pitstopv1alpha1.CheckInstance) string {
	for _, p := range plugins(inst, Deps{}) {
		if p.set {
			return p.name
		}
	}
	return ""
}

// plugin is one plugin field of a CheckInstance: its name, whether it is
// set, what its check reads and how to build it. A budget's slots are
// BudgetOf's.
type plugin struct {
	name  string
	set   bool
	reads Reads
	build func() (Check, error)
}

// plugins lists the plugin fields of inst in the API's order.
func plugins(inst pitstopv1alpha1.CheckInstance, deps Deps) []plugin {
	return []plugin{
		{"hasLabel", inst.HasLabel != nil, ReadsNode, func() (Check, error) { return newKeyValue(inst.HasLabel, labelOnNode) }},
		{"hasAnnotation", inst.HasAnnotation != nil, ReadsNode, func() (Check, error) { return newKeyValue(inst.HasAnnotation, annotationOnNode) }},
		{"anyLabel", inst.AnyLabel != nil, ReadsFleet, func() (Check, error) { return newKeyValue(inst.AnyLabel, labelOnAnyNode) }},
		{"condition", inst.Condition != nil, ReadsNode, func() (Check, error) { return newCondition(inst.Condition) }},
		{"maxMaintenance", inst.MaxMaintenance != nil, ReadsFleet, func() (Check, error) { return newMaxMaintenance(inst.MaxMaintenance) }},
		{"stagger", inst.Stagger != nil, ReadsFleet, func() (Check, error) { return newStagger(inst.Stagger) }},
		{"timeWindow", inst.TimeWindow != nil, ReadsClock, func() (Check, error) { return newTimeWindow(inst.TimeWindow) }},
		{"wait", inst.Wait != nil, ReadsNode, func() (Check, error) { return newWait(inst.Wait) }},
		{"waitExclude", inst.WaitExclude != nil, ReadsNode, func() (Check, error) { return newWaitExclude(inst.WaitExclude) }},
		{"clusterSemver", inst.ClusterSemver != nil, ReadsFleet, func() (Check, error) { return newClusterSemver(inst.ClusterSemver) }},
		{"affinity", inst.Affinity != nil, ReadsFleet, func() (Check, error) { return newAffinity(inst.Affinity) }},
		{"nodeCount", inst.NodeCount != nil, ReadsFleet, func() (Check, error) { return newNodeCount(inst.NodeCount) }},
		{"prometheusInstant", inst.PrometheusInstant != nil, ReadsNode, func() (Check, error) {
			return newPrometheusInstant(inst.PrometheusInstant, deps)
		}},
		{"freeze", inst.Freeze != nil, ReadsClock, func() (Check, error) { return newFreeze(inst.Freeze) }},
		{"deadline", inst.Deadline != nil, ReadsNode, func() (Check, error) { return newDeadline(inst.Deadline) }},
		{"kubernikusCount", inst.KubernikusCount != nil, ReadsFleet, func() (Check, error) { return newKubernikusCount(inst.KubernikusCount, deps) }},
		{"checkHypervisor", inst.CheckHypervisor != nil, ReadsNode, func() (Check, error) { return newCheckHypervisor(inst.CheckHypervisor, deps) }},
		{"hypervisorCondition", inst.HypervisorCondition != nil, ReadsNode, func() (Check, error) {
			return newHypervisorCondition(inst.HypervisorCondition, deps)
		}},
	}
}

// positive refuses a duration the CRD schema lets through but that would
// make a check meaningless.
func positive(field string, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("%s: must be positive, got %s", field, d)
	}
	return nil
}
