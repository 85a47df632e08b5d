package machinemaintenance

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

// scaleUp adds one replica to the MachineSet and records the surge on it
// in the same update, so that neither a restart nor a second surge at
// the same time adds it twice.
func (r *Reconciler) scaleUp(ctx context.Context, mm *pitstopv1alpha1.MachineMaintenance) error {
	// Read from the API server: an update from a stale copy would only
	// lose the race and come back.
	ms := &machinev1beta1.MachineSet{}
	if err := r.reader.Get(ctx, client.ObjectKey{Namespace: mm.Namespace, Name: mm.Status.Action.MachineSet}, ms); err != nil {
		return fmt.Errorf("reading MachineSet %s: %w", mm.Status.Action.MachineSet, err)
	}
	key := pitstopv1alpha1.AnnotationSurgePrefix + mm.Name
	if _, done := ms.Annotations[key]; done {
		return nil
	}
	replicas := replicasOf(ms)
	if ms.Annotations == nil {
		ms.Annotations = map[string]string{}
	}
	ms.Annotations[key] = strconv.Itoa(int(replicas))
	ms.Spec.Replicas = new(replicas + 1)
	// Update, not patch: the resourceVersion makes two surges at once
	// each add their own replica.
	if err := r.client.Update(ctx, ms); err != nil {
		return fmt.Errorf("scaling MachineSet %s up: %w", ms.Name, err)
	}
	return nil
}

// scaleBack takes the surge's replica off the MachineSet, with its record,
// in one update; done once the record is gone.
func (r *Reconciler) scaleBack(ctx context.Context, mm *pitstopv1alpha1.MachineMaintenance) error {
	if mm.Status.Action.MachineSet == "" {
		return nil
	}
	ms := &machinev1beta1.MachineSet{}
	if err := r.reader.Get(ctx, client.ObjectKey{Namespace: mm.Namespace, Name: mm.Status.Action.MachineSet}, ms); err != nil {
		return client.IgnoreNotFound(err)
	}
	key := pitstopv1alpha1.AnnotationSurgePrefix + mm.Name
	if _, surged := ms.Annotations[key]; !surged {
		return nil
	}
	surges := map[string]string{}
	for k, v := range ms.Annotations {
		if strings.HasPrefix(k, pitstopv1alpha1.AnnotationSurgePrefix) {
			surges[k] = v
		}
	}
	replicas, changed := takeBack(replicasOf(ms), surges, key)
	delete(ms.Annotations, key)
	for k, v := range changed {
		ms.Annotations[k] = v
	}
	ms.Spec.Replicas = new(replicas)
	if err := r.client.Update(ctx, ms); err != nil {
		return fmt.Errorf("scaling MachineSet %s back: %w", ms.Name, err)
	}
	return nil
}

// surgeRecorded says whether the MachineSet still holds the surge's
// replica, read from the API server.
func (r *Reconciler) surgeRecorded(ctx context.Context, mm *pitstopv1alpha1.MachineMaintenance) (bool, error) {
	if mm.Status.Action.MachineSet == "" {
		return false, nil
	}
	ms := &machinev1beta1.MachineSet{}
	if err := r.reader.Get(ctx, client.ObjectKey{Namespace: mm.Namespace, Name: mm.Status.Action.MachineSet}, ms); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	_, recorded := ms.Annotations[pitstopv1alpha1.AnnotationSurgePrefix+mm.Name]
	return recorded, nil
}

// takeBack is a MachineSet's size once the surge recorded under key takes
// its replica back, and the other surges' records that change. It takes
// back exactly one replica, and none when someone has already brought
// the set to (or below) the size it would have without this surge: the
// size before the earliest surge still recorded, plus one for each other
// surge. The surges recorded after this one counted its replica in their
// size before, which drops by one. surges holds every surge's record on
// the set (annotation key: replica count before); a count that is not a
// number is left out of the size before.
func takeBack(replicas int32, surges map[string]string, key string) (int32, map[string]string) {
	own, ownErr := strconv.Atoi(surges[key])
	floor, others := -1, 0
	changed := map[string]string{}
	for k, v := range surges {
		if k == key {
			continue
		}
		others++
		before, err := strconv.Atoi(v)
		if err != nil {
			continue
		}
		if ownErr == nil && before > own {
			before--
			changed[k] = strconv.Itoa(before)
		}
		if floor < 0 || before < floor {
			floor = before
		}
	}
	if ownErr == nil && (floor < 0 || own < floor) {
		floor = own
	}
	floor = max(floor, 0)
	if int(replicas) <= floor+others {
		return replicas, changed
	}
	return replicas - 1, changed
}

// replicasOf is a MachineSet's spec.replicas, 1 when unset (the CRD's
// default).
func replicasOf(ms *machinev1beta1.MachineSet) int32 {
	if ms.Spec.Replicas == nil {
		return 1
	}
	return *ms.Spec.Replicas
}
