package healthcheck

import (
	"fmt"
	"strings"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2"

	"github.com/pitstop-dev/pitstop/internal/nodeview"
)

// Defaults of the MachineHealthCheck CRD, for objects stored before it
// defaulted them.
var (
	defaultMaxUnhealthy       = intstr.FromString("100%")
	defaultNodeStartupTimeout = 10 * time.Minute
)

// verdict is what a health check concludes about one Machine.
type verdict int

const (
	// healthy: nothing is wrong, or not for long enough yet.
	healthy verdict = iota
	// unhealthy: the Machine is to be remediated.
	unhealthy
	// inMaintenance: the Machine would be unhealthy, but its node is in
	// planned maintenance; it is neither counted unhealthy nor remediated.
	inMaintenance
)

// target is one Machine a health check selects, with what is known about
// its node.
type target struct {
	machine *machinev1beta1.Machine
	// node is the Machine's Node; nil when the Machine has no nodeRef yet,
	// or when the node it names is gone.
	node *corev1.Node
	// plannedMaintenance says whether the node is in maintenance pitstop
	// planned (machineapi.InPlannedMaintenance).
	plannedMaintenance bool
}

// health is the conclusion about one target.
type health struct {
	verdict verdict
	// reason says, for people, why the Machine is unhealthy (or would be,
	// but for its node's maintenance); empty when healthy.
	reason string
	// failing says that a healthy verdict is only a matter of time: the
	// node has an unhealthy condition not yet held for its timeout.
	failing bool
	// nextCheck is how long until the verdict could change by time alone
	// (a condition reaching its timeout); zero when only a change to the
	// Machine or its Node can change it.
	nextCheck time.Duration
}

// checkHealth decides a target's health at now, as the machine-api-operator
// does: a Machine is unhealthy when its phase is Failed, when its node is
// gone, when it has had no node for longer than nodeStartupTimeout, or when
// its node has had one of spec.unhealthyConditions for longer than that
// condition's timeout. A node in planned maintenance turns unhealthy into
// inMaintenance.
func checkHealth(t target, spec machinev1beta1.MachineHealthCheckSpec, now time.Time) health {
	h := checkMachine(t, spec, now)
	if t.node != nil && t.plannedMaintenance {
		h.failing = false
	}
	if h.verdict == unhealthy && t.node != nil && t.plannedMaintenance {
		h.verdict = inMaintenance
		h.reason = fmt.Sprintf("%s, but node %s is in planned maintenance (a reboot is not a failure)", h.reason, t.node.Name)
	}
	return h
}

// checkMachine is checkHealth without regard to maintenance.
func checkMachine(t target, spec machinev1beta1.MachineHealthCheckSpec, now time.Time) health {
	m := t.machine
	if m.Status.Phase != nil && *m.Status.Phase == machinev1beta1.PhaseFailed {
		reason := "its phase is Failed"
		if m.Status.ErrorMessage != nil && *m.Status.ErrorMessage != "" {
			reason += ": " + truncate(*m.Status.ErrorMessage, 200)
		}
		return health{verdict: unhealthy, reason: reason}
	}
	if name := nodeName(m); name != "" && t.node == nil {
		return health{verdict: unhealthy, reason: fmt.Sprintf("its node %s is gone", name)}
	}
	if t.node == nil {
		return checkStartup(m, nodeStartupTimeout(spec), now)
	}
	return checkConditions(t.node, spec.UnhealthyConditions, now)
}

// checkStartup checks a Machine that has no node yet. The time without one
// counts from status.lastUpdated, as the machine-api-operator counts it, or
// from the Machine's creation before its status was first written. A
// timeout of zero disables the check.
func checkStartup(m *machinev1beta1.Machine, timeout time.Duration, now time.Time) health {
	if timeout == 0 {
		return health{}
	}
	since := m.CreationTimestamp.Time
	if m.Status.LastUpdated != nil {
		since = m.Status.LastUpdated.Time
	}
	deadline := since.Add(timeout)
	if now.Before(deadline) {
		return health{nextCheck: deadline.Sub(now)}
	}
	return health{verdict: unhealthy, reason: fmt.Sprintf("it has had no node for %s (nodeStartupTimeout %s)", duration(now.Sub(since)), timeout)}
}

// checkConditions checks the node's conditions against the unhealthy ones:
// a match (same type and status) held for at least its timeout makes the
// Machine unhealthy; a match not yet held that long is when to look again.
// The time held counts from the condition's lastTransitionTime.
func checkConditions(node *corev1.Node, unhealthyConditions []machinev1beta1.UnhealthyCondition, now time.Time) health {
	var next time.Duration
	for _, uc := range unhealthyConditions {
		c := nodeview.Condition(node, uc.Type)
		if c == nil || c.Status != uc.Status {
			continue
		}
		deadline := c.LastTransitionTime.Add(uc.Timeout.Duration)
		if !now.Before(deadline) {
			return health{verdict: unhealthy, reason: fmt.Sprintf("its node %s has had %s=%s for %s (timeout %s)",
				node.Name, c.Type, c.Status, duration(now.Sub(c.LastTransitionTime.Time)), uc.Timeout.Duration)}
		}
		if wait := deadline.Sub(now); next == 0 || wait < next {
			next = wait
		}
	}
	return health{nextCheck: next, failing: next > 0}
}

