package check

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

const (
	operational = pitstopv1alpha1.StateOperational
	required    = pitstopv1alpha1.StateMaintenanceRequired
	inMaint     = pitstopv1alpha1.StateInMaintenance
)

// fakeCluster is a Cluster served from slices: the nodes, each profile's
// nodes with their state in it, and pods by node.
type fakeCluster struct {
	nodes  []corev1.Node
	states map[string]map[string]pitstopv1alpha1.MaintenanceState // profile → node → state
	pods   map[string][]corev1.Pod
}

func cluster(nodes ...corev1.Node) *fakeCluster {
	return &fakeCluster{nodes: nodes, states: map[string]map[string]pitstopv1alpha1.MaintenanceState{}, pods: map[string][]corev1.Pod{}}
}

// with puts the named nodes in state for profile (which selects them).
func (f *fakeCluster) with(profile string, state pitstopv1alpha1.MaintenanceState, names ...string) *fakeCluster {
	if f.states[profile] == nil {
		f.states[profile] = map[string]pitstopv1alpha1.MaintenanceState{}
	}
	for _, n := range names {
		f.states[profile][n] = state
	}
	return f
}

// withPods binds pods to a node.
func (f *fakeCluster) withPods(node string, pods ...corev1.Pod) *fakeCluster {
	f.pods[node] = append(f.pods[node], pods...)
	return f
}

func (f *fakeCluster) Nodes() []*corev1.Node {
	out := make([]*corev1.Node, len(f.nodes))
	for i := range f.nodes {
		out[i] = f.nodes[i].DeepCopy()
	}
	return out
}

func (f *fakeCluster) ProfileNodes(profile string) []*corev1.Node {
	var selected []*corev1.Node
	for i := range f.nodes {
		if _, ok := f.states[profile][f.nodes[i].Name]; ok {
			selected = append(selected, &f.nodes[i])
		}
	}
	return selected
}

func (f *fakeCluster) StateOf(node *corev1.Node, profile string) (pitstopv1alpha1.MaintenanceState, bool) {
	anywhere := false
	for _, states := range f.states {
		anywhere = anywhere || states[node.Name] == inMaint
	}
	return f.states[profile][node.Name], anywhere
}

func (f *fakeCluster) PodsOn(node string) []corev1.Pod { return f.pods[node] }

// entriesCluster is a fakeCluster that knows entry times.
type entriesCluster struct {
	*fakeCluster
	entries map[string][]time.Time
}

func (e entriesCluster) EnteredMaintenance(profile string) []time.Time {
	return slices.Clone(e.entries[profile])
}

// node builds a node with labels given as key, value pairs.
func node(name string, labels ...string) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}, Annotations: map[string]string{}}}
	for i := 0; i+1 < len(labels); i += 2 {
		n.Labels[labels[i]] = labels[i+1]
	}
	return n
}

// nodeOf returns a pointer to the named node of the cluster, as the
// controller gives the node under evaluation.
func (f *fakeCluster) nodeOf(name string) *corev1.Node {
	for i := range f.nodes {
		if f.nodes[i].Name == name {
			return &f.nodes[i]
		}
	}
	panic("no node " + name)
}

// noon is the default instant of evaluations: Wednesday 2026-06-10 12:00 UTC.
var noon = time.Date(2026, time.June, 10, 12, 0, 0, 0, time.UTC)

// evalCase is one row of a check table: an instance, the context it is
// evaluated in, and the result wanted.
type evalCase struct {
	inst pitstopv1alpha1.CheckInstance
	ctx  Context
	want Result
}

// runCases builds each case's check with New and compares its result.
func runCases(t *testing.T, cases map[string]evalCase) {
	t.Helper()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, err := New(tc.inst, Deps{Prometheus: fixedPrometheus{}})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			got, err := c.Evaluate(context.Background(), tc.ctx)
			if err != nil {
				t.Fatalf("Evaluate: %v", err)
			}
			assertResult(t, got, tc.want)
		})
	}
}

func assertResult(t *testing.T, got, want Result) {
	t.Helper()
	if got.Passed != want.Passed || got.Reason != want.Reason || !got.NextChange.Equal(want.NextChange) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

// assertQueried asserts a prometheusInstant check's result, which is
// looked at again prometheusRecheck after now.
func assertQueried(t *testing.T, got, want Result, now time.Time) {
	t.Helper()
	want.NextChange = now.Add(prometheusRecheck)
	assertResult(t, got, want)
}

// fixedPrometheus answers every query with the value or error it holds.
type fixedPrometheus struct {
	value float64
	err   error
}

func (f fixedPrometheus) Query(context.Context, string, Credentials, string, time.Time) (float64, error) {
	return f.value, f.err
}

func duration(d time.Duration) pitstopv1alpha1.Duration { return pitstopv1alpha1.Duration{Duration: d} }
