package machineapi_test

import (
	"errors"
	"strings"
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/pitstop-dev/pitstop/internal/machineapi"
)

// machine is a Machine ns/name with an instance and the node its
// status.nodeRef names ("" for none).
func machine(name, instance, node string) machinev1beta1.Machine {
	m := machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	if instance != "" {
		m.Spec.ProviderID = ptr.To("aws:///us-east-1a/" + instance)
	}
	if node != "" {
		m.Status.NodeRef = &corev1.ObjectReference{Kind: "Node", Name: node}
	}
	return m
}

// node is a Node with an instance and the Machine its annotation names
// ("" for none).
func node(name, instance, annotated string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if instance != "" {
		n.Spec.ProviderID = "aws:///us-east-1a/" + instance
	}
	if annotated != "" {
		n.Annotations = map[string]string{machineapi.AnnotationMachine: annotated}
	}
	return n
}

func TestMachineOfNode(t *testing.T) {
	a, b := machine("a", "i-a", "node-a"), machine("b", "i-b", "node-b")
	tests := []struct {
		name     string
		node     *corev1.Node
		machines []machinev1beta1.Machine
		want     string // the Machine's name, or "" for none
		noMach   bool   // ErrNoMachine
		refused  string // a LinkError containing this
	}{
		{name: "finds the machine whose nodeRef names the node, all links agreeing",
			node: node("node-a", "i-a", "ns/a"), machines: []machinev1beta1.Machine{a, b}, want: "a"},
		{name: "finds it without the annotation, which only confirms",
			node: node("node-a", "i-a", ""), machines: []machinev1beta1.Machine{a, b}, want: "a"},
		{name: "finds it when the node has no providerID yet",
			node: node("node-a", "", ""), machines: []machinev1beta1.Machine{a, b}, want: "a"},
		{name: "a node no machine names and that points at none has no machine",
			node: node("lone", "i-c", ""), machines: []machinev1beta1.Machine{a, b}, noMach: true},
		{name: "refuses an annotation naming another machine",
			node: node("node-b", "i-b", "ns/a"), machines: []machinev1beta1.Machine{a, b},
			refused: "node node-b's annotation machine.openshift.io/machine names machine ns/a, but machine ns/b names the node in status.nodeRef"},
		{name: "refuses an annotation on a node no machine names",
			node: node("lone", "", "ns/a"), machines: []machinev1beta1.Machine{a, b},
			refused: "names machine ns/a, but that machine's status.nodeRef names node node-a"},
		{name: "refuses an annotation naming a machine that does not exist",
			node: node("lone", "", "ns/zz"), machines: []machinev1beta1.Machine{a},
			refused: "there is no such machine"},
		{name: "refuses a providerID that is not the machine's",
			node: node("node-b", "i-a", ""), machines: []machinev1beta1.Machine{a, b},
			refused: `node node-b's spec.providerID "aws:///us-east-1a/i-a" is not machine ns/b's spec.providerID "aws:///us-east-1a/i-b"`},
		{name: "refuses a providerID naming another machine's instance on a node without a machine",
			node: node("lone", "i-a", ""), machines: []machinev1beta1.Machine{a, b},
			refused: `node lone's spec.providerID "aws:///us-east-1a/i-a" names the instance of machine ns/a, whose status.nodeRef names node node-a`},
		{name: "refuses two machines naming the node",
			node: node("node-a", "i-a", ""), machines: []machinev1beta1.Machine{a, machine("a2", "i-a2", "node-a")},
			refused: "machines ns/a and ns/a2 both name node node-a in status.nodeRef"},
		{name: "refuses two machines with the node's instance",
			node: node("node-a", "i-a", ""), machines: []machinev1beta1.Machine{a, machine("a2", "i-a", "")},
			refused: "machines ns/a and ns/a2 both have spec.providerID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := machineapi.MachineOfNode(tt.node, tt.machines)
			switch {
			case tt.refused != "":
				if !machineapi.IsLinkError(err) || !strings.Contains(err.Error(), tt.refused) {
					t.Fatalf("got %v, %v; want a LinkError saying %q", m, err, tt.refused)
				}
			case tt.noMach:
				if !errors.Is(err, machineapi.ErrNoMachine) || machineapi.IsLinkError(err) {
					t.Fatalf("got %v, %v; want ErrNoMachine", m, err)
				}
			default:
				if err != nil || m == nil || m.Name != tt.want {
					t.Fatalf("got %v, %v; want machine %s", m, err, tt.want)
				}
			}
		})
	}
}
