package machine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/pitstop-dev/pitstop/internal/machineapi"
	"github.com/pitstop-dev/pitstop/internal/machineapi/provider"
)

// errInstanceMissing is the Failed reason of a Machine whose instance
// vanished outside the Machine API.
const errInstanceMissing machinev1beta1.MachineStatusError = "InstanceMissing"

// reconcileInstance creates the Machine's instance if it has none, or
// looks at it, and records what the provider says.
func (r *Reconciler) reconcileInstance(ctx context.Context, m *machinev1beta1.Machine, now metav1.Time) (ctrl.Result, error) {
	if ptr.Deref(m.Status.Phase, "") == machinev1beta1.PhaseFailed {
		return ctrl.Result{}, nil // final; a health check or a person replaces it
	}
	p, err := r.providers.For(m)
	if err != nil {
		return r.providerMissing(m, err, now)
	}
	var inst *provider.Instance
	if ptr.Deref(m.Spec.ProviderID, "") == "" {
		setPhase(m, machinev1beta1.PhaseProvisioning, now)
		if inst, err = p.Create(ctx, m); err != nil {
			return r.createFailed(m, err, now)
		}
		r.eventCreated(m, inst)
	} else if inst, err = p.Describe(ctx, m); err != nil {
		return r.describeFailed(m, err, now)
	}
	if err := applyInstance(m, inst); err != nil {
		return ctrl.Result{}, err
	}
	machineapi.SetCondition(&m.Status.Conditions, machinev1beta1.Condition{
		Type: machinev1beta1.InstanceExistsCondition, Status: corev1.ConditionTrue, Reason: "InstanceExists",
		Message: fmt.Sprintf("instance %s is %s", inst.ID, inst.State),
	}, now)
	if m.Status.NodeRef != nil {
		setPhase(m, machinev1beta1.PhaseRunning, now)
	} else {
		setPhase(m, machinev1beta1.PhaseProvisioned, now)
	}
	switch {
	case !inst.Running && inst.PollAfter > 0:
		return ctrl.Result{RequeueAfter: inst.PollAfter}, nil
	case !inst.Running:
		return ctrl.Result{RequeueAfter: pollInstance}, nil
	}
	// Linking the Node (nodelink) wakes the Machine; until then and after,
	// look at the instance now and then.
	return ctrl.Result{RequeueAfter: resync}, nil
}

// providerMissing handles a Machine no provider of this manager serves: a
// providerSpec that cannot name one fails the Machine; a kind another
// configuration of the manager would serve waits, reported, since the
// Machine is not wrong.
func (r *Reconciler) providerMissing(m *machinev1beta1.Machine, err error, now metav1.Time) (ctrl.Result, error) {
	if errors.Is(err, provider.ErrInvalidConfig) {
		r.fail(m, machinev1beta1.InvalidConfigurationMachineError, err, now)
		return ctrl.Result{}, nil
	}
	if machineapi.SetCondition(&m.Status.Conditions, machinev1beta1.Condition{
		Type: machinev1beta1.InstanceExistsCondition, Status: corev1.ConditionUnknown, Reason: ReasonProviderNotServed,
		Severity: machinev1beta1.ConditionSeverityWarning, Message: err.Error(),
	}, now) {
		r.eventProviderNotServed(m, err)
	}
	return ctrl.Result{}, nil // the manager's providers change only with a restart
}

func (r *Reconciler) createFailed(m *machinev1beta1.Machine, err error, now metav1.Time) (ctrl.Result, error) {
	if errors.Is(err, provider.ErrInvalidConfig) {
		r.fail(m, machinev1beta1.InvalidConfigurationMachineError, err, now)
		return ctrl.Result{}, nil
	}
	machineapi.SetCondition(&m.Status.Conditions, machinev1beta1.Condition{
		Type: machinev1beta1.InstanceExistsCondition, Status: corev1.ConditionFalse, Reason: machinev1beta1.InstanceNotCreatedReason,
		Severity: machinev1beta1.ConditionSeverityWarning, Message: err.Error(),
	}, now)
	r.eventCreateFailed(m, err)
	return ctrl.Result{}, fmt.Errorf("creating the instance of machine %s/%s: %w", m.Namespace, m.Name, err)
}

func (r *Reconciler) describeFailed(m *machinev1beta1.Machine, err error, now metav1.Time) (ctrl.Result, error) {
	switch {
	case errors.Is(err, provider.ErrNotFound):
		machineapi.SetCondition(&m.Status.Conditions, machinev1beta1.Condition{
			Type: machinev1beta1.InstanceExistsCondition, Status: corev1.ConditionFalse, Reason: machinev1beta1.InstanceMissingReason,
			Severity: machinev1beta1.ConditionSeverityError, Message: "the instance " + ptr.Deref(m.Spec.ProviderID, "") + " no longer exists",
		}, now)
		r.fail(m, errInstanceMissing, fmt.Errorf("the instance %s was created but no longer exists", ptr.Deref(m.Spec.ProviderID, "")), now)
		return ctrl.Result{}, nil
	case errors.Is(err, provider.ErrInvalidConfig):
		r.fail(m, machinev1beta1.InvalidConfigurationMachineError, err, now)
		return ctrl.Result{}, nil
	}
	machineapi.SetCondition(&m.Status.Conditions, machinev1beta1.Condition{
		Type: machinev1beta1.InstanceExistsCondition, Status: corev1.ConditionUnknown, Reason: machinev1beta1.ErrorCheckingProviderReason,
		Severity: machinev1beta1.ConditionSeverityWarning, Message: err.Error(),
	}, now)
	return ctrl.Result{}, fmt.Errorf("describing the instance of machine %s/%s: %w", m.Namespace, m.Name, err)
}

// applyInstance records the instance on the Machine: providerID, labels
// and the instance-state annotation in its metadata and spec; addresses
// and the provider's status in its status.
func applyInstance(m *machinev1beta1.Machine, inst *provider.Instance) error {
	if inst.ProviderID != "" {
		m.Spec.ProviderID = ptr.To(inst.ProviderID)
	}
	for key, value := range map[string]string{
		machineapi.LabelRegion: inst.Region, machineapi.LabelZone: inst.Zone, machineapi.LabelInstanceType: inst.InstanceType,
	} {
		if value != "" {
			if m.Labels == nil {
				m.Labels = map[string]string{}
			}
			m.Labels[key] = value
		}
	}
	if inst.State != "" {
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[machineapi.AnnotationInstanceState] = inst.State
	}
	if len(inst.Addresses) > 0 {
		m.Status.Addresses = inst.Addresses
	}
	if inst.Status != nil {
		raw, err := json.Marshal(inst.Status)
		if err != nil {
			return fmt.Errorf("encoding the provider status of machine %s/%s: %w", m.Namespace, m.Name, err)
		}
		if m.Status.ProviderStatus == nil || !sameJSON(m.Status.ProviderStatus.Raw, raw) {
			m.Status.ProviderStatus = &runtime.RawExtension{Raw: raw}
		}
	}
	return nil
}

// sameJSON compares two JSON documents by value: the API server stores a
// providerStatus with its keys in its own order.
func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}
