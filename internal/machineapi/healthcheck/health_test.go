package healthcheck

import (
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// machine is a Machine created an hour before now, with options applied.
func machine(name string, opts ...func(*machinev1beta1.Machine)) *machinev1beta1.Machine {
	m := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ns", Name: name, CreationTimestamp: metav1.NewTime(now.Add(-time.Hour)),
	}}
	for _, o := range opts {
		o(m)
	}
	return m
}

func withNodeRef(node string) func(*machinev1beta1.Machine) {
	return func(m *machinev1beta1.Machine) { m.Status.NodeRef = &corev1.ObjectReference{Kind: "Node", Name: node} }
}

func withPhase(phase string) func(*machinev1beta1.Machine) {
	return func(m *machinev1beta1.Machine) { m.Status.Phase = ptr.To(phase) }
}

func lastUpdated(ago time.Duration) func(*machinev1beta1.Machine) {
	return func(m *machinev1beta1.Machine) { m.Status.LastUpdated = ptr.To(metav1.NewTime(now.Add(-ago))) }
}

func createdAgo(ago time.Duration) func(*machinev1beta1.Machine) {
	return func(m *machinev1beta1.Machine) { m.CreationTimestamp = metav1.NewTime(now.Add(-ago)) }
}

// node is a Node with the conditions given, each as type, status and how
// long ago it last changed.
func node(name string, conds ...corev1.NodeCondition) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Conditions: conds}}
}

func cond(t corev1.NodeConditionType, s corev1.ConditionStatus, ago time.Duration) corev1.NodeCondition {
	return corev1.NodeCondition{Type: t, Status: s, LastTransitionTime: metav1.NewTime(now.Add(-ago))}
}

// spec checks Ready=False and Ready=Unknown for 5 minutes, with a 10 minute
// node startup timeout.
func spec(opts ...func(*machinev1beta1.MachineHealthCheckSpec)) machinev1beta1.MachineHealthCheckSpec {
	s := machinev1beta1.MachineHealthCheckSpec{
		UnhealthyConditions: []machinev1beta1.UnhealthyCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Timeout: metav1.Duration{Duration: 5 * time.Minute}},
			{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Timeout: metav1.Duration{Duration: 5 * time.Minute}},
		},
		NodeStartupTimeout: &metav1.Duration{Duration: 10 * time.Minute},
	}
	for _, o := range opts {
		o(&s)
	}
	return s
}

func startupTimeout(d time.Duration) func(*machinev1beta1.MachineHealthCheckSpec) {
	return func(s *machinev1beta1.MachineHealthCheckSpec) { s.NodeStartupTimeout = &metav1.Duration{Duration: d} }
}

