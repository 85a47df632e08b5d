package profile_test

import (
	"fmt"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/maintenance"
	"github.com/pitstop-dev/pitstop/internal/testutil"
	"github.com/pitstop-dev/pitstop/internal/testutil/clustertest"
)

// TestCordonThenDrain is the maintenance-controller's eviction with action
// cordon, then drain: entering maintenance-required cordons the node and
// leaves its pods where they are; the approval's drain trigger then drains
// the same NodeMaintenance before the node is in maintenance; the restore
// uncordons it.
func TestCordonThenDrain(t *testing.T) {
	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{})
	testutil.Kubelet(t, env.Clientset)
	p := rollingProfile("cordoner", "cordoner", 1)
	p.Spec.Checks = append(p.Spec.Checks, pitstopv1alpha1.CheckInstance{Name: "approved", HasAnnotation: &pitstopv1alpha1.KeyValueCheck{Key: "approved"}})
	p.Spec.Triggers = append(p.Spec.Triggers,
		pitstopv1alpha1.TriggerInstance{Name: "cordon", Cordon: &pitstopv1alpha1.CordonTrigger{}},
		pitstopv1alpha1.TriggerInstance{Name: "drain", Drain: &pitstopv1alpha1.DrainTrigger{}},
		pitstopv1alpha1.TriggerInstance{Name: "restore", Restore: &pitstopv1alpha1.RestoreTrigger{}})
	p.Spec.States.Operational.Transitions[0].Triggers = []string{"cordon"}
	p.Spec.States.MaintenanceRequired.Transitions[0] = pitstopv1alpha1.Transition{Check: "approved", Triggers: []string{"drain"}, Next: pitstopv1alpha1.StateInMaintenance}
	p.Spec.States.InMaintenance.Transitions[0].Triggers = []string{"restore"}
	testutil.Create(t, env.Client, p)
	ns := testutil.Namespace(t, env.Client, "cordoner")
	node := "cordoner-0"
	testutil.Create(t, env.Client, testutil.Node(node, testutil.WithLabels(map[string]string{"pool": "cordoner"})))
	testutil.ManagedPods(t, env.Client, ns, node, "web", 2)

	annotateNode(t, node, "reboot-needed", `"true"`)
	awaitNodeState(t, node, pitstopv1alpha1.StateMaintenanceRequired)
	if n := testutil.GetNode(t, env.Client, node); !n.Spec.Unschedulable {
		t.Fatal("maintenance-required, but the cordon trigger did not cordon the node")
	}
	time.Sleep(time.Second)
	if left := testutil.PodsOn(t, env.Client, ns, node); len(left) != 2 {
		t.Fatalf("pods on the cordoned node: %v, want both still there (a cordon does not drain)", left)
	}

	annotateNode(t, node, "approved", `"true"`)
	awaitNodeState(t, node, pitstopv1alpha1.StateInMaintenance)
	if left := testutil.PodsOn(t, env.Client, ns, node); len(left) != 0 {
		t.Errorf("in maintenance with pods left: %v", left)
	}
	nm := &pitstopv1alpha1.NodeMaintenance{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: maintenance.ForProfile(node)}, nm); err != nil {
		t.Fatal(err)
	}
	if _, cordonOnly := nm.Annotations[pitstopv1alpha1.AnnotationExcludeNodeDraining]; cordonOnly {
		t.Errorf("the NodeMaintenance still skips the drain: %v", nm.Annotations)
	}

	annotateNode(t, node, "reboot-needed", "null")
	annotateNode(t, node, "approved", "null")
	awaitNodeState(t, node, pitstopv1alpha1.StateOperational)
	testutil.Eventually(t, 10*time.Second, 50*time.Millisecond, func() error {
		if n := testutil.GetNode(t, env.Client, node); n.Spec.Unschedulable {
			return fmt.Errorf("operational but cordoned")
		}
		return nil
	})
}
