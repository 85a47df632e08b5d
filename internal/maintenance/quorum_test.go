package maintenance_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pitstop-dev/pitstop/internal/maintenance"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

func cpNode(name string, opts ...testutil.NodeOption) corev1.Node {
	return *testutil.Node(name, append(opts, testutil.ControlPlane())...)
}

// podOn is a pod of namespace on node, Ready or not, with labels.
func podOn(namespace, name, node string, ready bool, labels map[string]string) corev1.Pod {
	p := *testutil.Pod(namespace, name, testutil.OnNode(node), testutil.WithPodLabels(labels))
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
	return p
}

func etcdOn(node string, ready bool) corev1.Pod {
	return podOn(maintenance.EtcdNamespace, "etcd-"+node, node, ready, map[string]string{maintenance.EtcdLabel: maintenance.EtcdLabelValue})
}

func TestQuorumOfControlPlaneNodes(t *testing.T) {
	master := func(name string) corev1.Node {
		return *testutil.Node(name, testutil.WithLabels(map[string]string{maintenance.LabelMaster: ""}))
	}
	three := []corev1.Node{cpNode("cp-0"), cpNode("cp-1"), cpNode("cp-2")}
	five := []corev1.Node{cpNode("cp-0"), cpNode("cp-1"), cpNode("cp-2"), cpNode("cp-3"), cpNode("cp-4")}
	for _, tc := range []struct {
		name   string
		target string
		view   maintenance.QuorumView
		refuse string // a part of the refusal; "" allows
	}{
		{"allows a worker whatever the control plane's state", "worker", maintenance.QuorumView{Nodes: three, Down: map[string]bool{"cp-0": true, "cp-1": true}}, ""},
		{"allows one of three control-plane nodes", "cp-0", maintenance.QuorumView{Nodes: three}, ""},
		{"refuses a second of three while one is in maintenance", "cp-1", maintenance.QuorumView{Nodes: three, Down: map[string]bool{"cp-0": true}}, "1 of 3 control-plane nodes would stay Ready"},
		{"refuses one of three while another is NotReady", "cp-0", maintenance.QuorumView{Nodes: []corev1.Node{cpNode("cp-0"), cpNode("cp-1", testutil.NotReady()), cpNode("cp-2")}}, "fewer than the quorum of 2"},
		{"allows two of five", "cp-1", maintenance.QuorumView{Nodes: five, Down: map[string]bool{"cp-0": true}}, ""},
		{"refuses a third of five", "cp-2", maintenance.QuorumView{Nodes: five, Down: map[string]bool{"cp-0": true, "cp-1": true}}, "2 of 5"},
		{"refuses the only control-plane node", "cp-0", maintenance.QuorumView{Nodes: three[:1]}, "only control-plane node"},
		{"allows the only control-plane node when the administrator does", "cp-0", maintenance.QuorumView{Nodes: three[:1], AllowSingle: true}, ""},
		{"allowing the only one allows neither of two", "cp-0", maintenance.QuorumView{Nodes: three[:2], AllowSingle: true}, "1 of 2"},
		{"counts the legacy master label", "m-1", maintenance.QuorumView{Nodes: []corev1.Node{master("m-0"), master("m-1"), master("m-2")}, Down: map[string]bool{"m-0": true}}, "quorum of 2"},
		{"allows a node that is already down to go", "cp-1", maintenance.QuorumView{Nodes: []corev1.Node{cpNode("cp-0"), cpNode("cp-1", testutil.NotReady()), cpNode("cp-2")}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkRefusal(t, tc.view.Violation(tc.target), tc.target, tc.refuse)
		})
	}
}

func checkRefusal(t *testing.T, why, target, want string) {
	t.Helper()
	if want == "" {
		if why != "" {
			t.Fatalf("refused: %q", why)
		}
		return
	}
	if !strings.Contains(why, want) {
		t.Fatalf("refusal %q, want one saying %q", why, want)
	}
	if !strings.Contains(why, target) {
		t.Errorf("refusal %q does not name the node %s", why, target)
	}
}

