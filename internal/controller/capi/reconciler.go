package capi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/cloud/clusterapi"
)

// Event reasons on Machines.
const (
	eventUnreachable = "WorkloadClusterUnreachable"
	eventReachable   = "WorkloadClusterReachable"
	eventHookAdded   = "DeletionHookAdded"
	eventHookRemoved = "DeletionHookRemoved"
	eventApproved    = "clusterapi.MaintenanceApproved"
	// eventMetal3Reboot: the reboot annotation was put on or taken off
	// the Machine's BareMetalHost; eventMetal3RebootRefused: the host
	// named is not the Machine's.
	eventMetal3Reboot        = "Metal3Reboot"
	eventMetal3RebootRefused = "Metal3RebootRefused"
)

// Reasons of clusterapi.ConditionWorkloadReachable.
const (
	reasonReachable   = "NodesListed"
	reasonUnreachable = "Unreachable"
	// reasonKubeconfigRefused: the kubeconfig Secret asks for what pitstop
	// refuses (kubeconfig.go).
	reasonKubeconfigRefused = "KubeconfigRefused"
)

// unreachableRetry is how soon a Machine whose cluster cannot be read is
// looked at again; notSyncedRetry while its Nodes are being listed.
const (
	unreachableRetry = 10 * time.Second
	notSyncedRetry   = time.Second
	// syncPatience is how long a connection may list the cluster's Nodes
	// before the cluster is reported unreachable.
	syncPatience = 30 * time.Second
)

var bareMetalHostGVK = schema.GroupVersionKind{Group: "metal3.io", Version: "v1alpha1", Kind: "BareMetalHost"}

// Reconciler carries one Machine's side of the protocol.
type Reconciler struct {
	client   client.Client
	clusters *clusterapi.Clusters
	recorder events.EventRecorder
	metal3   bool
}

// Reconcile brings an opted-in Machine and its workload Node in line with
// the protocol, or takes pitstop's marks off a Machine that is no longer
// opted in.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	m := &clusterv1.Machine{}
	if err := r.client.Get(ctx, req.NamespacedName, m); err != nil {
		if apierrors.IsNotFound(err) {
			r.clusters.Release(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if m.Labels[clusterapi.LabelEnabled] != "true" {
		r.clusters.Release(req.NamespacedName)
		return ctrl.Result{}, r.optOut(ctx, m)
	}
	cn, err := r.clusters.Use(ctx, clusterapi.KeyOf(m), req.NamespacedName)
	if err != nil {
		return r.unreachable(ctx, m, err)
	}
	var node *corev1.Node
	if name := m.Status.NodeRef.Name; name != "" {
		node, err = cn.Node(name)
		if errors.Is(err, clusterapi.ErrNotSynced) && time.Since(cn.Started) < syncPatience {
			return ctrl.Result{RequeueAfter: notSyncedRetry}, nil
		}
		if err != nil {
			return r.unreachable(ctx, m, err)
		}
	}
	if err := r.reachable(ctx, m); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.sync(ctx, m, cn, node); err != nil {
		if apierrors.IsUnauthorized(err) {
			return r.unreachable(ctx, m, err)
		}
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
}

// sync is the protocol for an opted-in Machine whose workload Node (nil
// when it has none) is known.
func (r *Reconciler) sync(ctx context.Context, m *clusterv1.Machine, cn *clusterapi.Conn, node *corev1.Node) error {
	deleting := !m.DeletionTimestamp.IsZero()
	if node == nil {
		// Nothing to drain: a Machine whose Node never joined, or is
		// gone, is not held.
		if deleting && m.Annotations[clusterapi.AnnotationHook] != "" {
			return r.removeHook(ctx, m, "the Machine has no workload Node")
		}
		return r.metal3Reboot(ctx, m, false)
	}
	// The protocol holds only where a maintenance controller (pitstop
	// or the maintenance-controller) keeps the workload Node's state.
	if node.Labels[pitstopv1alpha1.LabelState] == "" && node.Labels[pitstopv1alpha1.LabelSeedState] == "" {
		return nil
	}
	nodeLabels := map[string]*string{}
	set := func(k string) {
		if node.Labels[k] != "true" {
			nodeLabels[k] = ptrTo("true")
		}
	}
	unset := func(k string) {
		if _, ok := node.Labels[k]; ok {
			nodeLabels[k] = nil
		}
	}

	approvedDeletion := node.Labels[clusterapi.LabelApproveDeletion] == "true"
	switch {
	case deleting && approvedDeletion:
		if m.Annotations[clusterapi.AnnotationHook] != "" {
			if err := r.removeHook(ctx, m, "the workload Node approved the deletion"); err != nil {
				return err
			}
		}
	case m.Annotations[clusterapi.AnnotationHook] == "":
		if err := r.addHook(ctx, m); err != nil {
			return err
		}
	}
	if deleting {
		set(clusterapi.LabelMachineDeleted)
	}

	switch m.Labels[clusterapi.LabelMaintenance] {
	case clusterapi.MaintenanceRequested:
		set(clusterapi.LabelMachineMaintenance)
		if node.Labels[clusterapi.LabelApproveMaintenance] == "true" {
			if err := r.approve(ctx, m); err != nil {
				return err
			}
		}
	case clusterapi.MaintenanceApproved:
		set(clusterapi.LabelMachineMaintenance)
	default:
		unset(clusterapi.LabelMachineMaintenance)
		unset(clusterapi.LabelApproveMaintenance)
	}
	if len(nodeLabels) > 0 {
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": nodeLabels}})
		if err != nil {
			return err
		}
		if err := cn.PatchNode(ctx, node.Name, patch); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("labelling workload Node %s: %w", node.Name, err)
		}
	}
	return r.metal3Reboot(ctx, m, m.Labels[clusterapi.LabelMaintenance] == clusterapi.MaintenanceApproved)
}

// optOut takes the hook and the reboot annotation off a Machine that is
// no longer opted in.
func (r *Reconciler) optOut(ctx context.Context, m *clusterv1.Machine) error {
	if m.Annotations[clusterapi.AnnotationHook] != "" {
		if err := r.removeHook(ctx, m, "the Machine is no longer opted in ("+clusterapi.LabelEnabled+" is not \"true\")"); err != nil {
			return err
		}
	}
	return r.metal3Reboot(ctx, m, false)
}

func (r *Reconciler) addHook(ctx context.Context, m *clusterv1.Machine) error {
	if err := r.patchMachineMeta(ctx, m, "annotations", clusterapi.AnnotationHook, ptrTo(clusterapi.HookOwner)); err != nil {
		return err
	}
	r.recorder.Eventf(m, nil, corev1.EventTypeNormal, eventHookAdded, "Hold",
		"pre-drain hook %s added: Cluster API drains and deletes the Machine only once its workload Node approves", clusterapi.AnnotationHook)
	return nil
}

func (r *Reconciler) removeHook(ctx context.Context, m *clusterv1.Machine, why string) error {
	if err := r.patchMachineMeta(ctx, m, "annotations", clusterapi.AnnotationHook, nil); err != nil {
		return err
	}
	r.recorder.Eventf(m, nil, corev1.EventTypeNormal, eventHookRemoved, "Release", "pre-drain hook removed: %s", why)
	return nil
}

func (r *Reconciler) approve(ctx context.Context, m *clusterv1.Machine) error {
	if err := r.patchMachineMeta(ctx, m, "labels", clusterapi.LabelMaintenance, ptrTo(clusterapi.MaintenanceApproved)); err != nil {
		return err
	}
	r.recorder.Eventf(m, nil, corev1.EventTypeNormal, eventApproved, "Approve", "the workload Node %s approved the maintenance", m.Status.NodeRef.Name)
	return nil
}

// patchMachineMeta sets (or, with nil, removes) one label or annotation
// of the Machine with a merge patch.
func (r *Reconciler) patchMachineMeta(ctx context.Context, m *clusterv1.Machine, field, key string, value *string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{field: map[string]*string{key: value}}})
	if err != nil {
		return err
	}
	if err := r.client.Patch(ctx, m, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return client.IgnoreNotFound(err)
	}
	return nil
}

