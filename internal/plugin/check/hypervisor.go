package check

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/plugin/hypervisor"
)

// +kubebuilder:rbac:groups=kvm.cloud.sap,resources=hypervisors,verbs=get

// hypervisorRecheck is when a failing hypervisor check is asked again:
// pitstop does not watch Hypervisors.
const hypervisorRecheck = 30 * time.Second

// errNoReader says that a hypervisor check was evaluated where pitstop
// reads no Hypervisors.
var errNoReader = errors.New("Hypervisors are read by pitstop's manager only; the dashboard shows its last result of this check")

// checkHypervisor passes when the node's Hypervisor has each status field
// at its value.
type checkHypervisor struct {
	fields map[string]any
	deps   Deps
}

func newCheckHypervisor(cfg *pitstopv1alpha1.CheckHypervisorCheck, deps Deps) (Check, error) {
	f, err := hypervisor.Parse("checkHypervisor.status", "status", cfg.Status, hypervisor.StatusFields)
	if err != nil {
		return nil, err
	}
	return &checkHypervisor{fields: f, deps: deps}, nil
}

// Evaluate implements Check.
func (h *checkHypervisor) Evaluate(ctx context.Context, c Context) (Result, error) {
	if h.deps.Reader == nil {
		return Result{}, errNoReader
	}
	hv, err := hypervisor.Get(ctx, h.deps.Reader, c.Node.Name)
	if err != nil {
		return Result{}, err
	}
	var parts []string
	for _, n := range slices.Sorted(maps.Keys(h.fields)) {
		ok, got := hypervisor.Equal(hv, n, h.fields[n])
		if !ok {
			return Result{Reason: fmt.Sprintf("Hypervisor %s: status.%s is %s, want %v", c.Node.Name, n, got, show(h.fields[n])), NextChange: c.recheck(hypervisorRecheck)}, nil
		}
		parts = append(parts, fmt.Sprintf("status.%s is %s", n, got))
	}
	return Result{Passed: true, Reason: fmt.Sprintf("Hypervisor %s: %s", c.Node.Name, strings.Join(parts, ", "))}, nil
}

func show(v any) string {
	switch w := v.(type) {
	case string:
		return fmt.Sprintf("%q", w)
	case []string:
		return fmt.Sprintf("%q", w)
	}
	return fmt.Sprint(v)
}

// hypervisorCondition passes when the node's Hypervisor has the condition
// with the status.
type hypervisorCondition struct {
	typ, status string
	deps        Deps
}

func newHypervisorCondition(cfg *pitstopv1alpha1.ConditionCheck, deps Deps) (Check, error) {
	if cfg.Type == "" {
		return nil, errors.New("hypervisorCondition.type: must not be empty")
	}
	switch cfg.Status {
	case "True", "False", "Unknown":
	default:
		return nil, fmt.Errorf("hypervisorCondition.status: %q is not True, False or Unknown", cfg.Status)
	}
	return &hypervisorCondition{typ: cfg.Type, status: cfg.Status, deps: deps}, nil
}

// Evaluate implements Check.
func (h *hypervisorCondition) Evaluate(ctx context.Context, c Context) (Result, error) {
	if h.deps.Reader == nil {
		return Result{}, errNoReader
	}
	hv, err := hypervisor.Get(ctx, h.deps.Reader, c.Node.Name)
	if err != nil {
		return Result{}, err
	}
	got := hypervisor.Condition(hv, h.typ)
	r := Result{Passed: got == h.status, Reason: fmt.Sprintf("Hypervisor %s: condition %s is %s, want %s", c.Node.Name, h.typ, got, h.status)}
	if !r.Passed {
		r.NextChange = c.recheck(hypervisorRecheck)
	}
	return r, nil
}