// TestQuorumOfEtcdMembers: where the etcd members show as pods, a
// member that is not Ready counts as down though its node is Ready; a
// control-plane node without a member is judged by the node count alone;
// pods that claim to be etcd on a worker do not count.
func TestQuorumOfEtcdMembers(t *testing.T) {
	nodes := []corev1.Node{cpNode("cp-0"), cpNode("cp-1"), cpNode("cp-2"), cpNode("cp-3"), cpNode("cp-4"), *testutil.Node("worker-0"), *testutil.Node("worker-1")}
	stacked := []corev1.Pod{etcdOn("cp-0", true), etcdOn("cp-1", true), etcdOn("cp-2", true)}
	for _, tc := range []struct {
		name   string
		target string
		etcd   []corev1.Pod
		down   map[string]bool
		refuse string
	}{
		{"allows one of three members", "cp-0", stacked, nil, ""},
		{"refuses a member while another member's pod is not Ready", "cp-0", []corev1.Pod{etcdOn("cp-0", true), etcdOn("cp-1", false), etcdOn("cp-2", true)}, nil, "1 of 3 etcd members would stay up"},
		{"refuses a member while another member's node is in maintenance", "cp-1", stacked, map[string]bool{"cp-0": true}, "etcd members"},
		{"allows a control-plane node without a member while one member is down", "cp-4", stacked, map[string]bool{"cp-0": true}, ""},
		{"ignores etcd pods on workers", "cp-0", append([]corev1.Pod{etcdOn("worker-0", true), etcdOn("worker-1", true), etcdOn("cp-0", true), etcdOn("cp-1", false)}, etcdOn("cp-2", false)), nil, "0 of 3 etcd members"},
		{"finds OpenShift's etcd pods", "cp-0", []corev1.Pod{
			podOn(maintenance.OpenShiftEtcdNamespace, "etcd-cp-0", "cp-0", true, map[string]string{maintenance.OpenShiftEtcdLabel: maintenance.EtcdLabelValue}),
			podOn(maintenance.OpenShiftEtcdNamespace, "etcd-cp-1", "cp-1", false, map[string]string{maintenance.OpenShiftEtcdLabel: maintenance.EtcdLabelValue}),
			podOn(maintenance.OpenShiftEtcdNamespace, "etcd-cp-2", "cp-2", true, map[string]string{maintenance.OpenShiftEtcdLabel: maintenance.EtcdLabelValue}),
		}, nil, "1 of 3 etcd members"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := maintenance.QuorumView{Nodes: nodes[:5], Etcd: tc.etcd, Down: tc.down}
			checkRefusal(t, v.Violation(tc.target), tc.target, tc.refuse)
		})
	}
}

func guardPDB(name string, desired int32) policyv1.PodDisruptionBudget {
	return policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: maintenance.OpenShiftEtcdNamespace, Name: name, Generation: 1},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guard"}}},
		Status:     policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, ExpectedPods: 3, DesiredHealthy: desired},
	}
}

func guardOn(node string, ready bool) corev1.Pod {
	return podOn(maintenance.OpenShiftEtcdNamespace, "etcd-guard-"+node, node, ready, map[string]string{"app": "guard"})
}

// TestQuorumOfOpenShiftsEtcdGuard: with the etcd-guard
// PodDisruptionBudget, the medik8s operator's answers (disruptions
// allowed, or the target's guard not Ready) and a refusal when the guard
// cannot be read; a node other maintenances hold counts as down.
func TestQuorumOfOpenShiftsEtcdGuard(t *testing.T) {
	// Five control-plane nodes, guards on three: the node count alone
	// would let two go.
	nodes := []corev1.Node{cpNode("cp-0"), cpNode("cp-1"), cpNode("cp-2"), cpNode("cp-3"), cpNode("cp-4")}
	healthy := []corev1.Pod{guardOn("cp-0", true), guardOn("cp-1", true), guardOn("cp-2", true)}
	stale := guardPDB("etcd-guard-pdb", 2)
	stale.Generation = 2
	for _, tc := range []struct {
		name   string
		target string
		pdbs   []policyv1.PodDisruptionBudget
		guards []corev1.Pod
		down   map[string]bool
		refuse string
	}{
		{"allows while the budget allows a disruption", "cp-0", []policyv1.PodDisruptionBudget{guardPDB("etcd-guard-pdb", 2)}, healthy, nil, ""},
		{"refuses while another guard is not Ready", "cp-0", []policyv1.PodDisruptionBudget{guardPDB("etcd-guard-pdb", 2)}, []corev1.Pod{guardOn("cp-0", true), guardOn("cp-1", false), guardOn("cp-2", true)}, nil, "1 etcd guard pods would stay Ready"},
		{"allows the node whose own guard is not Ready", "cp-1", []policyv1.PodDisruptionBudget{guardPDB("etcd-guard-pdb", 2)}, []corev1.Pod{guardOn("cp-0", true), guardOn("cp-1", false), guardOn("cp-2", true)}, nil, ""},
		{"refuses while another node's maintenance holds a guard", "cp-1", []policyv1.PodDisruptionBudget{guardPDB("etcd-guard-pdb", 2)}, healthy, map[string]bool{"cp-2": true}, "1 etcd guard pods would stay Ready on other nodes"},
		{"refuses two budgets", "cp-0", []policyv1.PodDisruptionBudget{guardPDB("etcd-guard-pdb", 2), guardPDB("other", 1)}, healthy, nil, "2 PodDisruptionBudgets (etcd-guard-pdb, other)"},
		{"refuses a budget whose status is not current", "cp-0", []policyv1.PodDisruptionBudget{stale}, healthy, nil, "no current status"},
		{"reads the name used before OpenShift 4.11", "cp-0", []policyv1.PodDisruptionBudget{guardPDB("etcd-quorum-guard", 3)}, healthy, nil, "fewer than the 3 PodDisruptionBudget openshift-etcd/etcd-quorum-guard wants"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := maintenance.QuorumView{Nodes: nodes, GuardPDBs: tc.pdbs, GuardPods: tc.guards, Down: tc.down}
			checkRefusal(t, v.Violation(tc.target), tc.target, tc.refuse)
		})
	}
}
