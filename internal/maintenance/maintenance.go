// Package maintenance is the contract of a NodeMaintenance for the code
// that asks for one: the profile engine's drain and restore triggers, the
// Machine controller and the medik8s bridge. It names the objects, builds a
// profile's, reads how far one has got and whether its node is restored,
// and holds what every requester needs to know of nodes: whether a node
// runs the control plane and whether its maintenance would break the
// control plane's quorum (quorum.go, which the NodeMaintenance controller
// and every admission webhook ask), and the cache index of pods by node.
// It also names the MachineMaintenance of a cloud event. The
// NodeMaintenance controller does the work; this package is how the others
// talk to it.
package maintenance

import (
	"context"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/nodeview"
)

// Name prefixes, one per kind of requester.
const (
	PrefixProfile = "profile-"
	PrefixMachine = "machine-"
	PrefixMedik8s = "medik8s-"
	// PrefixKubevirt is followed by "<namespace>.<name>" of a
	// kubevirt.io/v1alpha3 NodeMaintenance: a namespace has no dot, so the
	// two never mix.
	PrefixKubevirt = "kubevirt-"
	// PrefixESX is followed by the node's name: the drain before its VM
	// is shut down for its ESX host's maintenance.
	PrefixESX = "esx-"
	// PrefixKubernikus is followed by the node's name: the drain before
	// its server is deleted (cloud.sap/delete-node).
	PrefixKubernikus = "kubernikus-"
)

// Name is the name of a NodeMaintenance made by a requester (prefix) for
// name, a node's or another object's: prefix+name or, when that is longer
// than an object name may be, a cut of it followed by a hash of the whole
// name, so that two long names stay apart.
func Name(prefix, name string) string {
	full := prefix + name
	if len(full) <= validation.DNS1123SubdomainMaxLength {
		return full
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	suffix := fmt.Sprintf("-%08x", h.Sum32())
	// Each dot-separated part of a name must end with a letter or digit.
	head := strings.TrimRight(full[:validation.DNS1123SubdomainMaxLength-len(suffix)], ".-")
	return head + suffix
}

// ForProfile is the name of the NodeMaintenance a profile's drain creates
// for a node; every profile shares it, since a node drains once at a time.
func ForProfile(node string) string { return Name(PrefixProfile, node) }

// ForMachine is the name of the NodeMaintenance of a Machine's drain, after
// its node (one maintenance per node).
func ForMachine(node string) string { return Name(PrefixMachine, node) }

// NewForProfile is the NodeMaintenance a profile's drain trigger creates.
func NewForProfile(node, profile string, drain pitstopv1alpha1.DrainSpec) *pitstopv1alpha1.NodeMaintenance {
	return &pitstopv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: ForProfile(node), Labels: map[string]string{pitstopv1alpha1.LabelProfile: profile}},
		Spec: pitstopv1alpha1.NodeMaintenanceSpec{
			NodeName: node,
			Reason:   "maintenance profile " + profile,
			Drain:    drain,
		},
	}
}

// NewCordonForProfile is the NodeMaintenance a profile's cordon trigger
// creates: the drain trigger's, with the drain skipped
// (AnnotationExcludeNodeDraining), which a drain trigger takes off.
func NewCordonForProfile(node, profile string) *pitstopv1alpha1.NodeMaintenance {
	nm := NewForProfile(node, profile, pitstopv1alpha1.DrainSpec{})
	nm.Annotations = map[string]string{pitstopv1alpha1.AnnotationExcludeNodeDraining: "cordon trigger"}
	return nm
}

// SeedDrain is the drain of the maintenance-controller's ESX and
// Kubernikus integrations in pitstop's terms: every pod but DaemonSet and
// mirror pods (those no controller owns too), a refused eviction asked
// again every period, after timeout (none when zero) the drain fails, and
// with force pods still terminating past their grace period are deleted
// without grace.
func SeedDrain(period, timeout time.Duration, force bool) pitstopv1alpha1.DrainSpec {
	spec := pitstopv1alpha1.DrainSpec{
		PodEvictionRetryInterval: &pitstopv1alpha1.Duration{Duration: period},
		UnmanagedPods:            pitstopv1alpha1.UnmanagedPodsDelete,
		OnTimeout:                pitstopv1alpha1.DrainTimeoutFail,
		ForceDeleteTerminating:   force,
	}
	if timeout > 0 {
		spec.Timeout = &pitstopv1alpha1.Duration{Duration: timeout}
	}
	return spec
}

