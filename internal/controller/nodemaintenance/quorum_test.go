package nodemaintenance_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/controller/nodemaintenance"
	"github.com/pitstop-dev/pitstop/internal/maintenance"
	"github.com/pitstop-dev/pitstop/internal/testutil"
	"github.com/pitstop-dev/pitstop/internal/testutil/clustertest"
)

// TestQuorumFollowsTheEtcdMembers: three Ready control-plane nodes, each
// with a stacked etcd member shown as a kube-system pod. While one
// member's pod is not Ready, the controller (running with the chart's
// RBAC, webhook off) holds back the cordon of another member's node,
// which the node count alone would allow; when the member is Ready again
// the maintenance goes on.
func TestQuorumFollowsTheEtcdMembers(t *testing.T) {
	nodemaintenance.ShortenQuorumRetry(t, time.Second)
	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{AsServiceAccount: true})
	removeAtEnd(t, "etcdq-")
	var members []*corev1.Pod
	for _, n := range []string{"etcdq-cp-0", "etcdq-cp-1", "etcdq-cp-2"} {
		create(t, testutil.Node(n, testutil.ControlPlane()))
		members = append(members, etcdMember(t, n, n != "etcdq-cp-1"))
	}
	nm := nodeMaintenance("etcdq-a", "etcdq-cp-0")
	create(t, nm)
	got := awaitCondition(t, nm, condCordoned, metav1.ConditionFalse, pitstopv1alpha1.ReasonQuorumProtected, 10*time.Second)
	if msg := condition(got, condCordoned).Message; !strings.Contains(msg, "1 of 3 etcd members would stay up") {
		t.Errorf("Cordoned says %q, want the etcd members counted", msg)
	}
	time.Sleep(2 * time.Second) // a look or two more, still held back
	if node(t, "etcdq-cp-0").Spec.Unschedulable {
		t.Fatal("etcdq-cp-0 was cordoned while another etcd member was not Ready")
	}
	testutil.SetPodReady(t, env.Client, members[1], true)
	awaitCondition(t, nm, condCordoned, metav1.ConditionTrue, pitstopv1alpha1.ReasonCordoned, 10*time.Second)
}

// etcdMember is a stacked etcd member's mirror pod on node.
func etcdMember(t *testing.T, node string, ready bool) *corev1.Pod {
	t.Helper()
	p := testutil.Pod(maintenance.EtcdNamespace, "etcd-"+node, testutil.OnNode(node),
		testutil.WithPodLabels(map[string]string{maintenance.EtcdLabel: maintenance.EtcdLabelValue, "tier": "control-plane"}))
	create(t, p)
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), p, client.GracePeriodSeconds(0))
	})
	testutil.SetPodReady(t, env.Client, p, ready)
	return p
}
