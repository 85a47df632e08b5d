package profile

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/engine"
	"github.com/pitstop-dev/pitstop/internal/maintenance"
)

const (
	// leaveRecheck paces the checks of a node waiting for its drain to be
	// undone; the NodeMaintenance's watch wakes it sooner.
	leaveRecheck = 5 * time.Second
	// orphanGrace spares a NodeMaintenance just made by a drain trigger
	// from the orphan sweep while the caches settle.
	orphanGrace = 15 * time.Second
)

// leave takes the node out of a profile that no longer selects it (its
// labels or the profile's selector changed, or the profile was deleted)
// while the node is not operational for it. The NodeMaintenance that
// profile made for the node is deleted; once the node is restored (or the
// object is gone) the profile's entry is dropped from the record and left
// says so: its slots are given back after the write. The labels and
// annotations the profile's triggers set stay as they are.
func (r *Reconciler) leave(ctx context.Context, p *pass, name string) (left bool, requeue time.Duration, err error) {
	node, record := p.node, &p.record
	pr := record.Profiles[name]
	nm := &pitstopv1alpha1.NodeMaintenance{}
	err = r.client.Get(ctx, client.ObjectKey{Name: maintenance.ForProfile(node.Name)}, nm)
	switch {
	case apierrors.IsNotFound(err):
		nm = nil
	case err != nil:
		return false, 0, fmt.Errorf("reading NodeMaintenance %s: %w", maintenance.ForProfile(node.Name), err)
	case nm.Labels[pitstopv1alpha1.LabelProfile] != name:
		nm = nil // another's: a user's, or another profile's
	}
	waiting := func(what string) {
		r.decisions.Remember(node.Name, name, pr, leavingDecision(pr.Current, what), r.clock.Now())
	}
	if nm != nil && nm.DeletionTimestamp.IsZero() {
		if err := r.client.Delete(ctx, nm, client.Preconditions{UID: &nm.UID}); err != nil && !apierrors.IsNotFound(err) {
			return false, 0, fmt.Errorf("deleting NodeMaintenance %s: %w", nm.Name, err)
		}
		r.recorder.Eventf(node, nm, corev1.EventTypeWarning, pitstopv1alpha1.EventLeavingProfile, "Leave",
			"profile %s no longer selects the node, which is %s for it: NodeMaintenance %s deleted, the node is being restored", name, pr.Current, nm.Name)
		waiting("waiting for NodeMaintenance " + nm.Name + " to be deleted and the node restored")
		return false, leaveRecheck, nil
	}
	if nm != nil && !maintenance.Restored(nm, node, pr.Current) {
		waiting("waiting for NodeMaintenance " + nm.Name + " to be deleted and the node restored")
		return false, leaveRecheck, nil
	}
	delete(record.Profiles, name)
	r.decisions.ForgetProfile(node.Name, name)
	p.later(func() {
		r.recorder.Eventf(node, nil, corev1.EventTypeWarning, pitstopv1alpha1.EventLeftProfile, "Leave",
			"the node left profile %s, which no longer selects it, while %s: its drain (if any) undone and its budget slots given back; labels and annotations the profile's triggers set are left as they are", name, pr.Current)
	})
	return true, 0, nil
}

// leavingDecision is what the dashboard and `pitstop explain` show for a
// node leaving a profile: no transition, and what it waits for.
func leavingDecision(state pitstopv1alpha1.MaintenanceState, what string) engine.Decision {
	return engine.Decision{Take: -1, Evaluations: []engine.TransitionEvaluation{{
		Index: -1, Check: "the profile no longer selects the node", Next: pitstopv1alpha1.StateOperational,
		Blocked: "leaving the profile (the node is " + string(state) + " for it): " + what,
	}}}
}