// Progress says whether nm's node is cordoned and drained (Ready) and, if
// not, what it waits for; a failed maintenance is an error.
func Progress(nm *pitstopv1alpha1.NodeMaintenance) (done bool, status string, err error) {
	ready := meta.FindStatusCondition(nm.Status.Conditions, pitstopv1alpha1.ConditionReady)
	if ready != nil && ready.Status == metav1.ConditionTrue {
		return true, "", nil
	}
	if ready != nil && ready.Reason == pitstopv1alpha1.ReasonFailed {
		return false, "", fmt.Errorf("NodeMaintenance %s failed: %s", nm.Name, ready.Message)
	}
	status = "waiting for the drain (NodeMaintenance " + nm.Name + ")"
	if ready != nil {
		status += ": " + ready.Message
	}
	return false, status, nil
}

// Going says why a new drain waits for nm, the NodeMaintenance of the
// node's last maintenance, being deleted: the restore let the node out once
// the node was restored, and the object goes a moment later. Its status is
// the last maintenance's (Ready, drained), so it must never count as the
// new drain's.
func Going(nm *pitstopv1alpha1.NodeMaintenance) string {
	return "waiting for NodeMaintenance " + nm.Name + " of the last maintenance to be gone"
}

// Restored says whether the node's NodeMaintenance nm, being deleted, has
// put the node back, so that the node may leave maintenance before the
// object is gone; a nil nm (gone) has. The NodeMaintenance controller
// restores the node in one write (the cordon, its taints and label, and the
// record of the cordon, AnnotationCordonedBefore, go together) and only
// then lets the object go: leaving at that write rather than at the
// object's end takes the removal of its finalizer off the way between one
// node's maintenance and the next's.
//
// The node must be as read with its record saying it is in maintenance
// (from): that version of the node was written after the drain was done,
// so after the cordon, and a node without the record of the cordon in it
// has been restored. A node leaving an earlier state (a drain given up)
// may be read from before the cordon; it waits for the object to be gone.
// So does a node another NodeMaintenance holds, which keeps the cordon.
func Restored(nm *pitstopv1alpha1.NodeMaintenance, node *corev1.Node, from pitstopv1alpha1.MaintenanceState) bool {
	if nm == nil {
		return true
	}
	if nm.DeletionTimestamp.IsZero() || from != pitstopv1alpha1.StateInMaintenance {
		return false
	}
	if _, cordoned := node.Annotations[pitstopv1alpha1.AnnotationCordonedBefore]; cordoned {
		return false
	}
	return !nodeview.HasTaint(node, pitstopv1alpha1.TaintDrain)
}

// Control-plane role labels: the current one, and the one older clusters
// (and OpenShift) still set.
const (
	LabelControlPlane = "node-role.kubernetes.io/control-plane"
	LabelMaster       = "node-role.kubernetes.io/master"
)

// MachineMaintenanceName is the MachineMaintenance of a cloud instance's
// scheduled event.
func MachineMaintenanceName(instanceID, eventID string) string {
	return Name(strings.ToLower(instanceID)+"-", strings.ToLower(eventID))
}

// IsControlPlane says whether a node runs the control plane, by either
// role label. Control-plane nodes are drained one at a time, and never
// below quorum.
func IsControlPlane(node *corev1.Node) bool {
	_, cp := node.Labels[LabelControlPlane]
	_, master := node.Labels[LabelMaster]
	return cp || master
}

// Ensure returns the NodeMaintenance named like want, creating want when
// there is none (created says so). It returns nil while one of that name
// is being deleted (an earlier maintenance's, whose status must not count
// as this one's) or when a create raced another writer's: the caller
// looks again later.
func Ensure(ctx context.Context, c client.Client, want *pitstopv1alpha1.NodeMaintenance) (nm *pitstopv1alpha1.NodeMaintenance, created bool, err error) {
	nm = &pitstopv1alpha1.NodeMaintenance{}
	err = c.Get(ctx, client.ObjectKey{Name: want.Name}, nm)
	switch {
	case err == nil && !nm.DeletionTimestamp.IsZero():
		return nil, false, nil
	case err == nil:
		return nm, false, nil
	case !apierrors.IsNotFound(err):
		return nil, false, err
	}
	if err := c.Create(ctx, want); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("creating NodeMaintenance %s: %w", want.Name, err)
	}
	return want, true, nil
}
