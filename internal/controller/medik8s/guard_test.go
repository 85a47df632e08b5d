package medik8s_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/maintenance"
	"github.com/pitstop-dev/pitstop/internal/testutil"
	"github.com/pitstop-dev/pitstop/internal/testutil/clustertest"
)

// TestAdmissionFollowsOpenShiftsEtcdGuard: on OpenShift the etcd-guard
// PodDisruptionBudget in openshift-etcd decides, as the medik8s operator
// reads it. Five control-plane nodes, guard pods on three (the node count
// alone would let two go): while one guard is not Ready, another guarded
// node is refused with the operator's message; the node whose own guard
// is not Ready may go; once it is held, no other guarded node may.
func TestAdmissionFollowsOpenShiftsEtcdGuard(t *testing.T) {
	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{Medik8sCompat: true, Webhook: true, AsServiceAccount: true})
	var nodes []client.Object
	for i := range 5 {
		nodes = append(nodes, testutil.Node("guard-cp-"+string(rune('0'+i)), testutil.ControlPlane()))
	}
	create(t, nodes...)
	// At the end, while the manager still runs: the maintenances and
	// nodes go, so that no later test counts them.
	t.Cleanup(func() {
		for _, name := range []string{"guard-b", "guard-d"} {
			nm := medik8sNM(name, "", "")
			_ = env.Client.Delete(context.Background(), nm)
			testutil.Eventually(t, 20*time.Second, 50*time.Millisecond, func() error {
				err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(nm), nm)
				if apierrors.IsNotFound(err) {
					return nil
				}
				return fmt.Errorf("%s still there: %v", name, err)
			})
		}
		for _, n := range nodes {
			_ = env.Client.Delete(context.Background(), n)
		}
	})
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: maintenance.OpenShiftEtcdNamespace}}
	if err := env.Client.Create(t.Context(), ns); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	selector := map[string]string{"app": "guard", "k8s-app": "etcd-guard"}
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: maintenance.OpenShiftEtcdNamespace, Name: "etcd-guard-pdb"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptrTo(intstr.FromInt32(2)),
			Selector:     &metav1.LabelSelector{MatchLabels: selector},
		},
	}
	create(t, pdb)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), pdb) })
	var guards []*corev1.Pod
	for i := range 3 {
		node := "guard-cp-" + string(rune('0'+i))
		p := testutil.Pod(maintenance.OpenShiftEtcdNamespace, "etcd-guard-"+node, testutil.OnNode(node), testutil.WithPodLabels(selector))
		create(t, p)
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), p, client.GracePeriodSeconds(0)) })
		guards = append(guards, p)
	}
	// guard-cp-1's guard is not Ready: the budget's status, as the
	// disruption controller would write it, allows no disruption.
	testutil.SetPodReady(t, env.Client, guards[0], true)
	testutil.SetPodReady(t, env.Client, guards[1], false)
	testutil.SetPodReady(t, env.Client, guards[2], true)
	testutil.Eventually(t, 5*time.Second, 50*time.Millisecond, func() error {
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(pdb), pdb); err != nil {
			return err
		}
		pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, ExpectedPods: 3, CurrentHealthy: 2, DesiredHealthy: 2, DisruptionsAllowed: 0}
		return env.Client.Status().Update(t.Context(), pdb)
	})

	refused := func(name, node string) {
		t.Helper()
		err := env.Client.Create(t.Context(), medik8sNM(name, node, ""))
		want := "can not put master/control-plane node into maintenance at this moment, disrupting node " + node + " will violate etcd quorum"
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "etcd-guard-pdb") {
			t.Errorf("creating %s for %s: %v, want the medik8s refusal naming the etcd guard", name, node, err)
		}
	}
	refused("guard-a", "guard-cp-0")
	create(t, medik8sNM("guard-b", "guard-cp-1", ""))
	testutil.Eventually(t, 10*time.Second, 50*time.Millisecond, func() error {
		return env.Client.Get(t.Context(), client.ObjectKey{Name: "medik8s-guard-b"}, &pitstopv1alpha1.NodeMaintenance{})
	})
	// With guard-cp-1's guard Ready again and guard-cp-1 held, the guard
	// allows a disruption but the held node counts as down.
	testutil.SetPodReady(t, env.Client, guards[1], true)
	refused("guard-c", "guard-cp-2")
	// A control-plane node without a guard is judged by the node count.
	create(t, medik8sNM("guard-d", "guard-cp-3", ""))
}

func ptrTo[T any](v T) *T { return &v }