func TestCheckHealth(t *testing.T) {
	for name, tc := range map[string]struct {
		target     target
		spec       machinev1beta1.MachineHealthCheckSpec
		want       verdict
		wantReason string // a part of the reason
		wantNext   time.Duration
	}{
		"finds a machine with a Ready node healthy, with nothing to wait for": {
			target: target{machine: machine("m", withNodeRef("n")), node: node("n", cond(corev1.NodeReady, corev1.ConditionTrue, time.Hour))},
			spec:   spec(),
			want:   healthy,
		},
		"finds a Failed machine unhealthy even when its node is Ready": {
			target:     target{machine: machine("m", withNodeRef("n"), withPhase(machinev1beta1.PhaseFailed)), node: node("n", cond(corev1.NodeReady, corev1.ConditionTrue, time.Hour))},
			spec:       spec(),
			want:       unhealthy,
			wantReason: "phase is Failed",
		},
		"finds a machine whose node is gone unhealthy": {
			target:     target{machine: machine("m", withNodeRef("n"))},
			spec:       spec(),
			want:       unhealthy,
			wantReason: "node n is gone",
		},
		"finds a node NotReady for longer than the timeout unhealthy": {
			target:     target{machine: machine("m", withNodeRef("n")), node: node("n", cond(corev1.NodeReady, corev1.ConditionFalse, 6*time.Minute))},
			spec:       spec(),
			want:       unhealthy,
			wantReason: "Ready=False for 6m0s (timeout 5m0s)",
		},
		"finds a node NotReady for exactly the timeout unhealthy, so a requeue at the timeout acts": {
			target: target{machine: machine("m", withNodeRef("n")), node: node("n", cond(corev1.NodeReady, corev1.ConditionFalse, 5*time.Minute))},
			spec:   spec(),
			want:   unhealthy,
		},
		"waits for a node NotReady for less than the timeout until the timeout": {
			target:   target{machine: machine("m", withNodeRef("n")), node: node("n", cond(corev1.NodeReady, corev1.ConditionFalse, 2*time.Minute))},
			spec:     spec(),
			want:     healthy,
			wantNext: 3 * time.Minute,
		},
		"matches the second unhealthy condition of the same type": {
			target:     target{machine: machine("m", withNodeRef("n")), node: node("n", cond(corev1.NodeReady, corev1.ConditionUnknown, 10*time.Minute))},
			spec:       spec(),
			want:       unhealthy,
			wantReason: "Ready=Unknown",
		},
		"waits for the condition that reaches its timeout first": {
			target: target{machine: machine("m", withNodeRef("n")), node: node("n",
				cond(corev1.NodeReady, corev1.ConditionFalse, time.Minute),
				cond(corev1.NodeDiskPressure, corev1.ConditionTrue, time.Minute))},
			spec: spec(func(s *machinev1beta1.MachineHealthCheckSpec) {
				s.UnhealthyConditions = append(s.UnhealthyConditions,
					machinev1beta1.UnhealthyCondition{Type: corev1.NodeDiskPressure, Status: corev1.ConditionTrue, Timeout: metav1.Duration{Duration: 90 * time.Second}})
			}),
			want:     healthy,
			wantNext: 30 * time.Second,
		},
		"ignores a condition whose status does not match": {
			target: target{machine: machine("m", withNodeRef("n")), node: node("n", cond(corev1.NodeReady, corev1.ConditionTrue, time.Minute), cond(corev1.NodeMemoryPressure, corev1.ConditionTrue, time.Hour))},
			spec:   spec(),
			want:   healthy,
		},
		"finds a machine without a node past nodeStartupTimeout since its last status update unhealthy": {
			target:     target{machine: machine("m", lastUpdated(11*time.Minute))},
			spec:       spec(),
			want:       unhealthy,
			wantReason: "no node for 11m0s (nodeStartupTimeout 10m0s)",
		},
		"waits for a machine without a node until nodeStartupTimeout after its last status update": {
			target:   target{machine: machine("m", lastUpdated(4*time.Minute))},
			spec:     spec(),
			want:     healthy,
			wantNext: 6 * time.Minute,
		},
		"counts the startup from the creation when the status was never written": {
			target:   target{machine: machine("m", createdAgo(8*time.Minute))},
			spec:     spec(),
			want:     healthy,
			wantNext: 2 * time.Minute,
		},
		"uses the CRD's 10 minute default when nodeStartupTimeout is unset": {
			target: target{machine: machine("m", createdAgo(10*time.Minute))},
			spec:   spec(func(s *machinev1beta1.MachineHealthCheckSpec) { s.NodeStartupTimeout = nil }),
			want:   unhealthy,
		},
		"never finds a machine without a node unhealthy when nodeStartupTimeout is 0": {
			target: target{machine: machine("m", createdAgo(30*24*time.Hour))},
			spec:   spec(startupTimeout(0)),
			want:   healthy,
		},
		"leaves a NotReady node in planned maintenance alone and says why": {
			target:     target{machine: machine("m", withNodeRef("n")), node: node("n", cond(corev1.NodeReady, corev1.ConditionFalse, time.Hour)), plannedMaintenance: true},
			spec:       spec(),
			want:       inMaintenance,
			wantReason: "its node n has had Ready=False for 1h0m0s (timeout 5m0s), but node n is in planned maintenance (a reboot is not a failure)",
		},
		"leaves a Failed machine whose node is in planned maintenance alone": {
			target: target{machine: machine("m", withNodeRef("n"), withPhase(machinev1beta1.PhaseFailed)), node: node("n"), plannedMaintenance: true},
			spec:   spec(),
			want:   inMaintenance,
		},
		"still waits for the timeout of a node in planned maintenance that is not unhealthy yet": {
			target:   target{machine: machine("m", withNodeRef("n")), node: node("n", cond(corev1.NodeReady, corev1.ConditionFalse, time.Minute)), plannedMaintenance: true},
			spec:     spec(),
			want:     healthy,
			wantNext: 4 * time.Minute,
		},
		"finds a healthy node in planned maintenance healthy": {
			target: target{machine: machine("m", withNodeRef("n")), node: node("n", cond(corev1.NodeReady, corev1.ConditionTrue, time.Minute)), plannedMaintenance: true},
			spec:   spec(),
			want:   healthy,
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := checkHealth(tc.target, tc.spec, now)
			if got.verdict != tc.want || got.nextCheck != tc.wantNext {
				t.Errorf("checkHealth = %+v, want verdict %d and next check in %s", got, tc.want, tc.wantNext)
			}
			if !strings.Contains(got.reason, tc.wantReason) {
				t.Errorf("reason %q, want it to contain %q", got.reason, tc.wantReason)
			}
			if (got.verdict == healthy) != (got.reason == "") {
				t.Errorf("reason %q with verdict %d: only an unhealthy verdict has a reason", got.reason, got.verdict)
			}
		})
	}
}

