// Package trigger holds the trigger plugins of maintenance profiles: what a
// transition does to a node. alterLabel, alterAnnotation and alterFinalizer
// change the node's copy that the reconciler writes back in one patch;
// drain and restore create and delete the node's NodeMaintenance, the one
// drainer, and never cordon or evict themselves. A trigger reports whether
// it is done; a transition changes the state only once all its triggers
// are, so a drain is waited for without blocking.
//
// +kubebuilder:rbac:groups=pitstop.dev,resources=nodemaintenances,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=pitstop.dev,resources=machinemaintenances,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=pitstop.dev,resources=machinemaintenances/status,verbs=patch
// +kubebuilder:rbac:groups=machine.openshift.io,resources=machines,verbs=get;list;watch
package trigger

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/maintenance"
)

// Context is what a trigger acts on.
type Context struct {
	// Node is the reconciler's copy of the node: alter triggers change it,
	// the reconciler patches it once.
	Node *corev1.Node
	// Profile is the profile whose transition runs the trigger.
	Profile string
	// From is the state the transition leaves, as the record on Node says.
	From pitstopv1alpha1.MaintenanceState
	// Since is when the node entered From.
	Since time.Time
	// Now is the instant of the evaluation.
	Now time.Time
	// Namespace is pitstop's: it holds the MachineMaintenances of nodes
	// without a Machine.
	Namespace string
	// Client creates and deletes NodeMaintenances and requests actions on
	// MachineMaintenances.
	Client client.Client
	// Reader reads from the API server what must not be taken from a
	// cache that may lag: that no NodeMaintenance holds a node about to
	// be uncordoned. Nil: Client.
	Reader client.Reader
}

// Trigger is one configured trigger plugin.
type Trigger interface {
	// Run does the trigger's part; done is false while it waits for
	// something (a drain), with status saying what.
	Run(ctx context.Context, c Context) (done bool, status string, err error)
}

// Watched is a trigger whose progress shows in objects of one kind that the
// engine watches: while it waits, a change of them (a NodeMaintenance's
// Ready condition or deletion, a MachineMaintenance's action step) wakes
// its node, so the engine need not poll it.
type Watched interface {
	// WaitsOn names the kind of object the trigger waits on.
	WaitsOn() string
}

// Kinds of object Watched triggers wait on.
const (
	WaitsOnNodeMaintenance    = "NodeMaintenance"
	WaitsOnMachineMaintenance = "MachineMaintenance"
)

// WaitsOn implements Watched: its NodeMaintenance's Ready condition.
func (drainTrigger) WaitsOn() string { return WaitsOnNodeMaintenance }

// WaitsOn implements Watched: its NodeMaintenance's Ready condition.
func (cordonTrigger) WaitsOn() string { return WaitsOnNodeMaintenance }

// WaitsOn implements Watched: its NodeMaintenance's deletion and the node
// it restores.
func (restoreTrigger) WaitsOn() string { return WaitsOnNodeMaintenance }

// New builds the configured plugin. It refuses a key or value the API
// server would refuse on the node (the one patch that carries every
// profile's writes would fail for all of them), and a key in pitstop's own
// domain, which holds the records pitstop's safety rests on (the cordon
// record, the state).
func New(inst pitstopv1alpha1.TriggerInstance) (Trigger, error) {
	switch {
	case inst.AlterLabel != nil:
		if err := validateAlter("alterLabel", *inst.AlterLabel, validation.IsValidLabelValue); err != nil {
			return nil, err
		}
		return alter{kind: "label", spec: *inst.AlterLabel}, nil
	case inst.AlterAnnotation != nil:
		if err := validateAlter("alterAnnotation", *inst.AlterAnnotation, nil); err != nil {
			return nil, err
		}
		return alter{kind: "annotation", spec: *inst.AlterAnnotation}, nil
	case inst.AlterFinalizer != nil:
		if err := validateKey("alterFinalizer.key", inst.AlterFinalizer.Key); err != nil {
			return nil, err
		}
		return finalizer{spec: *inst.AlterFinalizer}, nil
	case inst.Cordon != nil:
		return cordonTrigger{}, nil
	case inst.Drain != nil:
		return drainTrigger{spec: *inst.Drain}, nil
	case inst.Restore != nil:
		return restoreTrigger{spec: *inst.Restore}, nil
	case inst.ReplaceMachine != nil:
		return replaceMachineTrigger{spec: *inst.ReplaceMachine}, nil
	case inst.RebootInstance != nil:
		return rebootInstanceTrigger{spec: *inst.RebootInstance}, nil
	case inst.AlterHypervisor != nil:
		return newAlterHypervisor(inst.AlterHypervisor)
	}
	return nil, fmt.Errorf("trigger %s: no plugin set", inst.Name)
}

