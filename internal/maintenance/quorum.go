package maintenance

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/kubectl/pkg/util/podutils"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/nodeview"
)

// Where the etcd members of a cluster show themselves. A stacked etcd of
// kubeadm, RKE2 and their kin runs as a static pod in kube-system labelled
// component=etcd; OpenShift's runs in openshift-etcd labelled app=etcd,
// beside the guard pods that its etcd-guard PodDisruptionBudget counts
// (named etcd-quorum-guard before OpenShift 4.11).
const (
	EtcdNamespace          = "kube-system"
	EtcdLabel              = "component"
	EtcdLabelValue         = "etcd"
	OpenShiftEtcdNamespace = "openshift-etcd"
	OpenShiftEtcdLabel     = "app"
)

// QuorumView is what the control-plane quorum rule judges, read fresh
// from the API server for each decision (ReadQuorum).
type QuorumView struct {
	// Nodes are the control-plane nodes (either role label).
	Nodes []corev1.Node
	// Etcd are the pods that look like etcd members. Only those bound to
	// a control-plane node count: a kubelet may publish a mirror pod of
	// any name for its own node, but cannot give its node a role label.
	Etcd []corev1.Pod
	// GuardPDBs are the PodDisruptionBudgets in openshift-etcd, and
	// GuardPods the pods there; both empty outside OpenShift.
	GuardPDBs []policyv1.PodDisruptionBudget
	GuardPods []corev1.Pod
	// Down are the nodes other maintenances hold: they count as down.
	Down map[string]bool
	// AllowSingle lets the only control-plane node of a cluster go into
	// maintenance, which quorum alone would never allow (an
	// administrator's choice: --allow-single-control-plane-maintenance).
	AllowSingle bool
}

// Violation says why taking target down would break the control plane's
// quorum, or "" when it would not (or target is not a control-plane
// node). Every rule that can see something must agree:
//   - the control-plane nodes: a quorum of them stays Ready;
//   - the etcd members, where their pods are visible: a quorum of them
//     stays up (pod Ready, on a Ready node no maintenance holds);
//   - OpenShift's etcd guard: the healthy guard pods left on the other
//     nodes are at least the PodDisruptionBudget's desiredHealthy, which
//     is the medik8s Node Maintenance Operator's rule (disruptionsAllowed
//     of at least one, or target's guard pod not Ready) extended to the
//     nodes other maintenances hold.
//
// The only control-plane node of a cluster goes only with AllowSingle.
func (v QuorumView) Violation(target string) string {
	cp := map[string]*corev1.Node{}
	for i := range v.Nodes {
		cp[v.Nodes[i].Name] = &v.Nodes[i]
	}
	if cp[target] == nil {
		return ""
	}
	if len(cp) == 1 {
		if v.AllowSingle {
			return ""
		}
		return fmt.Sprintf("control-plane node %s cannot go into maintenance: it is the cluster's only control-plane node (an administrator may allow it with --allow-single-control-plane-maintenance)", target)
	}
	up := func(name string) bool {
		n := cp[name]
		return n != nil && nodeview.Ready(n) && !v.Down[name]
	}
	remaining := 0
	for name := range cp {
		if name != target && up(name) {
			remaining++
		}
	}
	if quorum := len(cp)/2 + 1; remaining < quorum {
		return fmt.Sprintf("control-plane node %s cannot go into maintenance: %d of %d control-plane nodes would stay Ready, fewer than the quorum of %d", target, remaining, len(cp), quorum)
	}
	if why := v.etcdViolation(target, cp, up); why != "" {
		return why
	}
	return v.guardViolation(target)
}

// etcdViolation judges the etcd members that show as pods.
func (v QuorumView) etcdViolation(target string, cp map[string]*corev1.Node, up func(string) bool) string {
	members := map[string]bool{} // node → its member is up
	for i := range v.Etcd {
		p := &v.Etcd[i]
		if cp[p.Spec.NodeName] == nil || !p.DeletionTimestamp.IsZero() {
			continue
		}
		members[p.Spec.NodeName] = members[p.Spec.NodeName] || (podutils.IsPodReady(p) && up(p.Spec.NodeName))
	}
	if _, member := members[target]; !member {
		return ""
	}
	remaining := 0
	for name, ok := range members {
		if name != target && ok {
			remaining++
		}
	}
	if quorum := len(members)/2 + 1; remaining < quorum {
		return fmt.Sprintf("control-plane node %s cannot go into maintenance: %d of %d etcd members would stay up (a Ready etcd pod on a Ready node no maintenance holds), fewer than the quorum of %d", target, remaining, len(members), quorum)
	}
	return ""
}