// targets are n machines with Ready nodes, then bad machines whose nodes
// are gone, then held machines NotReady for an hour in planned maintenance.
func targets(n, bad, held int) []target {
	var out []target
	for i := range n {
		name := string(rune('a' + i))
		out = append(out, target{machine: machine("ok-"+name, withNodeRef(name)), node: node(name, cond(corev1.NodeReady, corev1.ConditionTrue, time.Hour))})
	}
	for i := range bad {
		out = append(out, target{machine: machine("bad-"+string(rune('a'+i)), withNodeRef("gone"))})
	}
	for i := range held {
		name := "held-" + string(rune('a'+i))
		out = append(out, target{machine: machine(name, withNodeRef(name)), node: node(name, cond(corev1.NodeReady, corev1.ConditionFalse, time.Hour)), plannedMaintenance: true})
	}
	return out
}

// failingFor is a machine whose node has been NotReady for d.
func failingFor(name string, d time.Duration) target {
	return target{machine: machine("failing-"+name, withNodeRef(name)), node: node(name, cond(corev1.NodeReady, corev1.ConditionFalse, d))}
}

func maxUnhealthy(v intstr.IntOrString) func(*machinev1beta1.MachineHealthCheckSpec) {
	return func(s *machinev1beta1.MachineHealthCheckSpec) { s.MaxUnhealthy = &v }
}

