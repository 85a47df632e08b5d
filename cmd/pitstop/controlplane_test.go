package main

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// TestRunMaintainsTheOnlyControlPlaneNodeOnlyWhenAllowed: in a cluster
// whose only control-plane node is asked into maintenance, `pitstop run`
// holds the cordon back and says why; run again with
// --allow-single-control-plane-maintenance, it cordons the node, and
// deleting the NodeMaintenance gives the node back.
func TestRunMaintainsTheOnlyControlPlaneNodeOnlyWhenAllowed(t *testing.T) {
	node := testutil.Node("lone-cp", testutil.ControlPlane())
	testutil.Create(t, env.Client, node)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), node) })
	nm := &pitstopv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "lone-cp"}, Spec: pitstopv1alpha1.NodeMaintenanceSpec{NodeName: "lone-cp", Reason: "kernel update"}}
	testutil.Create(t, env.Client, nm)

	cordoned := func() *metav1.Condition {
		got := &pitstopv1alpha1.NodeMaintenance{}
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(nm), got); err != nil {
			return nil
		}
		return meta.FindStatusCondition(got.Status.Conditions, pitstopv1alpha1.ConditionCordoned)
	}

	args, _, _ := runArgs(t, "pitstop-lone-cp")
	p := startPitstop(t, args...)
	testutil.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		c := cordoned()
		if c == nil || c.Reason != pitstopv1alpha1.ReasonQuorumProtected || !strings.Contains(c.Message, "only control-plane node") || !strings.Contains(c.Message, "--allow-single-control-plane-maintenance") {
			return fmt.Errorf("Cordoned is %+v, want %s naming the flag", c, pitstopv1alpha1.ReasonQuorumProtected)
		}
		return nil
	})
	if testutil.GetNode(t, env.Client, "lone-cp").Spec.Unschedulable {
		t.Fatal("the only control-plane node was cordoned without --allow-single-control-plane-maintenance")
	}
	if code := p.signal(syscall.SIGTERM, 15*time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}

	args, _, _ = runArgs(t, "pitstop-lone-cp")
	p = startPitstop(t, append(args, "--allow-single-control-plane-maintenance")...)
	testutil.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		if c := cordoned(); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("Cordoned is %+v, want True", c)
		}
		if !testutil.GetNode(t, env.Client, "lone-cp").Spec.Unschedulable {
			return fmt.Errorf("node lone-cp is not cordoned")
		}
		return nil
	})
	if err := env.Client.Delete(t.Context(), nm); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(nm), &pitstopv1alpha1.NodeMaintenance{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("NodeMaintenance lone-cp still there: %v", err)
		}
		if testutil.GetNode(t, env.Client, "lone-cp").Spec.Unschedulable {
			return fmt.Errorf("node lone-cp still cordoned")
		}
		return nil
	})
	if code := p.signal(syscall.SIGTERM, 15*time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
}
