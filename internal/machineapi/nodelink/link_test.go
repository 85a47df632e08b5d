package nodelink

import (
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pitstop-dev/pitstop/internal/machineapi"
)

func TestLinkedNode(t *testing.T) {
	noSchedule := func(key, value string) corev1.Taint {
		return corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffectNoSchedule}
	}
	tests := []struct {
		name        string
		node        corev1.Node
		machine     machinev1beta1.MachineSpec
		wantLabels  map[string]string
		wantAnnots  map[string]string
		wantTaints  []corev1.Taint
		taintsAdded bool
	}{
		{
			name:       "annotates a bare node with its machine and nothing else",
			wantAnnots: map[string]string{machineapi.AnnotationMachine: "ns/m"},
		},
		{
			name: "copies the machine's labels and annotations and keeps the node's own",
			node: corev1.Node{ObjectMeta: metav1.ObjectMeta{
				Labels:      map[string]string{"own": "1"},
				Annotations: map[string]string{"own": "1"},
			}},
			machine: machinev1beta1.MachineSpec{ObjectMeta: machinev1beta1.ObjectMeta{
				Labels:      map[string]string{"role": "db"},
				Annotations: map[string]string{"note": "x"},
			}},
			wantLabels: map[string]string{"own": "1", "role": "db"},
			wantAnnots: map[string]string{"own": "1", "note": "x", machineapi.AnnotationMachine: "ns/m"},
		},
		{
			name:       "gives the machine's value to a label both have",
			node:       corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"role": "web"}}},
			machine:    machinev1beta1.MachineSpec{ObjectMeta: machinev1beta1.ObjectMeta{Labels: map[string]string{"role": "db"}}},
			wantLabels: map[string]string{"role": "db"},
			wantAnnots: map[string]string{machineapi.AnnotationMachine: "ns/m"},
		},
		{
			name: "keeps the link annotation the machine's annotations would override",
			machine: machinev1beta1.MachineSpec{ObjectMeta: machinev1beta1.ObjectMeta{
				Annotations: map[string]string{machineapi.AnnotationMachine: "elsewhere/other"},
			}},
			wantAnnots: map[string]string{machineapi.AnnotationMachine: "ns/m"},
		},
		{
			name:        "appends the machine's taints after the node's",
			node:        corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{noSchedule("own", "")}}},
			machine:     machinev1beta1.MachineSpec{Taints: []corev1.Taint{noSchedule("dedicated", "db")}},
			wantAnnots:  map[string]string{machineapi.AnnotationMachine: "ns/m"},
			wantTaints:  []corev1.Taint{noSchedule("own", ""), noSchedule("dedicated", "db")},
			taintsAdded: true,
		},
		{
			name:       "keeps the node's value of a taint with the same key and effect",
			node:       corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{noSchedule("dedicated", "web")}}},
			machine:    machinev1beta1.MachineSpec{Taints: []corev1.Taint{noSchedule("dedicated", "db")}},
			wantAnnots: map[string]string{machineapi.AnnotationMachine: "ns/m"},
			wantTaints: []corev1.Taint{noSchedule("dedicated", "web")},
		},
		{
			name: "adds a taint whose key the node has with another effect",
			node: corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{noSchedule("dedicated", "db")}}},
			machine: machinev1beta1.MachineSpec{Taints: []corev1.Taint{
				{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoExecute},
			}},
			wantAnnots: map[string]string{machineapi.AnnotationMachine: "ns/m"},
			wantTaints: []corev1.Taint{
				noSchedule("dedicated", "db"),
				{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoExecute},
			},
			taintsAdded: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := tt.node.DeepCopy()
			node.Name = "n"
			before := node.DeepCopy()
			m := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m"}, Spec: tt.machine}
			got, taintsAdded := linkedNode(node, m)
			if !equality.Semantic.DeepEqual(got.Labels, tt.wantLabels) {
				t.Errorf("labels %v, want %v", got.Labels, tt.wantLabels)
			}
			if !equality.Semantic.DeepEqual(got.Annotations, tt.wantAnnots) {
				t.Errorf("annotations %v, want %v", got.Annotations, tt.wantAnnots)
			}
			if !equality.Semantic.DeepEqual(got.Spec.Taints, tt.wantTaints) || taintsAdded != tt.taintsAdded {
				t.Errorf("taints %v (added %v), want %v (added %v)", got.Spec.Taints, taintsAdded, tt.wantTaints, tt.taintsAdded)
			}
			if !equality.Semantic.DeepEqual(node, before) {
				t.Errorf("linkedNode changed its input: %+v", node)
			}
			if again, added := linkedNode(got, m); nodeChanged(got, again) || added {
				t.Errorf("a linked node changes when linked again: %+v", again)
			}
		})
	}
}

func TestNodeChanged(t *testing.T) {
	base := corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "1"}}}
	tests := []struct {
		name   string
		change func(*corev1.Node)
		want   bool
	}{
		{name: "sees no change in an identical node", change: func(*corev1.Node) {}},
		{name: "sees no change in an empty map that was nil", change: func(n *corev1.Node) { n.Annotations = map[string]string{} }},
		{name: "sees a new label", change: func(n *corev1.Node) { n.Labels["b"] = "2" }, want: true},
		{name: "sees a new annotation", change: func(n *corev1.Node) { n.Annotations = map[string]string{"b": "2"} }, want: true},
		{name: "sees a new taint", change: func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{{Key: "t", Effect: corev1.TaintEffectNoSchedule}} }, want: true},
		{name: "ignores status", change: func(n *corev1.Node) { n.Status.Phase = corev1.NodeRunning }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			after := base.DeepCopy()
			tt.change(after)
			if got := nodeChanged(&base, after); got != tt.want {
				t.Errorf("nodeChanged = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestIsLinkedTo(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", UID: types.UID("uid-1")}}
	tests := []struct {
		name string
		ref  *corev1.ObjectReference
		want bool
	}{
		{name: "is not linked without a nodeRef"},
		{name: "is linked when the nodeRef names the node and its UID", ref: nodeRef(node), want: true},
		{name: "is not linked to a node of the same name registered again", ref: &corev1.ObjectReference{Kind: "Node", Name: "n", UID: "uid-0"}},
		{name: "is not linked to another node", ref: &corev1.ObjectReference{Kind: "Node", Name: "other", UID: "uid-1"}},
		{name: "is not linked by a reference of another kind", ref: &corev1.ObjectReference{Kind: "Pod", Name: "n", UID: "uid-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &machinev1beta1.Machine{Status: machinev1beta1.MachineStatus{NodeRef: tt.ref}}
			if got := isLinkedTo(m, node); got != tt.want {
				t.Errorf("isLinkedTo = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestNames(t *testing.T) {
	var machines []*machinev1beta1.Machine
	for _, n := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		machines = append(machines, machine(n, ""))
	}
	tests := []struct {
		name string
		n    int
		want string
	}{
		{name: "names one object alone", n: 1, want: "ns/a"},
		{name: "joins two with and", n: 2, want: "ns/a and ns/b"},
		{name: "lists three with commas and a final and", n: 3, want: "ns/a, ns/b and ns/c"},
		{name: "names at most five and counts the rest", n: 7, want: "ns/a, ns/b, ns/c, ns/d, ns/e and 2 more"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := names(machines[:tt.n]); got != tt.want {
				t.Errorf("names = %q, want %q", got, tt.want)
			}
		})
	}
}