// guardViolation judges OpenShift's etcd-guard PodDisruptionBudget.
func (v QuorumView) guardViolation(target string) string {
	switch len(v.GuardPDBs) {
	case 0:
		return ""
	case 1:
	default:
		names := make([]string, 0, len(v.GuardPDBs))
		for _, p := range v.GuardPDBs {
			names = append(names, p.Name)
		}
		slices.Sort(names)
		return fmt.Sprintf("control-plane node %s cannot go into maintenance: etcd quorum cannot be checked, namespace %s holds %d PodDisruptionBudgets (%s) where the etcd guard has one", target, OpenShiftEtcdNamespace, len(names), strings.Join(names, ", "))
	}
	pdb := &v.GuardPDBs[0]
	if pdb.Status.ObservedGeneration < pdb.Generation || pdb.Status.ExpectedPods == 0 {
		return fmt.Sprintf("control-plane node %s cannot go into maintenance: etcd quorum cannot be checked, PodDisruptionBudget %s/%s has no current status", target, pdb.Namespace, pdb.Name)
	}
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil || sel.Empty() {
		return fmt.Sprintf("control-plane node %s cannot go into maintenance: etcd quorum cannot be checked, PodDisruptionBudget %s/%s has no usable selector", target, pdb.Namespace, pdb.Name)
	}
	healthy := 0
	for i := range v.GuardPods {
		p := &v.GuardPods[i]
		if p.Spec.NodeName == target || v.Down[p.Spec.NodeName] || !p.DeletionTimestamp.IsZero() {
			continue
		}
		if sel.Matches(labels.Set(p.Labels)) && podutils.IsPodReady(p) {
			healthy++
		}
	}
	if healthy < int(pdb.Status.DesiredHealthy) {
		return fmt.Sprintf("control-plane node %s cannot go into maintenance: %d etcd guard pods would stay Ready on other nodes no maintenance holds, fewer than the %d PodDisruptionBudget %s/%s wants", target, healthy, pdb.Status.DesiredHealthy, pdb.Namespace, pdb.Name)
	}
	return ""
}

// ReadQuorum reads the control-plane nodes through nodes and the etcd
// members and guard through live, which must not be a cache: pods are
// not cached whole, and a stale view could take quorum down. Down and
// AllowSingle are the caller's.
func ReadQuorum(ctx context.Context, nodes, live client.Reader) (QuorumView, error) {
	var v QuorumView
	seen := map[string]bool{}
	for _, label := range []string{LabelControlPlane, LabelMaster} {
		list := &corev1.NodeList{}
		if err := nodes.List(ctx, list, client.HasLabels{label}); err != nil {
			return v, fmt.Errorf("listing control-plane nodes: %w", err)
		}
		for _, n := range list.Items {
			if !seen[n.Name] {
				seen[n.Name] = true
				v.Nodes = append(v.Nodes, n)
			}
		}
	}
	etcd := &corev1.PodList{}
	if err := live.List(ctx, etcd, client.InNamespace(EtcdNamespace), client.MatchingLabels{EtcdLabel: EtcdLabelValue}); err != nil {
		return v, fmt.Errorf("listing the etcd pods in %s: %w", EtcdNamespace, err)
	}
	v.Etcd = etcd.Items
	pdbs := &policyv1.PodDisruptionBudgetList{}
	if err := live.List(ctx, pdbs, client.InNamespace(OpenShiftEtcdNamespace)); err != nil {
		return v, fmt.Errorf("listing the PodDisruptionBudgets in %s: %w", OpenShiftEtcdNamespace, err)
	}
	v.GuardPDBs = pdbs.Items
	openshift := &corev1.PodList{}
	if err := live.List(ctx, openshift, client.InNamespace(OpenShiftEtcdNamespace)); err != nil {
		return v, fmt.Errorf("listing the pods in %s: %w", OpenShiftEtcdNamespace, err)
	}
	v.GuardPods = openshift.Items
	for _, p := range openshift.Items {
		if p.Labels[OpenShiftEtcdLabel] == EtcdLabelValue {
			v.Etcd = append(v.Etcd, p)
		}
	}
	return v, nil
}

// QuorumRefusal says why admitting nm would break the control plane's
// quorum ("" when it would not): the nodes that other NodeMaintenances
// hold or are about to hold count as down, so that two maintenances
// admitted together cannot break it. Admission of every API's
// maintenances (pitstop's, medik8s') asks it; nodes and NodeMaintenances
// come through cached, the etcd members and guard through live.
func QuorumRefusal(ctx context.Context, cached, live client.Reader, nm *pitstopv1alpha1.NodeMaintenance, allowSingle bool) (string, error) {
	existing := &pitstopv1alpha1.NodeMaintenanceList{}
	if err := cached.List(ctx, existing); err != nil {
		return "", fmt.Errorf("listing NodeMaintenances: %w", err)
	}
	return QuorumRefusalAmong(ctx, cached, live, nm, existing.Items, allowSingle)
}

// QuorumRefusalAmong is QuorumRefusal for a caller that has listed the
// NodeMaintenances (existing) already.
func QuorumRefusalAmong(ctx context.Context, cached, live client.Reader, nm *pitstopv1alpha1.NodeMaintenance, existing []pitstopv1alpha1.NodeMaintenance, allowSingle bool) (string, error) {
	v, err := ReadQuorum(ctx, cached, live)
	if err != nil {
		return "", err
	}
	v.Down = map[string]bool{}
	for _, o := range existing {
		if o.Name != nm.Name && o.Spec.NodeName != nm.Spec.NodeName {
			v.Down[o.Spec.NodeName] = true
		}
	}
	v.AllowSingle = allowSingle
	return v.Violation(nm.Spec.NodeName), nil
}