// validateAlter checks an alterLabel or alterAnnotation: its key, and its
// value with validValue (nil: any value).
func validateAlter(field string, spec pitstopv1alpha1.AlterTrigger, validValue func(string) []string) error {
	if err := validateKey(field+".key", spec.Key); err != nil {
		return err
	}
	if spec.Remove || spec.Value == nil || validValue == nil {
		return nil
	}
	if errs := validValue(*spec.Value); len(errs) > 0 {
		return fmt.Errorf("%s.value %q: %s", field, *spec.Value, strings.Join(errs, "; "))
	}
	return nil
}

// validateKey refuses a key the API server would refuse on a node,
// pitstop's own keys, and the keys of Kubernetes itself.
func validateKey(field, key string) error {
	if errs := validation.IsQualifiedName(key); len(errs) > 0 {
		return fmt.Errorf("%s %q: %s", field, key, strings.Join(errs, "; "))
	}
	domain, _, hasDomain := strings.Cut(key, "/")
	if !hasDomain {
		return nil
	}
	if inDomain(domain, pitstopv1alpha1.GroupVersion.Group) {
		return fmt.Errorf("%s %q: keys of %s are pitstop's own records (the cordon, the state), which no trigger may write", field, key, domain)
	}
	for _, reserved := range kubernetesDomains {
		if inDomain(domain, reserved) {
			return fmt.Errorf("%s %q: keys under %s belong to Kubernetes (node roles, the node-restriction labels only the node's kubelet or an administrator may set, well-known labels that the scheduler, load balancers and the NodeRestriction admission plugin act on), which no trigger may write", field, key, reserved)
		}
	}
	return nil
}

// kubernetesDomains are the prefixes Kubernetes reserves for its own
// labels, annotations and finalizers, subdomains included
// (node.kubernetes.io, node-role.kubernetes.io,
// node-restriction.kubernetes.io). A profile is written by whoever may
// write MaintenanceProfiles; writing these keys on a node would let them
// change what the node is (its role, the workloads a node-restriction
// label admits, whether load balancers send it traffic), which is more
// than maintenance.
var kubernetesDomains = []string{"kubernetes.io", "k8s.io"}

// inDomain says whether domain is parent or one of its subdomains.
func inDomain(domain, parent string) bool {
	domain = strings.ToLower(domain)
	return domain == parent || strings.HasSuffix(domain, "."+parent)
}

// alter sets or removes a label or annotation.
type alter struct {
	kind string
	spec pitstopv1alpha1.AlterTrigger
}

func (a alter) Run(_ context.Context, c Context) (bool, string, error) {
	m := &c.Node.Labels
	if a.kind == "annotation" {
		m = &c.Node.Annotations
	}
	if a.spec.Remove {
		delete(*m, a.spec.Key)
		return true, "", nil
	}
	if *m == nil {
		*m = map[string]string{}
	}
	(*m)[a.spec.Key] = *a.spec.Value
	return true, "", nil
}

// finalizer adds or removes a node finalizer.
type finalizer struct {
	spec pitstopv1alpha1.AlterFinalizerTrigger
}

func (f finalizer) Run(_ context.Context, c Context) (bool, string, error) {
	if f.spec.Remove {
		controllerutil.RemoveFinalizer(c.Node, f.spec.Key)
	} else {
		controllerutil.AddFinalizer(c.Node, f.spec.Key)
	}
	return true, "", nil
}

// drainTrigger creates the node's NodeMaintenance and is done once it is
// Ready (cordoned and drained).
type drainTrigger struct{ spec pitstopv1alpha1.DrainTrigger }