// metal3Reboot puts the reboot annotation on the Machine's BareMetalHost
// (want) or takes it off. Without --metal3, or for a Machine that is not
// on a BareMetalHost, nothing. A host that is not the Machine's (in
// another namespace, or provisioned for another Machine) is never
// touched: asked to reboot it, pitstop refuses on the Machine.
func (r *Reconciler) metal3Reboot(ctx context.Context, m *clusterv1.Machine, want bool) error {
	if !r.metal3 {
		return nil
	}
	ns, name, ok := bareMetalHostOf(m.Spec.ProviderID)
	if !ok {
		return nil
	}
	// The providerID is written by whoever may write the Machine: it must
	// not reach a host of another namespace.
	if ns != m.Namespace {
		if !want {
			return nil
		}
		return r.refuseReboot(m, fmt.Sprintf("spec.providerID names BareMetalHost %s/%s, outside the Machine's namespace %s: pitstop reboots only hosts in the Machine's own namespace", ns, name, m.Namespace))
	}
	host := &unstructured.Unstructured{}
	host.SetGroupVersionKind(bareMetalHostGVK)
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, host); err != nil {
		if apierrors.IsNotFound(err) && !want {
			return nil
		}
		return fmt.Errorf("BareMetalHost %s/%s of the Machine: %w", ns, name, err)
	}
	if why := notConsumedBy(host, m); why != "" {
		if !want {
			return nil
		}
		return r.refuseReboot(m, fmt.Sprintf("BareMetalHost %s/%s (from spec.providerID) %s: pitstop reboots only the host provisioned for this Machine", ns, name, why))
	}
	_, has := host.GetAnnotations()[clusterapi.AnnotationReboot]
	if has == want {
		return nil
	}
	var value *string
	if want {
		value = ptrTo("")
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]*string{clusterapi.AnnotationReboot: value}}})
	if err != nil {
		return err
	}
	if err := r.client.Patch(ctx, host, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("BareMetalHost %s/%s of the Machine: %w", ns, name, err)
	}
	verb := "removed from"
	if want {
		verb = "added to"
	}
	r.recorder.Eventf(m, nil, corev1.EventTypeNormal, eventMetal3Reboot, "Reboot", "annotation %s %s BareMetalHost %s/%s", clusterapi.AnnotationReboot, verb, ns, name)
	return nil
}