func TestAssess(t *testing.T) {
	for name, tc := range map[string]struct {
		targets                 []target
		spec                    machinev1beta1.MachineHealthCheckSpec
		hold                    string
		wantHealthy, wantMax    int
		wantAllowed, wantRemedy int
		wantTooMany             bool
	}{
		"allows every machine to be unhealthy by default (100%)": {
			targets: targets(0, 3, 0), spec: spec(),
			wantHealthy: 0, wantMax: 3, wantAllowed: 0, wantRemedy: 3,
		},
		"remediates when as many are unhealthy as maxUnhealthy allows": {
			targets: targets(3, 2, 0), spec: spec(maxUnhealthy(intstr.FromInt32(2))),
			wantHealthy: 3, wantMax: 2, wantAllowed: 0, wantRemedy: 2,
		},
		"holds back every remediation when one more is unhealthy than allowed": {
			targets: targets(2, 3, 0), spec: spec(maxUnhealthy(intstr.FromInt32(2))),
			wantHealthy: 2, wantMax: 2, wantAllowed: 0, wantRemedy: 0, wantTooMany: true,
		},
		"rounds a percentage down: 40% of 4 machines is 1": {
			targets: targets(2, 2, 0), spec: spec(maxUnhealthy(intstr.FromString("40%"))),
			wantHealthy: 2, wantMax: 1, wantAllowed: 0, wantRemedy: 0, wantTooMany: true,
		},
		"counts remediations left under a percentage": {
			targets: targets(9, 1, 0), spec: spec(maxUnhealthy(intstr.FromString("30%"))),
			wantHealthy: 9, wantMax: 3, wantAllowed: 2, wantRemedy: 1,
		},
		"blocks all remediation with maxUnhealthy 0": {
			targets: targets(2, 1, 0), spec: spec(maxUnhealthy(intstr.FromInt32(0))),
			wantHealthy: 2, wantMax: 0, wantAllowed: 0, wantRemedy: 0, wantTooMany: true,
		},
		"neither counts nor remediates machines in planned maintenance": {
			targets: targets(1, 0, 2), spec: spec(maxUnhealthy(intstr.FromInt32(0))),
			wantHealthy: 3, wantMax: 0, wantAllowed: 0, wantRemedy: 0,
		},
		"computes the status but remediates nothing while paused": {
			targets: targets(3, 1, 0), spec: spec(), hold: "remediation is paused by the cluster.x-k8s.io/paused annotation",
			wantHealthy: 3, wantMax: 4, wantAllowed: 3, wantRemedy: 0,
		},
		"counts machines failing within their timeout toward the storm guard": {
			// One past its timeout, two NotReady for a minute of five: a
			// zone going dark, not one broken machine.
			targets: append(targets(2, 1, 0), failingFor("x", time.Minute), failingFor("y", time.Minute)), spec: spec(maxUnhealthy(intstr.FromInt32(2))),
			wantHealthy: 4, wantMax: 2, wantAllowed: 0, wantRemedy: 0, wantTooMany: true,
		},
		"remediates while unhealthy and failing machines stay within maxUnhealthy": {
			targets: append(targets(3, 1, 0), failingFor("x", time.Minute)), spec: spec(maxUnhealthy(intstr.FromInt32(2))),
			wantHealthy: 4, wantMax: 2, wantAllowed: 0, wantRemedy: 1,
		},
		"does not count a failing node in planned maintenance": {
			targets:     append(targets(2, 1, 0), target{machine: machine("m", withNodeRef("m")), node: node("m", cond(corev1.NodeReady, corev1.ConditionFalse, time.Minute)), plannedMaintenance: true}),
			spec:        spec(maxUnhealthy(intstr.FromInt32(1))),
			wantHealthy: 3, wantMax: 1, wantAllowed: 0, wantRemedy: 1,
		},
		"reports nothing to remediate with no machines": {
			targets: nil, spec: spec(maxUnhealthy(intstr.FromString("50%"))),
			wantHealthy: 0, wantMax: 0, wantAllowed: 0, wantRemedy: 0,
		},
	} {
		t.Run(name, func(t *testing.T) {
			a, err := assess(tc.targets, tc.spec, now)
			if err != nil {
				t.Fatal(err)
			}
			if a.expected() != len(tc.targets) || a.currentHealthy() != tc.wantHealthy || a.maxUnhealthy != tc.wantMax ||
				a.remediationsAllowed() != tc.wantAllowed || a.tooManyUnhealthy() != tc.wantTooMany {
				t.Errorf("expected %d healthy %d maxUnhealthy %d remediationsAllowed %d tooMany %v, want %d %d %d %d %v",
					a.expected(), a.currentHealthy(), a.maxUnhealthy, a.remediationsAllowed(), a.tooManyUnhealthy(),
					len(tc.targets), tc.wantHealthy, tc.wantMax, tc.wantAllowed, tc.wantTooMany)
			}
			if got := a.toRemediate(tc.hold != ""); len(got) != tc.wantRemedy {
				t.Errorf("%d machines to remediate, want %d", len(got), tc.wantRemedy)
			}
		})
	}
}

func TestAssessRefusesAnInvalidMaxUnhealthy(t *testing.T) {
	_, err := assess(targets(1, 0, 0), spec(maxUnhealthy(intstr.FromString("many"))), now)
	if err == nil || !strings.Contains(err.Error(), `spec.maxUnhealthy "many"`) {
		t.Errorf("assess = %v, want an error naming spec.maxUnhealthy and its value", err)
	}
}

