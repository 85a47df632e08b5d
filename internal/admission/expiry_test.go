package admission_test

import (
	"testing"
	"time"

	"k8s.io/utils/ptr"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/admission"
)

// TestARefusalSaysWhenAnExpiringSlotFrees: a slot that expires (a
// stagger's, a maxMaintenance's with skipAfter) is not deleted when it
// does, so no event wakes the nodes that wait for it. The refusal says
// when the first slot expires on the refusing replica's own count, and
// the engine evaluates the node again then: 90 s after a replica that
// took the slot 30 s ago, 2 min after one that sees it for the first time.
// A slot that lasts while its holder is in maintenance says nothing.
func TestARefusalSaysWhenAnExpiringSlotFrees(t *testing.T) {
	twoMinutes := pitstopv1alpha1.Duration{Duration: 2 * time.Minute}
	for name, tc := range map[string]struct {
		check          pitstopv1alpha1.CheckInstance
		taker, newcome time.Duration
	}{
		"expiry-stagger": {pitstopv1alpha1.CheckInstance{Stagger: &pitstopv1alpha1.StaggerCheck{Duration: twoMinutes, Parallel: 1}}, 90 * time.Second, 2 * time.Minute},
		"expiry-skip":    {pitstopv1alpha1.CheckInstance{MaxMaintenance: &pitstopv1alpha1.MaxMaintenanceCheck{Max: 1, ProfileScoped: true, SkipAfter: ptr.To(twoMinutes)}}, 90 * time.Second, 2 * time.Minute},
		"expiry-max":     {pitstopv1alpha1.CheckInstance{MaxMaintenance: &pitstopv1alpha1.MaxMaintenanceCheck{Max: 1, ProfileScoped: true}}, 0, 0},
	} {
		t.Run(name, func(t *testing.T) {
			r := newSkewRig(t, name, tc.check, 0)
			if !r.admit(r.a, r.holder) {
				t.Fatal("the first node was not let in")
			}
			r.step(30 * time.Second)
			for _, c := range []struct {
				who  string
				rep  replica
				want time.Duration
			}{{"the replica that took the slot", r.a, tc.taker}, {"a replica that sees it for the first time", r.b, tc.newcome}} {
				now := c.rep.clock.Now()
				v, err := c.rep.admission.Admit(t.Context(), admission.Request{
					Profile: r.compiled, Transition: r.compiled.Transitions[pitstopv1alpha1.StateMaintenanceRequired][0],
					Node: r.other, Since: now.Add(-time.Hour), Now: now,
				})
				if err != nil {
					t.Fatal(err)
				}
				if v.Admitted {
					t.Fatalf("%s let %s in on the slot %s holds", c.who, r.other.Name, r.holder.Name)
				}
				if v.FreesIn != c.want {
					t.Errorf("%s refused %s saying the slot frees in %s, want %s", c.who, r.other.Name, v.FreesIn, c.want)
				}
			}
		})
	}
}