// strand reports a node held out of operational by a profile that selects
// it but has no generation that compiles: pitstop can neither move it on
// nor take it out, and someone must fix or delete the profile.
func (r *Reconciler) strand(node *corev1.Node, name string, pr engine.ProfileRecord, why error) {
	if pr.Current == pitstopv1alpha1.StateOperational {
		return
	}
	what := fmt.Sprintf("profile %s has no generation that compiles (%v): the node stays %s until the profile is fixed or deleted", name, why, pr.Current)
	r.decisions.Remember(node.Name, name, pr, engine.Decision{Take: -1, Evaluations: []engine.TransitionEvaluation{{
		Index: -1, Check: "the profile compiles", Next: pr.Current, Blocked: what,
	}}}, r.clock.Now())
	r.recorder.Eventf(node, nil, corev1.EventTypeWarning, pitstopv1alpha1.EventProfileNotRunnable, "Evaluate", "%s", what)
}

// sweepOrphans deletes the NodeMaintenances a profile made for nodes it no
// longer selects, which the nodes' own evaluations have not taken back: a
// drain the node's record no longer shows (left behind by an older
// version, or made while the cache missed the profile's change). Deleting
// one restores its node.
func (r *Reconciler) sweepOrphans(ctx context.Context) error {
	list := &pitstopv1alpha1.NodeMaintenanceList{}
	if err := r.client.List(ctx, list, client.HasLabels{pitstopv1alpha1.LabelProfile}); err != nil {
		return err
	}
	now := r.clock.Now()
	for i := range list.Items {
		nm := &list.Items[i]
		if !nm.DeletionTimestamp.IsZero() || now.Sub(nm.CreationTimestamp.Time) < orphanGrace {
			continue
		}
		needed, why, err := r.profileNeeds(ctx, nm)
		if err != nil || needed {
			continue
		}
		if err := r.client.Delete(ctx, nm, client.Preconditions{UID: &nm.UID}); err != nil && !apierrors.IsNotFound(err) {
			continue
		}
		r.recorder.Eventf(nm, nil, corev1.EventTypeWarning, pitstopv1alpha1.EventOrphanDeleted, "Delete", "%s: deleted, which restores node %s", why, nm.Spec.NodeName)
	}
	return nil
}

// profileNeeds says whether the profile that made nm still needs it: its
// running generation selects the node, or the node's record says it has
// yet to leave the profile (its own evaluation then undoes the drain).
// Otherwise why says what changed.
func (r *Reconciler) profileNeeds(ctx context.Context, nm *pitstopv1alpha1.NodeMaintenance) (bool, string, error) {
	name := nm.Labels[pitstopv1alpha1.LabelProfile]
	p := &pitstopv1alpha1.MaintenanceProfile{}
	if err := r.client.Get(ctx, client.ObjectKey{Name: name}, p); err != nil {
		if apierrors.IsNotFound(err) {
			return false, "profile " + name + " is gone", nil
		}
		return true, "", err
	}
	node := &corev1.Node{}
	if err := r.client.Get(ctx, client.ObjectKey{Name: nm.Spec.NodeName}, node); err != nil {
		if apierrors.IsNotFound(err) {
			return false, "node " + nm.Spec.NodeName + " is gone", nil
		}
		return true, "", err
	}
	if p.DeletionTimestamp.IsZero() {
		c, _ := r.profiles.Get(p)
		if c == nil {
			return true, "", nil // stranded: reported on the node
		}
		if ok, err := engine.Selects(c.Spec, node); err != nil || ok {
			return true, "", err
		}
	}
	record, err := r.records.Read(node)
	if err != nil {
		return true, "", nil // pitstop cannot tell what the node is doing
	}
	if pr, ok := record.Profiles[name]; ok && pr.Current != pitstopv1alpha1.StateOperational {
		return true, "", nil // the node's own evaluation takes it back
	}
	if !p.DeletionTimestamp.IsZero() {
		return false, "profile " + name + " is being deleted", nil
	}
	return false, "profile " + name + " no longer selects node " + node.Name, nil
}
