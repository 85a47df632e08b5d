package machineapi

import (
	"errors"
	"fmt"
	"strings"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// ErrNoMachine says that no Machine runs a node.
var ErrNoMachine = errors.New("no Machine")

// LinkError says that what ties a node to a Machine or an instance
// disagrees: the Machine's own record says one thing, what the node
// carries says another. pitstop acts on neither.
type LinkError struct {
	// Message names the objects and fields that disagree.
	Message string
}

func (e *LinkError) Error() string { return e.Message }

// IsLinkError says whether err, or one it wraps, is a LinkError.
func IsLinkError(err error) bool {
	var le *LinkError
	return errors.As(err, &le)
}

func disagree(format string, args ...any) *LinkError {
	return &LinkError{Message: fmt.Sprintf(format, args...)}
}

// MachineOfNode picks the Machine that runs node among machines (every
// Machine of the cluster) through the one link the node cannot write: the
// Machine's status.nodeRef, which the Machine's controllers set. What the
// node carries itself (the machine.openshift.io/machine annotation, which
// anyone with nodes/patch may set, and spec.providerID, which the kubelet
// chooses when it registers) only confirms that link; when it contradicts
// it, or two Machines name the node, or the node points at a Machine that
// does not name it, MachineOfNode returns a LinkError. A node that no
// Machine names and that points at none gets ErrNoMachine.
func MachineOfNode(node *corev1.Node, machines []machinev1beta1.Machine) (*machinev1beta1.Machine, error) {
	var named, sameInstance []*machinev1beta1.Machine
	instance := InstanceOfProviderID(node.Spec.ProviderID)
	for i := range machines {
		m := &machines[i]
		if ref := m.Status.NodeRef; ref != nil && ref.Name == node.Name {
			named = append(named, m)
		}
		if instance != "" && InstanceOfProviderID(ptr.Deref(m.Spec.ProviderID, "")) == instance {
			sameInstance = append(sameInstance, m)
		}
	}
	annotated := node.Annotations[AnnotationMachine]
	if len(named) > 1 {
		return nil, disagree("machines %s and %s both name node %s in status.nodeRef", key(named[0]), key(named[1]), node.Name)
	}
	if len(named) == 0 {
		if annotated != "" {
			return nil, disagree("node %s's annotation %s names machine %s, but %s", node.Name, AnnotationMachine, annotated, nodeRefOf(annotated, machines))
		}
		if len(sameInstance) > 0 {
			m := sameInstance[0]
			return nil, disagree("node %s's spec.providerID %q names the instance of machine %s, whose status.nodeRef %s", node.Name, node.Spec.ProviderID, key(m), refText(m))
		}
		return nil, fmt.Errorf("no Machine names node %s in status.nodeRef: %w", node.Name, ErrNoMachine)
	}
	m := named[0]
	if annotated != "" && annotated != key(m) {
		return nil, disagree("node %s's annotation %s names machine %s, but machine %s names the node in status.nodeRef", node.Name, AnnotationMachine, annotated, key(m))
	}
	own := ptr.Deref(m.Spec.ProviderID, "")
	if instance != "" && own != "" && InstanceOfProviderID(own) != instance {
		return nil, disagree("node %s's spec.providerID %q is not machine %s's spec.providerID %q", node.Name, node.Spec.ProviderID, key(m), own)
	}
	for _, other := range sameInstance {
		if other != m {
			return nil, disagree("machines %s and %s both have spec.providerID %q, the instance of node %s", key(m), key(other), node.Spec.ProviderID, node.Name)
		}
	}
	return m, nil
}

// InstanceOfProviderID is the instance a providerID names: its last part
// (i-0123 of aws:///us-east-1a/i-0123), "" when there is none.
func InstanceOfProviderID(id string) string {
	i := strings.LastIndex(id, "/")
	if i < 0 || i == len(id)-1 {
		return ""
	}
	return id[i+1:]
}

// key is a Machine's namespace/name.
func key(m *machinev1beta1.Machine) string { return m.Namespace + "/" + m.Name }

// nodeRefOf says what the Machine named namespace/name says of its node.
func nodeRefOf(name string, machines []machinev1beta1.Machine) string {
	for i := range machines {
		if m := &machines[i]; key(m) == name {
			return "that machine's status.nodeRef " + refText(m)
		}
	}
	return "there is no such machine"
}

// refText is what a Machine's status.nodeRef says, in words.
func refText(m *machinev1beta1.Machine) string {
	if m.Status.NodeRef == nil || m.Status.NodeRef.Name == "" {
		return "is empty"
	}
	return "names node " + m.Status.NodeRef.Name
}
