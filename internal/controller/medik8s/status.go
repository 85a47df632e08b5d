package medik8s

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

// Phases of a medik8s NodeMaintenance; pitstop's have the same names and
// meanings.
const (
	phaseRunning   = string(pitstopv1alpha1.PhaseRunning)
	phaseSucceeded = string(pitstopv1alpha1.PhaseSucceeded)
	phaseFailed    = string(pitstopv1alpha1.PhaseFailed)
)

// spec is the part of medik8s' NodeMaintenanceSpec that pitstop reads.
type spec struct {
	NodeName string `json:"nodeName"`
	Reason   string `json:"reason,omitempty"`
}

// podReference is medik8s' PodReference.
type podReference struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// status is medik8s' NodeMaintenanceStatus with its JSON spelling
// (totalpods is lower-case upstream). errorOnLeaseCount counts the failed
// attempts in a row at the node's medik8s Lease, which pitstop holds as the
// medik8s operator does (lease.go); a count that operator left is taken
// over.
type status struct {
	Phase             string         `json:"phase,omitempty"`
	DrainProgress     int64          `json:"drainProgress,omitempty"`
	LastUpdate        *metav1.Time   `json:"lastUpdate,omitempty"`
	LastError         string         `json:"lastError,omitempty"`
	PendingPods       []string       `json:"pendingPods,omitempty"`
	PendingPodsRefs   []podReference `json:"pendingPodsRefs,omitempty"`
	TotalPods         int64          `json:"totalpods,omitempty"`
	EvictionPods      int64          `json:"evictionPods,omitempty"`
	ErrorOnLeaseCount int64          `json:"errorOnLeaseCount,omitempty"`
}

func statusOf(obj *unstructured.Unstructured) (status, error) {
	var s status
	err := fromField(obj, "status", &s)
	return s, err
}

func fromField(obj *unstructured.Unstructured, field string, into any) error {
	m, _, err := unstructured.NestedMap(obj.Object, field)
	if err != nil {
		return fmt.Errorf("reading %s of NodeMaintenance %s: %w", field, obj.GetName(), err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, into); err != nil {
		return fmt.Errorf("decoding %s of NodeMaintenance %s: %w", field, obj.GetName(), err)
	}
	return nil
}

func setStatus(obj *unstructured.Unstructured, s status) error {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&s)
	if err != nil {
		return fmt.Errorf("encoding status of NodeMaintenance %s: %w", obj.GetName(), err)
	}
	return unstructured.SetNestedMap(obj.Object, m, "status")
}

// mirror reports pitstop's NodeMaintenance in medik8s' terms. pitstop's
// phase, progress and counts mean what medik8s' do (counts are taken when
// the drain starts, progress is the share of evictionPods gone); pending
// pods are listed both by name (pendingPods) and by reference
// (pendingPodsRefs). lastUpdate is left to stamp, and errorOnLeaseCount to
// the Lease (reconcileLeaseAndMaintenance).
func mirror(nm *pitstopv1alpha1.NodeMaintenance) status {
	s := status{
		Phase:         string(nm.Status.Phase),
		DrainProgress: int64(nm.Status.DrainProgress),
		LastError:     lastError(nm),
		TotalPods:     int64(nm.Status.TotalPods),
		EvictionPods:  int64(nm.Status.EvictionPods),
	}
	if s.Phase == "" {
		s.Phase = phaseRunning // pitstop has not looked at it yet; medik8s starts Running too
	}
	for _, p := range nm.Status.PendingPods {
		s.PendingPods = append(s.PendingPods, p.Name)
		s.PendingPodsRefs = append(s.PendingPodsRefs, podReference{Namespace: p.Namespace, Name: p.Name})
	}
	return s
}

// stuckReasons are the Cordoned and Drained reasons that medik8s would
// report as an error: its drain returns one for a refused eviction, a
// missing node or a pod it may not touch, while pitstop keeps lastError for
// API errors and says the rest in conditions.
var stuckReasons = map[string]bool{
	pitstopv1alpha1.ReasonNodeNotFound:                 true,
	pitstopv1alpha1.ReasonDuplicate:                    true,
	pitstopv1alpha1.ReasonQuorumProtected:              true,
	pitstopv1alpha1.ReasonCordonFailed:                 true,
	pitstopv1alpha1.ReasonBlockedByPodDisruptionBudget: true,
	pitstopv1alpha1.ReasonBlockedByUnmanagedPods:       true,
	pitstopv1alpha1.ReasonEvictionFailed:               true,
	pitstopv1alpha1.ReasonDrainTimedOut:                true,
}

// lastError is pitstop's lastError or, when that is empty, the message of
// the first condition that says why the maintenance is stuck or failed.
func lastError(nm *pitstopv1alpha1.NodeMaintenance) string {
	if nm.Status.LastError != "" {
		return nm.Status.LastError
	}
	for _, t := range []string{pitstopv1alpha1.ConditionCordoned, pitstopv1alpha1.ConditionDrained} {
		c := meta.FindStatusCondition(nm.Status.Conditions, t)
		if c != nil && c.Status == metav1.ConditionFalse && stuckReasons[c.Reason] {
			return c.Message
		}
	}
	return ""
}

// failed reports a maintenance that cannot go on: pitstop refused it, or it
// cannot be matched to pitstop's. What was known before is kept.
func failed(prev status, msg string) status {
	prev.Phase = phaseFailed
	prev.LastError = msg
	return prev
}

// erred reports an error that a retry may cure; the phase does not change.
func erred(prev status, err error) status {
	if prev.Phase == "" {
		prev.Phase = phaseRunning
	}
	prev.LastError = err.Error()
	return prev
}

// stamp sets lastUpdate, as medik8s does on each status write: to now when
// anything else changed, else to the previous value, so that an unchanged
// status is not written again.
func stamp(prev, next status, now time.Time) status {
	next.LastUpdate = prev.LastUpdate
	if !equality.Semantic.DeepEqual(prev, next) {
		next.LastUpdate = &metav1.Time{Time: now}
	}
	return next
}
