package machineset

import (
	"fmt"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// controllerKind is the owner reference kind a MachineSet puts on its
// Machines.
var controllerKind = machinev1beta1.GroupVersion.WithKind("MachineSet")

// replicasOf is the number of Machines a MachineSet asks for. The CRD
// defaults spec.replicas to 1, so only a set stored before that default
// existed has none; it gets the default too.
func replicasOf(ms *machinev1beta1.MachineSet) int {
	if ms.Spec.Replicas == nil {
		return 1
	}
	return int(*ms.Spec.Replicas)
}

// validate returns the MachineSet's selector, or an error saying why the
// set cannot be reconciled until a person fixes its spec: every Machine it
// creates from its template must be one it selects, or it would create
// Machines forever.
func validate(ms *machinev1beta1.MachineSet) (labels.Selector, error) {
	if replicasOf(ms) < 0 {
		return nil, fmt.Errorf("spec.replicas is %d; it must not be negative", replicasOf(ms))
	}
	switch ms.Spec.DeletePolicy {
	case "", DeletePolicyRandom, DeletePolicyOldest, DeletePolicyNewest:
	default:
		return nil, fmt.Errorf("spec.deletePolicy %q is not one of %s, %s, %s", ms.Spec.DeletePolicy, DeletePolicyRandom, DeletePolicyOldest, DeletePolicyNewest)
	}
	if len(ms.Spec.Selector.MatchLabels) == 0 && len(ms.Spec.Selector.MatchExpressions) == 0 {
		return nil, fmt.Errorf("spec.selector is empty; it would select every Machine in namespace %s", ms.Namespace)
	}
	selector, err := metav1.LabelSelectorAsSelector(&ms.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("spec.selector: %w", err)
	}
	if !selector.Matches(labels.Set(ms.Spec.Template.Labels)) {
		return nil, fmt.Errorf("spec.selector %s does not match spec.template.metadata.labels %v", selector, labels.Set(ms.Spec.Template.Labels))
	}
	return selector, nil
}

// claims sorts the Machines of a namespace for one MachineSet.
type claims struct {
	// Owned are controlled by the set and match its selector: these are
	// its replicas, including any already being deleted.
	Owned []*machinev1beta1.Machine
	// Adopt have no controller, match the selector and are not being
	// deleted: the set takes them.
	Adopt []*machinev1beta1.Machine
	// Release are controlled by the set but no longer match its selector:
	// the set lets them go.
	Release []*machinev1beta1.Machine
}

// claim sorts machines for ms, as the ReplicaSet controller sorts pods.
// Machines another controller owns are left out: the set never touches
// them. So are Machines being deleted that the set does not count: there
// is no point adopting or releasing them.
func claim(ms *machinev1beta1.MachineSet, selector labels.Selector, machines []machinev1beta1.Machine) claims {
	var c claims
	for i := range machines {
		m := &machines[i]
		matches := selector.Matches(labels.Set(m.Labels))
		deleting := !m.DeletionTimestamp.IsZero()
		owner := metav1.GetControllerOf(m)
		switch {
		case owner == nil && matches && !deleting:
			c.Adopt = append(c.Adopt, m)
		case owner == nil || owner.UID != ms.UID:
		case matches:
			c.Owned = append(c.Owned, m)
		case !deleting:
			c.Release = append(c.Release, m)
		}
	}
	return c
}

// newMachine returns the Machine a MachineSet creates from its template.
func newMachine(ms *machinev1beta1.MachineSet) *machinev1beta1.Machine {
	t := ms.Spec.Template.DeepCopy()
	return &machinev1beta1.Machine{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    ms.Name + "-",
			Namespace:       ms.Namespace,
			Labels:          t.Labels,
			Annotations:     t.Annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ms, controllerKind)},
		},
		Spec: t.Spec,
	}
}