// nodeName is the name of the Machine's node, or "" when it has none yet.
func nodeName(m *machinev1beta1.Machine) string {
	if m.Status.NodeRef == nil {
		return ""
	}
	return m.Status.NodeRef.Name
}

func nodeStartupTimeout(spec machinev1beta1.MachineHealthCheckSpec) time.Duration {
	if spec.NodeStartupTimeout == nil {
		return defaultNodeStartupTimeout
	}
	return spec.NodeStartupTimeout.Duration
}

// assessed is a target with its health.
type assessed struct {
	machine *machinev1beta1.Machine
	health  health
}

// assessment is a health check's view of all its targets at one moment.
type assessment struct {
	targets []assessed
	// maxUnhealthy is spec.maxUnhealthy resolved against the number of
	// targets, and maxUnhealthySpec how the spec says it.
	maxUnhealthy     int
	maxUnhealthySpec string
}

// assess checks every target. maxUnhealthy is resolved against their
// number; a percentage rounds down, as the machine-api-operator rounds it.
func assess(targets []target, spec machinev1beta1.MachineHealthCheckSpec, now time.Time) (assessment, error) {
	maxSpec := defaultMaxUnhealthy
	if spec.MaxUnhealthy != nil {
		maxSpec = *spec.MaxUnhealthy
	}
	maxUnhealthy, err := intstr.GetScaledValueFromIntOrPercent(&maxSpec, len(targets), false)
	if err != nil {
		return assessment{}, fmt.Errorf("spec.maxUnhealthy %q: %w", maxSpec.String(), err)
	}
	a := assessment{maxUnhealthy: maxUnhealthy, maxUnhealthySpec: maxSpec.String()}
	for _, t := range targets {
		a.targets = append(a.targets, assessed{machine: t.machine, health: checkHealth(t, spec, now)})
	}
	return a, nil
}

// expected is the number of Machines checked.
func (a assessment) expected() int { return len(a.targets) }

// with returns the targets whose verdict is v.
func (a assessment) with(v verdict) []assessed {
	var out []assessed
	for _, t := range a.targets {
		if t.health.verdict == v {
			out = append(out, t)
		}
	}
	return out
}

// unhealthy is the number of Machines to remediate.
func (a assessment) unhealthy() int { return len(a.with(unhealthy)) }

// currentHealthy is the number of Machines not unhealthy; those whose node
// is in planned maintenance count as healthy.
func (a assessment) currentHealthy() int { return a.expected() - a.unhealthy() }

// failing is the number of Machines not unhealthy yet whose nodes have an
// unhealthy condition that has not reached its timeout.
func (a assessment) failing() int {
	n := 0
	for _, t := range a.targets {
		if t.health.verdict == healthy && t.health.failing {
			n++
		}
	}
	return n
}

// tooManyUnhealthy says whether the storm guard holds remediation back:
// more Machines are unhealthy, or on their way there, than maxUnhealthy
// allows. Counting those still within their timeout is pitstop's own: the
// nodes of a zone that goes dark turn NotReady seconds apart, and a guard
// counting only machines past their timeout would let the first few be
// remediated one at a time, before the storm shows.
func (a assessment) tooManyUnhealthy() bool { return a.unhealthy()+a.failing() > a.maxUnhealthy }

// remediationsAllowed is how many more Machines may become unhealthy before
// the storm guard holds remediation back.
func (a assessment) remediationsAllowed() int {
	return max(0, a.maxUnhealthy-a.unhealthy()-a.failing())
}

// nextCheck is the earliest time a verdict could change by time alone;
// zero when none can.
func (a assessment) nextCheck() time.Duration {
	var next time.Duration
	for _, t := range a.targets {
		if n := t.health.nextCheck; n > 0 && (next == 0 || n < next) {
			next = n
		}
	}
	return next
}

// toRemediate returns the unhealthy Machines to remediate now: none while
// the health check is paused or too many are unhealthy.
func (a assessment) toRemediate(paused bool) []assessed {
	if paused || a.tooManyUnhealthy() {
		return nil
	}
	return a.with(unhealthy)
}

// isControlledByMachineSet says whether a MachineSet controls the Machine,
// and so will replace it once it is deleted.
func isControlledByMachineSet(m *machinev1beta1.Machine) bool {
	owner := metav1.GetControllerOf(m)
	return owner != nil && owner.Kind == "MachineSet" && strings.HasPrefix(owner.APIVersion, machinev1beta1.GroupName+"/")
}

// names lists the Machines as namespace/name, at most limit of them and
// then how many more, so that messages stay short.
func names(targets []assessed, limit int) string {
	var parts []string
	for i, t := range targets {
		if i == limit {
			parts = append(parts, fmt.Sprintf("and %d more", len(targets)-limit))
			break
		}
		parts = append(parts, klog.KObj(t.machine).String())
	}
	return strings.Join(parts, ", ")
}

// duration rounds d to the second for people.
func duration(d time.Duration) time.Duration { return d.Round(time.Second) }

// truncate cuts s to at most n bytes, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