func TestNextCheckIsTheEarliest(t *testing.T) {
	ts := []target{
		{machine: machine("a", withNodeRef("a")), node: node("a", cond(corev1.NodeReady, corev1.ConditionFalse, 4*time.Minute))},
		{machine: machine("b", lastUpdated(time.Minute))},
		{machine: machine("c", withNodeRef("c")), node: node("c", cond(corev1.NodeReady, corev1.ConditionTrue, time.Hour))},
	}
	a, err := assess(ts, spec(), now)
	if err != nil {
		t.Fatal(err)
	}
	if got := a.nextCheck(); got != time.Minute {
		t.Errorf("nextCheck = %s, want 1m0s (machine a's NotReady reaching 5m)", got)
	}
	if a, _ := assess(targets(2, 1, 1), spec(), now); a.nextCheck() != 0 {
		t.Errorf("nextCheck = %s with nothing waiting on time, want 0 (no requeue)", a.nextCheck())
	}
}

func TestRemediationAllowedCondition(t *testing.T) {
	for name, tc := range map[string]struct {
		targets     []target
		spec        machinev1beta1.MachineHealthCheckSpec
		hold        string
		wantStatus  corev1.ConditionStatus
		wantReason  string
		wantMessage []string
	}{
		"allows remediation and names the unhealthy machines": {
			targets: targets(2, 1, 0), spec: spec(),
			wantStatus: corev1.ConditionTrue, wantReason: ReasonWithinMaxUnhealthy,
			wantMessage: []string{"1 of 3 machines unhealthy, maxUnhealthy 100% allows 3: ns/bad-a"},
		},
		"restricts remediation with the counts when too many are unhealthy": {
			targets: targets(1, 2, 0), spec: spec(maxUnhealthy(intstr.FromString("34%"))),
			wantStatus: corev1.ConditionFalse, wantReason: machinev1beta1.TooManyUnhealthyReason,
			wantMessage: []string{"2 of 3 machines are unhealthy, more than maxUnhealthy 34% allows (1)", "ns/bad-a, ns/bad-b"},
		},
		"names at most five machines": {
			targets: targets(0, 7, 0), spec: spec(maxUnhealthy(intstr.FromInt32(1))),
			wantStatus: corev1.ConditionFalse, wantReason: machinev1beta1.TooManyUnhealthyReason,
			wantMessage: []string{"ns/bad-e, and 2 more"},
		},
		"says remediation is paused by the annotation": {
			targets: targets(1, 1, 0), spec: spec(), hold: "remediation is paused by the cluster.x-k8s.io/paused annotation",
			wantStatus: corev1.ConditionFalse, wantReason: ReasonPaused,
			wantMessage: []string{"paused by the cluster.x-k8s.io/paused annotation", "1 of 2 machines unhealthy"},
		},
		"prefers the storm guard to the pause": {
			targets: targets(0, 2, 0), spec: spec(maxUnhealthy(intstr.FromInt32(1))), hold: "remediation is paused by the cluster.x-k8s.io/paused annotation",
			wantStatus: corev1.ConditionFalse, wantReason: machinev1beta1.TooManyUnhealthyReason,
		},
		"says which machines are left alone for their planned maintenance": {
			targets: targets(1, 0, 1), spec: spec(),
			wantStatus: corev1.ConditionTrue, wantReason: ReasonWithinMaxUnhealthy,
			wantMessage: []string{"0 of 2 machines unhealthy", "1 not remediated while their nodes are in planned maintenance (a reboot is not a failure): ns/held-a"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			a, err := assess(tc.targets, tc.spec, now)
			if err != nil {
				t.Fatal(err)
			}
			c := remediationAllowedCondition(a, tc.hold)
			if c.Type != machinev1beta1.RemediationAllowedCondition || c.Status != tc.wantStatus || c.Reason != tc.wantReason {
				t.Errorf("condition %s=%s reason %s, want RemediationAllowed=%s reason %s", c.Type, c.Status, c.Reason, tc.wantStatus, tc.wantReason)
			}
			for _, w := range tc.wantMessage {
				if !strings.Contains(c.Message, w) {
					t.Errorf("message %q, want it to contain %q", c.Message, w)
				}
			}
		})
	}
}