// notConsumedBy says why the host is not the Machine's ("" when it is):
// Metal3 records the Metal3Machine a host is provisioned for in its
// spec.consumerRef, and the Machine names its Metal3Machine in
// spec.infrastructureRef.
func notConsumedBy(host *unstructured.Unstructured, m *clusterv1.Machine) string {
	ref, found, err := unstructured.NestedStringMap(host.Object, "spec", "consumerRef")
	if err != nil || !found {
		return "has no spec.consumerRef"
	}
	infra := m.Spec.InfrastructureRef
	group, _, _ := strings.Cut(ref["apiVersion"], "/")
	if ref["kind"] != infra.Kind || ref["name"] != infra.Name || (ref["namespace"] != "" && ref["namespace"] != m.Namespace) ||
		(ref["apiVersion"] != "" && group != infra.APIGroup) {
		return fmt.Sprintf("is provisioned for %s %s/%s, not for the Machine's spec.infrastructureRef %s %s", ref["kind"], ref["namespace"], ref["name"], infra.Kind, infra.Name)
	}
	return ""
}

// refuseReboot reports on the Machine a reboot pitstop will not make (a
// Warning Event); retrying cannot change the answer, a change of the
// Machine can.
func (r *Reconciler) refuseReboot(m *clusterv1.Machine, msg string) error {
	r.recorder.Eventf(m, nil, corev1.EventTypeWarning, eventMetal3RebootRefused, "Reboot", "%s", msg)
	return reconcile.TerminalError(fmt.Errorf("machine %s: %s", klog.KObj(m), msg))
}

// bareMetalHostOf parses a Metal3 providerID, metal3://<ns>/<host>/<m3m>.
func bareMetalHostOf(providerID string) (ns, name string, ok bool) {
	rest, found := strings.CutPrefix(providerID, "metal3://")
	if !found {
		return "", "", false
	}
	parts := strings.Split(rest, "/")
	if len(parts) < 2 || parts[0] == "" || parts[1] == "" {
		return "", "", false
	}
	return parts[0], parts[1], true
}

// unreachable reports on the Machine that its workload cluster cannot be
// read (condition, and a Warning Event when that is news), keeps every
// hook, and looks again soon.
func (r *Reconciler) unreachable(ctx context.Context, m *clusterv1.Machine, cause error) (ctrl.Result, error) {
	msg := fmt.Sprintf("workload cluster %s: %v; the deletion hook is kept", clusterapi.KeyOf(m), cause)
	reason := reasonUnreachable
	if errors.Is(cause, clusterapi.ErrKubeconfigRefused) {
		reason = reasonKubeconfigRefused
	}
	if changed, err := r.setCondition(ctx, m, metav1.ConditionFalse, reason, msg); err != nil {
		return ctrl.Result{}, err
	} else if changed {
		r.recorder.Eventf(m, nil, corev1.EventTypeWarning, eventUnreachable, "Connect", "%s", msg)
	}
	return ctrl.Result{RequeueAfter: unreachableRetry}, nil
}

// reachable records that the workload cluster answers.
func (r *Reconciler) reachable(ctx context.Context, m *clusterv1.Machine) error {
	old := meta.FindStatusCondition(m.Status.Conditions, clusterapi.ConditionWorkloadReachable)
	changed, err := r.setCondition(ctx, m, metav1.ConditionTrue, reasonReachable, fmt.Sprintf("workload cluster %s answers", clusterapi.KeyOf(m)))
	if changed && old != nil {
		r.recorder.Eventf(m, nil, corev1.EventTypeNormal, eventReachable, "Connect", "workload cluster %s answers again", clusterapi.KeyOf(m))
	}
	return err
}

// setCondition writes clusterapi.ConditionWorkloadReachable when it changes, and
// says whether it did.
func (r *Reconciler) setCondition(ctx context.Context, m *clusterv1.Machine, status metav1.ConditionStatus, reason, msg string) (bool, error) {
	before := m.DeepCopy()
	if !meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{
		Type: clusterapi.ConditionWorkloadReachable, Status: status, Reason: reason, Message: msg, ObservedGeneration: m.Generation,
	}) {
		return false, nil
	}
	// With the resourceVersion read: the list of conditions is replaced
	// whole, and must not undo one Cluster API just wrote.
	if err := r.client.Status().Patch(ctx, m, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return true, nil
}

func ptrTo(s string) *string { return &s }

// relevant says whether a Machine concerns pitstop: opted in, or carrying
// a mark of pitstop's to take off.
func relevant(o client.Object) bool {
	_, maintenance := o.GetLabels()[clusterapi.LabelMaintenance]
	return o.GetLabels()[clusterapi.LabelEnabled] == "true" || o.GetAnnotations()[clusterapi.AnnotationHook] != "" || maintenance
}