func (d drainTrigger) Run(ctx context.Context, c Context) (bool, string, error) {
	nm := &pitstopv1alpha1.NodeMaintenance{}
	err := c.Client.Get(ctx, client.ObjectKey{Name: maintenance.ForProfile(c.Node.Name)}, nm)
	if apierrors.IsNotFound(err) {
		nm = maintenance.NewForProfile(c.Node.Name, c.Profile, d.spec.Drain)
		if err := c.Client.Create(ctx, nm); err != nil {
			return false, "", fmt.Errorf("creating NodeMaintenance %s: %w", nm.Name, err)
		}
		return false, "NodeMaintenance " + nm.Name + " created", nil
	}
	if err != nil {
		return false, "", fmt.Errorf("reading NodeMaintenance %s: %w", maintenance.ForProfile(c.Node.Name), err)
	}
	if !nm.DeletionTimestamp.IsZero() {
		return false, maintenance.Going(nm), nil
	}
	if madeByCordon(nm) {
		// A cordon trigger's: it drains from now on, as this trigger says.
		before := nm.DeepCopy()
		delete(nm.Annotations, pitstopv1alpha1.AnnotationExcludeNodeDraining)
		nm.Spec.Drain = d.spec.Drain
		if err := c.Client.Patch(ctx, nm, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return false, "", fmt.Errorf("draining the cordoned node through NodeMaintenance %s: %w", nm.Name, err)
		}
		return false, "NodeMaintenance " + nm.Name + " drains the cordoned node", nil
	}
	if drainSkippedBefore(nm, c.Node) {
		return false, drainingCordoned(nm), nil
	}
	return maintenance.Progress(nm)
}

// madeByCordon says nm is a cordon trigger's: a profile's, with the drain
// skipped.
func madeByCordon(nm *pitstopv1alpha1.NodeMaintenance) bool {
	_, cordonOnly := nm.Annotations[pitstopv1alpha1.AnnotationExcludeNodeDraining]
	return cordonOnly && nm.Labels[pitstopv1alpha1.LabelProfile] != ""
}

// drainingCordoned is what a drain trigger waits for while nm, a cordon
// trigger's, has not started draining.
func drainingCordoned(nm *pitstopv1alpha1.NodeMaintenance) string {
	return "waiting for NodeMaintenance " + nm.Name + " to drain the cordoned node"
}

// drainSkippedBefore says nm's status still reports the drain a cordon
// trigger skipped, though nothing asks to skip it any more: the
// NodeMaintenance controller has not seen the change yet, and its Ready is
// the cordon's, not the drain's.
func drainSkippedBefore(nm *pitstopv1alpha1.NodeMaintenance, node *corev1.Node) bool {
	c := meta.FindStatusCondition(nm.Status.Conditions, pitstopv1alpha1.ConditionDrained)
	_, onNM := nm.Annotations[pitstopv1alpha1.AnnotationExcludeNodeDraining]
	_, onNode := node.Annotations[pitstopv1alpha1.AnnotationExcludeNodeDraining]
	return c != nil && c.Reason == pitstopv1alpha1.ReasonDrainSkipped && !onNM && !onNode
}

// cordonTrigger creates the node's NodeMaintenance with the drain skipped
// and is done once it is Ready (cordoned). A NodeMaintenance that exists
// already (a drain's, a user's) cordons the node too: the trigger waits for
// it to be Ready, and changes nothing.
type cordonTrigger struct{}

func (cordonTrigger) Run(ctx context.Context, c Context) (bool, string, error) {
	nm := &pitstopv1alpha1.NodeMaintenance{}
	err := c.Client.Get(ctx, client.ObjectKey{Name: maintenance.ForProfile(c.Node.Name)}, nm)
	if apierrors.IsNotFound(err) {
		nm = maintenance.NewCordonForProfile(c.Node.Name, c.Profile)
		if err := c.Client.Create(ctx, nm); err != nil {
			return false, "", fmt.Errorf("creating NodeMaintenance %s: %w", nm.Name, err)
		}
		return false, "NodeMaintenance " + nm.Name + " created to cordon the node", nil
	}
	if err != nil {
		return false, "", fmt.Errorf("reading NodeMaintenance %s: %w", maintenance.ForProfile(c.Node.Name), err)
	}
	if !nm.DeletionTimestamp.IsZero() {
		return false, maintenance.Going(nm), nil
	}
	return maintenance.Progress(nm)
}

// Waiting implements Observer: the cordon while the NodeMaintenance is
// not Ready, as in Run.
func (cordonTrigger) Waiting(ctx context.Context, reader client.Reader, node *corev1.Node, _ pitstopv1alpha1.MaintenanceState) (string, error) {
	return waitingForReady(ctx, reader, node, false)
}

// restoreTrigger deletes the NodeMaintenance a profile created and is done
// once the node is restored (maintenance.Restored). A NodeMaintenance someone else
// created is left alone. With uncordon, a cordoned node no NodeMaintenance
// holds is made schedulable too.
type restoreTrigger struct {
	spec pitstopv1alpha1.RestoreTrigger
}

