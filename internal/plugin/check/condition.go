package check

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

// condition passes when a node condition has the configured status. A
// condition the node does not report has status Unknown, as the kubelet's
// API treats it (a node that never reported Ready is not Ready).
type condition struct {
	conditionType corev1.NodeConditionType
	status        corev1.ConditionStatus
}

func newCondition(cfg *pitstopv1alpha1.ConditionCheck) (Check, error) {
	if cfg.Type == "" {
		return nil, errors.New("type: must not be empty")
	}
	status := corev1.ConditionStatus(cfg.Status)
	switch status {
	case corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown:
	default:
		return nil, fmt.Errorf("status: %q is not one of True, False, Unknown", cfg.Status)
	}
	return &condition{conditionType: corev1.NodeConditionType(cfg.Type), status: status}, nil
}

// Evaluate implements Check.
func (k *condition) Evaluate(_ context.Context, c Context) (Result, error) {
	got, reported := corev1.ConditionUnknown, false
	for _, cond := range c.Node.Status.Conditions {
		if cond.Type == k.conditionType {
			got, reported = cond.Status, true
			break
		}
	}
	reason := fmt.Sprintf("condition %s is %s", k.conditionType, got)
	if !reported {
		reason = fmt.Sprintf("condition %s is not reported (Unknown)", k.conditionType)
	}
	if got != k.status {
		return Result{Reason: fmt.Sprintf("%s, want %s", reason, k.status)}, nil
	}
	return Result{Passed: true, Reason: reason}, nil
}
