package nodemaintenance

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/drain"
)

// The PodDisruptionBudgets in a drain's way: those whose status may be
// stale, which hold pods back before any eviction is sent, and those that
// refused an eviction.

// holdStale keeps back the pods whose PodDisruptionBudget's status may be
// stale (drain.StaleStatus) and returns the others, to evict now. Pods no
// budget covers are never held.
func (r *Reconciler) holdStale(ctx context.Context, nm *pitstopv1alpha1.NodeMaintenance, pods []*corev1.Pod, now time.Time) ([]*corev1.Pod, []heldPod, error) {
	budgets, err := r.budgetsFor(ctx, pods)
	if err != nil {
		return nil, nil, err
	}
	var evict []*corev1.Pod
	var held []heldPod
	for _, pod := range pods {
		pdb := drain.CoveringPDB(pod, budgets[pod.Namespace])
		if r.evicted.waiting(nm.Name, pod, pdb, now) {
			continue // refused or failed: asked again later
		}
		if pdb == nil {
			evict = append(evict, pod)
			continue
		}
		why, until := drain.StaleStatus(pdb, r.gate.view(nm.UID, pdb), now)
		if why == "" {
			evict = append(evict, pod)
			continue
		}
		held = append(held, heldPod{pod: pod, pdb: pdb, why: why, until: until})
	}
	return evict, held, nil
}

// budgetsFor lists, from the cache, the PodDisruptionBudgets of the pods'
// namespaces.
func (r *Reconciler) budgetsFor(ctx context.Context, pods []*corev1.Pod) (map[string][]policyv1.PodDisruptionBudget, error) {
	byNamespace := map[string][]policyv1.PodDisruptionBudget{}
	for _, pod := range pods {
		ns := pod.Namespace
		if _, ok := byNamespace[ns]; ok {
			continue
		}
		list := &policyv1.PodDisruptionBudgetList{}
		if err := r.client.List(ctx, list, client.InNamespace(ns)); err != nil {
			return nil, fmt.Errorf("listing PodDisruptionBudgets in %s: %w", ns, err)
		}
		byNamespace[ns] = list.Items
	}
	return byNamespace, nil
}

// refusingPDBs finds the budget behind each refused eviction.
func (r *Reconciler) refusingPDBs(ctx context.Context, evicted drain.Result) (map[*corev1.Pod]*policyv1.PodDisruptionBudget, error) {
	refused := evicted.With(drain.Refused)
	if len(refused) == 0 {
		return nil, nil
	}
	pods := make([]*corev1.Pod, len(refused))
	for i, res := range refused {
		pods[i] = res.Pod
	}
	budgets, err := r.budgetsFor(ctx, pods)
	if err != nil {
		return nil, err
	}
	out := map[*corev1.Pod]*policyv1.PodDisruptionBudget{}
	for _, pod := range pods {
		if pdb := drain.CoveringPDB(pod, budgets[pod.Namespace]); pdb != nil {
			out[pod] = pdb
		}
	}
	return out, nil
}

// heldBlockers reports each held pod as a blocker naming its budget.
func heldBlockers(held []heldPod) []pitstopv1alpha1.DrainBlocker {
	out := make([]pitstopv1alpha1.DrainBlocker, 0, len(held))
	for _, h := range held {
		out = append(out, pitstopv1alpha1.DrainBlocker{
			Pod:                 pitstopv1alpha1.PodReference{Namespace: h.pod.Namespace, Name: h.pod.Name},
			PodDisruptionBudget: h.pdb.Namespace + "/" + h.pdb.Name,
			Reason:              pitstopv1alpha1.ReasonWaitingForPodDisruptionBudgetStatus,
			Message:             h.why,
		})
	}
	return out
}

// heldMessage says which pods are held and, once per budget, why: "3 pods
// held back: shop/web-0, …; waiting for PodDisruptionBudget shop/web status
// to be current: …".
func heldMessage(held []heldPod) string {
	pods := make([]*corev1.Pod, len(held))
	why := map[string]string{}
	for i, h := range held {
		pods[i] = h.pod
		why[h.pdb.Namespace+"/"+h.pdb.Name] = h.why
	}
	msg := fmt.Sprintf("%d pods held back: %s", len(held), podList(pods, messageListLimit))
	for _, name := range slices.Sorted(maps.Keys(why)) {
		msg += "; " + why[name]
	}
	return msg
}
