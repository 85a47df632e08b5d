package profile_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/engine"
	"github.com/pitstop-dev/pitstop/internal/manager"
	"github.com/pitstop-dev/pitstop/internal/testutil"
	"github.com/pitstop-dev/pitstop/internal/testutil/clustertest"
)

// TestANodeTheMaintenanceControllerLeftKeepsItsStateAndItsLabel: with
// --smc-compat, a node the maintenance-controller left in-maintenance
// (its record, cloud.sap/maintenance-data) stays in-maintenance when
// pitstop takes over, since the time it entered it; every node carries
// cloud.sap/maintenance-state beside pitstop.dev/state, and both follow
// the node's moves. The node the maintenance-controller cordoned (no
// NodeMaintenance holds it) is uncordoned on its way out by the restore
// trigger an imported `eviction: uncordon` becomes.
func TestANodeTheMaintenanceControllerLeftKeepsItsStateAndItsLabel(t *testing.T) {
	entered := time.Now().UTC().Add(-10 * time.Minute).Truncate(time.Millisecond)
	p := rollingProfile("smc", "smc", 1)
	p.Spec.Triggers = append(p.Spec.Triggers, pitstopv1alpha1.TriggerInstance{Name: "uncordon", Restore: &pitstopv1alpha1.RestoreTrigger{Uncordon: true}})
	p.Spec.States.InMaintenance.Transitions[0].Triggers = []string{"uncordon"}
	testutil.Create(t, env.Client, p)
	testutil.Create(t, env.Client,
		testutil.Node("smc-0", testutil.WithLabels(map[string]string{"pool": "smc", pitstopv1alpha1.LabelSeedState: "in-maintenance"}), testutil.Unschedulable(), func(n *corev1.Node) {
			n.Annotations = map[string]string{"reboot-needed": "true", pitstopv1alpha1.AnnotationSeedData: fmt.Sprintf(
				`{"Profiles":{"smc":{"Transition":%q,"Current":"in-maintenance","Previous":"maintenance-required"}},"Notifications":{}}`, entered.Format(time.RFC3339Nano))}
		}),
		testutil.Node("smc-1", testutil.WithLabels(map[string]string{"pool": "smc"})))
	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{Tune: func(o *manager.Options) { o.SMCCompat = true }})

	states := func(node, want string) {
		t.Helper()
		testutil.Eventually(t, 20*time.Second, 100*time.Millisecond, func() error {
			n := testutil.GetNode(t, env.Client, node)
			if n.Labels[pitstopv1alpha1.LabelState] != want || n.Labels[pitstopv1alpha1.LabelSeedState] != want {
				return fmt.Errorf("%s: %s=%q, %s=%q, want %s", node, pitstopv1alpha1.LabelState, n.Labels[pitstopv1alpha1.LabelState],
					pitstopv1alpha1.LabelSeedState, n.Labels[pitstopv1alpha1.LabelSeedState], want)
			}
			return nil
		})
	}
	states("smc-0", "in-maintenance")
	states("smc-1", "operational")
	if !testutil.GetNode(t, env.Client, "smc-0").Spec.Unschedulable {
		t.Fatal("smc-0 was uncordoned while in maintenance")
	}
	rec, err := engine.ReadRecord(testutil.GetNode(t, env.Client, "smc-0"))
	if err != nil {
		t.Fatal(err)
	}
	if pr := rec.Profiles["smc"]; pr.Current != pitstopv1alpha1.StateInMaintenance || !pr.Since.Equal(entered) {
		t.Errorf("pitstop's record %+v, want in-maintenance since %s", pr, entered)
	}

	n := testutil.GetNode(t, env.Client, "smc-0")
	base := n.DeepCopy()
	delete(n.Annotations, "reboot-needed")
	if err := env.Client.Patch(t.Context(), n, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	states("smc-0", "operational")
	if testutil.GetNode(t, env.Client, "smc-0").Spec.Unschedulable {
		t.Error("smc-0 is operational but still cordoned: the restore with uncordon left the maintenance-controller's cordon")
	}
}