func (t restoreTrigger) Run(ctx context.Context, c Context) (bool, string, error) {
	nm := &pitstopv1alpha1.NodeMaintenance{}
	err := c.Client.Get(ctx, client.ObjectKey{Name: maintenance.ForProfile(c.Node.Name)}, nm)
	if apierrors.IsNotFound(err) {
		if t.spec.Uncordon && c.Node.Spec.Unschedulable {
			return uncordon(ctx, c)
		}
		return true, "", nil
	}
	if err != nil {
		return false, "", fmt.Errorf("reading NodeMaintenance %s: %w", maintenance.ForProfile(c.Node.Name), err)
	}
	if nm.DeletionTimestamp.IsZero() {
		if err := c.Client.Delete(ctx, nm); err != nil && !apierrors.IsNotFound(err) {
			return false, "", fmt.Errorf("deleting NodeMaintenance %s: %w", nm.Name, err)
		}
		return false, "restoring node " + c.Node.Name, nil
	}
	if maintenance.Restored(nm, c.Node, c.From) {
		return true, "", nil
	}
	return false, "restoring node " + c.Node.Name, nil
}

// uncordon makes the node schedulable in the reconciler's copy, written
// with the transition (locked on spec.unschedulable as read), unless a
// NodeMaintenance holds the node: that one uncordons it when it ends.
//
// The cache answers first; a node it shows free is asked about again at
// the API server, since a NodeMaintenance created a moment ago (another
// profile's drain, a person's) may not be in the cache yet, and its node
// would be uncordoned under it.
func uncordon(ctx context.Context, c Context) (bool, string, error) {
	readers := []client.Reader{c.Client}
	if c.Reader != nil {
		readers = append(readers, c.Reader)
	}
	for _, reader := range readers {
		list := &pitstopv1alpha1.NodeMaintenanceList{}
		if err := reader.List(ctx, list); err != nil {
			return false, "", fmt.Errorf("listing NodeMaintenances: %w", err)
		}
		for i := range list.Items {
			if list.Items[i].Spec.NodeName == c.Node.Name {
				return true, "", nil
			}
		}
	}
	c.Node.Spec.Unschedulable = false
	return true, "", nil
}

// Observer is a trigger that can tell, without acting, what it is still
// waiting for: what `pitstop explain` and the dashboard show for a
// transition whose check passes.
type Observer interface {
	// Waiting returns what the trigger of a transition out of state from
	// waits for, or "" when it would be done (or has not started).
	Waiting(ctx context.Context, reader client.Reader, node *corev1.Node, from pitstopv1alpha1.MaintenanceState) (string, error)
}

// Waiting implements Observer: the drain while the NodeMaintenance is not
// Ready; a failed drain is an error, as in Run.
func (d drainTrigger) Waiting(ctx context.Context, reader client.Reader, node *corev1.Node, _ pitstopv1alpha1.MaintenanceState) (string, error) {
	return waitingForReady(ctx, reader, node, true)
}

// waitingForReady says what a trigger that waits for the node's profile
// NodeMaintenance to be Ready waits for, as its Run would: a drain
// (drains) also waits for the drain a cordon trigger skipped.
func waitingForReady(ctx context.Context, reader client.Reader, node *corev1.Node, drains bool) (string, error) {
	nm := &pitstopv1alpha1.NodeMaintenance{}
	if err := reader.Get(ctx, client.ObjectKey{Name: maintenance.ForProfile(node.Name)}, nm); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	if !nm.DeletionTimestamp.IsZero() {
		return maintenance.Going(nm), nil
	}
	if drains && (madeByCordon(nm) || drainSkippedBefore(nm, node)) {
		return drainingCordoned(nm), nil
	}
	_, status, err := maintenance.Progress(nm)
	return status, err
}

// Waiting implements Observer: the restore until the node is restored, as
// in Run.
func (restoreTrigger) Waiting(ctx context.Context, reader client.Reader, node *corev1.Node, from pitstopv1alpha1.MaintenanceState) (string, error) {
	nm := &pitstopv1alpha1.NodeMaintenance{}
	if err := reader.Get(ctx, client.ObjectKey{Name: maintenance.ForProfile(node.Name)}, nm); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	if maintenance.Restored(nm, node, from) {
		return "", nil
	}
	return "waiting for NodeMaintenance " + nm.Name + " to be deleted and the node restored", nil
}
