package profile_test

import (
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/manager"
	"github.com/pitstop-dev/pitstop/internal/testutil"
	"github.com/pitstop-dev/pitstop/internal/testutil/clustertest"
)

// TestTheMaintenanceControllersMetrics: with --smc-compat (and the chart's
// RBAC for it), the maintenance-controller's metrics are exported under its
// names: each failed attempt at a transition counts in
// maintenance_controller_transition_failure_count; the pods of a
// Deployment and a DaemonSet on a node going into maintenance count once
// in maintenance_controller_pod_shuffle_count, and per replica of their
// owner in maintenance_controller_pod_shuffles_per_replica, however many
// attempts the entry took.
func TestTheMaintenanceControllersMetrics(t *testing.T) {
	const node, profile = "shuffler-0", "shuffler"
	binding := refuseMaintenancesOf(t, node)
	testutil.Create(t, env.Client, testutil.Node(node, testutil.WithLabels(map[string]string{"pool": profile})))
	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{AsServiceAccount: true, Tune: func(o *manager.Options) { o.SMCCompat = true }})
	testutil.Kubelet(t, env.Clientset)
	ns := testutil.Namespace(t, env.Client, profile)

	labels := map[string]string{"app": "web"}
	web := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](4), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "web"}}}},
	}}
	testutil.Create(t, env.Client, web)
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", OwnerReferences: []metav1.OwnerReference{
		{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: web.UID, Controller: ptr.To(true)}}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](4), Selector: web.Spec.Selector, Template: web.Spec.Template}}
	testutil.Create(t, env.Client, rs)
	agentLabels := map[string]string{"app": "agent"}
	agent := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"}, Spec: appsv1.DaemonSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: agentLabels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: agentLabels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "agent"}}}},
	}}
	testutil.Create(t, env.Client, agent)
	agent.Status.NumberReady, agent.Status.DesiredNumberScheduled = 2, 2
	if err := env.Client.Status().Update(t.Context(), agent); err != nil {
		t.Fatal(err)
	}
	agentPod := testutil.Pod(ns, "agent-0", testutil.OnNode(node), testutil.OwnedBy("DaemonSet", "agent"))
	testutil.Create(t, env.Client, agentPod)
	testutil.AwaitRunning(t, env.Client, agentPod)
	testutil.ManagedPods(t, env.Client, ns, node, "web", 2)

	testutil.Create(t, env.Client, restoringProfile(profile))
	annotateNode(t, node, "reboot-needed", `"true"`)
	failures := map[string]string{"profile": profile}
	testutil.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		if n := counterValue(t, "maintenance_controller_transition_failure_count", failures); n < 2 {
			return fmt.Errorf("maintenance_controller_transition_failure_count%v = %v, want at least 2", failures, n)
		}
		return nil
	})
	if err := env.Client.Delete(t.Context(), binding); err != nil {
		t.Fatal(err)
	}
	awaitNodeState(t, node, pitstopv1alpha1.StateInMaintenance)

	for _, tc := range []struct {
		owner             string
		count, perReplica float64
	}{
		{"deployment_web", 2, 0.5},
		{"daemon_set_agent", 1, 0.5},
	} {
		l := map[string]string{"owner": tc.owner, "profile": profile}
		if n := counterValue(t, "maintenance_controller_pod_shuffle_count", l); n != tc.count {
			t.Errorf("maintenance_controller_pod_shuffle_count%v = %v, want %v (once, however many attempts)", l, n, tc.count)
		}
		if n := counterValue(t, "maintenance_controller_pod_shuffles_per_replica", l); n != tc.perReplica {
			t.Errorf("maintenance_controller_pod_shuffles_per_replica%v = %v, want %v", l, n, tc.perReplica)
		}
	}
}
