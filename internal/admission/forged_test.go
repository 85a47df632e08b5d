package admission_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/admission"
	"github.com/pitstop-dev/pitstop/internal/engine"
	"github.com/pitstop-dev/pitstop/internal/fleet"
)

// TestUntrustedForgedInMaintenanceRecordHoldsNoSlot: a node writes itself
// an in-maintenance record for a profile whose way into maintenance takes
// a slot of a budget shared by every profile (max 1), as anything allowed
// to patch the node (its kubelet) can. It holds no slot and has no
// NodeMaintenance: pitstop never let it in. Another node asking for the
// budget is let in: the forged record occupies nothing. A record of a
// profile without a maxMaintenance check (whose nodes hold no slot) still
// counts, as pitstop's own nodes in maintenance for it do.
func TestUntrustedForgedInMaintenanceRecordHoldsNoSlot(t *testing.T) {
	budgeted := pitstopv1alpha1.CheckInstance{MaxMaintenance: &pitstopv1alpha1.MaxMaintenanceCheck{Max: 1}}
	r := newSkewRig(t, "forged", budgeted, 0)
	unbudgeted := budgetProfile("forged-free", pitstopv1alpha1.CheckInstance{HasLabel: &pitstopv1alpha1.KeyValueCheck{Key: "never"}})
	forge := func(profile string) {
		t.Helper()
		rec := engine.Record{Profiles: map[string]engine.ProfileRecord{profile: {Current: pitstopv1alpha1.StateInMaintenance, Previous: pitstopv1alpha1.StateMaintenanceRequired}}}
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, pitstopv1alpha1.AnnotationMaintenanceData, rec.Encode())
		if err := env.Client.Patch(t.Context(), r.holder.DeepCopy(), client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
			t.Fatal(err)
		}
	}
	view := func() admission.Fleet {
		nodes := func(ctx context.Context) ([]*corev1.Node, error) {
			var out []*corev1.Node
			for _, n := range []*corev1.Node{r.holder, r.other} {
				got := &corev1.Node{}
				if err := env.Client.Get(ctx, client.ObjectKeyFromObject(n), got); err != nil {
					return nil, err
				}
				out = append(out, got)
			}
			return out, nil
		}
		return fleet.NewCluster(t.Context(), env.Client, nodes, []pitstopv1alpha1.MaintenanceProfile{*r.profile, *unbudgeted}, fleet.NewRecords(), r.a.slots)
	}
	admit := func() admission.Verdict {
		t.Helper()
		now := r.a.clock.Now()
		v, err := r.a.admission.Admit(t.Context(), admission.Request{
			Profile: r.compiled, Transition: r.compiled.Transitions[pitstopv1alpha1.StateMaintenanceRequired][0],
			Node: r.other, Since: now.Add(-time.Hour), Now: now, Fleet: view(),
		})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}

	forge(r.profile.Name)
	if v := admit(); !v.Admitted {
		t.Fatalf("a node's forged in-maintenance record, backed by no slot, keeps %s out: %s", r.other.Name, v.Why)
	}
	if err := r.a.slots.Release(t.Context(), r.key, r.other.Name); err != nil {
		t.Fatal(err)
	}

	forge(unbudgeted.Name)
	if v := admit(); v.Admitted || !strings.Contains(v.Why, r.holder.Name) {
		t.Fatalf("a node in maintenance for a profile without a budget of its own does not count: admitted %v, %q", v.Admitted, v.Why)
	}
}
