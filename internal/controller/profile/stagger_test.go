package profile_test

import (
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/budget"
	"github.com/pitstop-dev/pitstop/internal/testutil"
	"github.com/pitstop-dev/pitstop/internal/testutil/clustertest"
)

// TestAStaggerGroupSpacesOutEntriesAcrossProfiles: two profiles whose
// stagger checks name one group let one node in between them, as the
// maintenance-controller's stagger checks naming one Lease do; a profile
// with a stagger of its own is not held back by them.
func TestAStaggerGroupSpacesOutEntriesAcrossProfiles(t *testing.T) {
	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{})
	staggered := func(name, group string) *pitstopv1alpha1.MaintenanceProfile {
		p := rollingProfile(name, name, 5)
		p.Spec.Checks = append(p.Spec.Checks, pitstopv1alpha1.CheckInstance{Name: "spaced",
			Stagger: &pitstopv1alpha1.StaggerCheck{Duration: pitstopv1alpha1.Duration{Duration: time.Hour}, Parallel: 1, Group: group}})
		p.Spec.States.MaintenanceRequired.Transitions[0].Check = "budget && spaced"
		return p
	}
	testutil.Create(t, env.Client, staggered("stagger-a", "shared"), staggered("stagger-b", "shared"), staggered("stagger-c", ""))
	for _, pool := range []string{"stagger-a", "stagger-b", "stagger-c"} {
		testutil.Create(t, env.Client, testutil.Node(pool+"-0", testutil.WithLabels(map[string]string{"pool": pool})))
		annotateNode(t, pool+"-0", "reboot-needed", `"true"`)
	}
	awaitNodeState(t, "stagger-c-0", pitstopv1alpha1.StateInMaintenance)
	var in, waiting []string
	testutil.Eventually(t, 30*time.Second, 50*time.Millisecond, func() error {
		in, waiting = nil, nil
		for _, n := range []string{"stagger-a-0", "stagger-b-0"} {
			switch testutil.GetNode(t, env.Client, n).Labels[pitstopv1alpha1.LabelState] {
			case string(pitstopv1alpha1.StateInMaintenance):
				in = append(in, n)
			case string(pitstopv1alpha1.StateMaintenanceRequired):
				waiting = append(waiting, n)
			}
		}
		if len(in) == 0 || len(in)+len(waiting) < 2 {
			return fmt.Errorf("in maintenance %v, waiting %v", in, waiting)
		}
		return nil
	})
	time.Sleep(2 * time.Second)
	for _, n := range waiting {
		if got := testutil.GetNode(t, env.Client, n).Labels[pitstopv1alpha1.LabelState]; got != string(pitstopv1alpha1.StateMaintenanceRequired) {
			t.Errorf("%s is %s while %v holds the group's one slot, want it waiting", n, got, in)
		}
	}
	if len(in) != 1 {
		t.Errorf("in maintenance: %v, want one node of the two profiles sharing the stagger group", in)
	}
}

// TestANodeWaitingForAStaggerGoesWhenTheSlotExpires: a stagger lets one
// node in per 4 s; the first node is out of maintenance again at once, so
// only its slot holds the second back, and that slot expires without an
// event. The second node goes about 4 s after the first, when the slot
// expires, not at the 30 s recheck of every waiting node.
func TestANodeWaitingForAStaggerGoesWhenTheSlotExpires(t *testing.T) {
	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{})
	p := rollingProfile("paced", "paced", 5)
	p.Spec.Checks = append(p.Spec.Checks, pitstopv1alpha1.CheckInstance{Name: "spaced",
		Stagger: &pitstopv1alpha1.StaggerCheck{Duration: pitstopv1alpha1.Duration{Duration: 4 * time.Second}, Parallel: 1}})
	p.Spec.States.MaintenanceRequired.Transitions[0].Check = "budget && spaced"
	// Out of maintenance as soon as it is in: the trigger takes the
	// request off on the way in.
	p.Spec.Triggers = append(p.Spec.Triggers, pitstopv1alpha1.TriggerInstance{Name: "done",
		AlterAnnotation: &pitstopv1alpha1.AlterTrigger{Key: "reboot-needed", Remove: true}})
	p.Spec.States.MaintenanceRequired.Transitions[0].Triggers = []string{"mark", "done"}
	testutil.Create(t, env.Client, p)
	nodes := []string{"paced-0", "paced-1"}
	for _, n := range nodes {
		testutil.Create(t, env.Client, testutil.Node(n, testutil.WithLabels(map[string]string{"pool": "paced"})))
		annotateNode(t, n, "reboot-needed", `"true"`)
	}
	// Each node's first sight back in operational, after maintenance, and
	// when it took the stagger's slot (the Lease's own acquire time, set by
	// pitstop as it let the node in: what the stagger spaces out).
	through := map[string]time.Time{}
	acquired := map[string]time.Time{}
	testutil.Eventually(t, 40*time.Second, 50*time.Millisecond, func() error {
		leases := &coordinationv1.LeaseList{}
		if err := env.Client.List(t.Context(), leases, client.InNamespace("pitstop-system")); err != nil {
			return err
		}
		for _, l := range leases.Items {
			holder := budget.HolderOf(&l)
			if l.Annotations[pitstopv1alpha1.AnnotationBudgetName] == "paced-stagger-spaced" && holder != "" &&
				l.Spec.AcquireTime != nil && acquired[holder].IsZero() {
				acquired[holder] = l.Spec.AcquireTime.Time
			}
		}
		for _, n := range nodes {
			node := testutil.GetNode(t, env.Client, n)
			if _, asked := node.Annotations["reboot-needed"]; !asked && through[n].IsZero() &&
				node.Labels[pitstopv1alpha1.LabelState] == string(pitstopv1alpha1.StateOperational) {
				through[n] = time.Now()
			}
		}
		if len(through) < 2 {
			return fmt.Errorf("through maintenance: %v", through)
		}
		return nil
	})
	if len(acquired) != 2 {
		t.Fatalf("stagger slots seen taken: %v, want one by each node", acquired)
	}
	if taken := acquired[nodes[1]].Sub(acquired[nodes[0]]).Abs(); taken < 4*time.Second {
		t.Errorf("the second node took the stagger's slot %s after the first, within the stagger's 4s", taken)
	}
	gap := through[nodes[1]].Sub(through[nodes[0]]).Abs()
	if gap > 10*time.Second {
		t.Errorf("the second node went %s after the first, whose slot expired after 4s: it waited for a recheck, not for the slot", gap.Round(100*time.Millisecond))
	}
	t.Logf("the second node took the slot %s and went %s after the first", acquired[nodes[1]].Sub(acquired[nodes[0]]).Abs().Round(10*time.Millisecond), gap.Round(100*time.Millisecond))
}