func TestSetStatusKeepsTheTransitionTimeUntilTheStatusChanges(t *testing.T) {
	var status machinev1beta1.MachineHealthCheckStatus
	first, later := metav1.NewTime(now), metav1.NewTime(now.Add(time.Minute))
	a, _ := assess(targets(2, 1, 0), spec(), now)
	setStatus(&status, a, "", first)
	if *status.ExpectedMachines != 3 || *status.CurrentHealthy != 2 || status.RemediationsAllowed != 2 {
		t.Errorf("status %d expected, %d healthy, %d allowed; want 3, 2, 2", *status.ExpectedMachines, *status.CurrentHealthy, status.RemediationsAllowed)
	}
	a, _ = assess(targets(1, 2, 0), spec(), now)
	setStatus(&status, a, "", later)
	if c := status.Conditions[0]; len(status.Conditions) != 1 || !c.LastTransitionTime.Equal(&first) {
		t.Errorf("conditions %+v, want one whose transition stays at %s while it stays True", status.Conditions, first)
	}
	a, _ = assess(targets(1, 2, 0), spec(maxUnhealthy(intstr.FromInt32(1))), now)
	setStatus(&status, a, "", later)
	if c := status.Conditions[0]; c.Status != corev1.ConditionFalse || !c.LastTransitionTime.Equal(&later) {
		t.Errorf("condition %+v, want False since %s", c, later)
	}
}

func TestIsControlledByMachineSet(t *testing.T) {
	owned := func(apiVersion, kind string, controller bool) *machinev1beta1.Machine {
		return machine("m", func(m *machinev1beta1.Machine) {
			m.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: "o", UID: "u", Controller: ptr.To(controller)}}
		})
	}
	for name, tc := range map[string]struct {
		machine *machinev1beta1.Machine
		want    bool
	}{
		"accepts a machine a MachineSet controls":                 {owned("machine.openshift.io/v1beta1", "MachineSet", true), true},
		"refuses a machine without owner":                         {machine("m"), false},
		"refuses a machine a MachineSet owns without controlling": {owned("machine.openshift.io/v1beta1", "MachineSet", false), false},
		"refuses a machine another kind controls":                 {owned("machine.openshift.io/v1", "ControlPlaneMachineSet", true), false},
		"refuses a MachineSet of another API group":               {owned("cluster.x-k8s.io/v1beta1", "MachineSet", true), false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := isControlledByMachineSet(tc.machine); got != tc.want {
				t.Errorf("isControlledByMachineSet = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNodeHealthChanged(t *testing.T) {
	base := func() *corev1.Node {
		n := node("n", cond(corev1.NodeReady, corev1.ConditionTrue, time.Hour))
		n.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(now.Add(-time.Minute))
		return n
	}
	for name, tc := range map[string]struct {
		change func(*corev1.Node)
		want   bool
	}{
		"drops a heartbeat":        {func(n *corev1.Node) { n.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(now) }, false},
		"drops an unrelated label": {func(n *corev1.Node) { n.Labels = map[string]string{"team": "a"} }, false},
		"passes a condition turning False": {func(n *corev1.Node) {
			n.Status.Conditions[0].Status, n.Status.Conditions[0].LastTransitionTime = corev1.ConditionFalse, metav1.NewTime(now)
		}, true},
		"passes a new condition": {func(n *corev1.Node) {
			n.Status.Conditions = append(n.Status.Conditions, cond(corev1.NodeDiskPressure, corev1.ConditionTrue, 0))
		}, true},
		"passes a change of maintenance state": {func(n *corev1.Node) { n.Labels = map[string]string{"pitstop.dev/state": "in-maintenance"} }, true},
		"passes the machine annotation":        {func(n *corev1.Node) { n.Annotations = map[string]string{"machine.openshift.io/machine": "ns/m"} }, true},
	} {
		t.Run(name, func(t *testing.T) {
			before, after := base(), base()
			tc.change(after)
			if got := nodeHealthChanged().Update(event.UpdateEvent{ObjectOld: before, ObjectNew: after}); got != tc.want {
				t.Errorf("update passes = %v, want %v", got, tc.want)
			}
		})
	}
}
