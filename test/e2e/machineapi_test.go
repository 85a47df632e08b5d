//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pitstop-dev/pitstop/config"
	"github.com/pitstop-dev/pitstop/internal/localcluster"
	"github.com/pitstop-dev/pitstop/internal/machineapi"
	"github.com/pitstop-dev/pitstop/internal/manager"
	"github.com/pitstop-dev/pitstop/internal/testutil"
	"github.com/pitstop-dev/pitstop/internal/testutil/clustertest"
)

// machineNS holds the test's Machine API objects.
const machineNS = "machines"

// TestMachineSetScalesLinksAndHeals runs the Machine API on the kwok
// provider: a MachineSet of 5 comes up and nodelink links every node; it
// scales to 3 and back to 5 under each delete policy; a MachineHealthCheck
// replaces the machine whose node stops its heartbeat, and remediates
// nothing once more machines are unhealthy than maxUnhealthy allows.
func TestMachineSetScalesLinksAndHeals(t *testing.T) {
	ctx := t.Context()
	opts := localcluster.DefaultOptions()
	opts.ControlPlaneNodes, opts.Workers = 0, 1
	// Heartbeats that stop are noticed after this long: the health check's
	// part of the test waits for it twice.
	opts.NodeMonitorGracePeriod = 15 * time.Second
	cluster, c := startMachineCluster(t, opts)
	// As its ServiceAccount: the chart's machine-api and kwok-provider roles
	// must grant what the controllers do here.
	clustertest.StartManager(t, cluster.Config, c, clustertest.Options{AsServiceAccount: true, Tune: func(o *manager.Options) {
		o.MachineAPI, o.MachineProviders = true, []string{"kwok"}
	}})
	testutil.Namespace(t, c, machineNS)

	ms := workerSet(5)
	testutil.Create(t, c, ms)
	first := awaitMachines(t, c, 5)
	t.Logf("5 machines running and linked: %v", first)

	for _, policy := range []machinev1beta1.MachineSetDeletePolicy{machinev1beta1.RandomMachineSetDeletePolicy, machinev1beta1.NewestMachineSetDeletePolicy, machinev1beta1.OldestMachineSetDeletePolicy} {
		before := machinesByAge(t, c)
		scale(t, c, ms, 3, policy)
		after := awaitMachines(t, c, 3)
		gone := without(before, after)
		t.Logf("%s: scaled to 3, removed %v", policy, gone)
		switch policy {
		case machinev1beta1.NewestMachineSetDeletePolicy:
			if want := before[3:]; !sameSet(gone, want) {
				t.Errorf("Newest removed %v, want the newest %v", gone, want)
			}
		case machinev1beta1.OldestMachineSetDeletePolicy:
			// The three oldest may share a creation second; the two newest
			// are over a second younger than all of them.
			if len(gone) != 2 || slices.Contains(before[3:], gone[0]) || slices.Contains(before[3:], gone[1]) {
				t.Errorf("Oldest removed %v, want two of the oldest %v", gone, before[:3])
			}
		}
		for _, name := range gone {
			awaitNodeGone(t, c, name)
		}
		scale(t, c, ms, 5, policy)
		awaitMachines(t, c, 5)
		// Creation times have one-second resolution: let the next
		// machines be younger than these.
		time.Sleep(1100 * time.Millisecond)
	}

	mhc := &machinev1beta1.MachineHealthCheck{
		ObjectMeta: metav1.ObjectMeta{Namespace: machineNS, Name: "workers"},
		Spec: machinev1beta1.MachineHealthCheckSpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"set": "workers"}},
			UnhealthyConditions: []machinev1beta1.UnhealthyCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Timeout: metav1.Duration{Duration: 20 * time.Second}},
				{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Timeout: metav1.Duration{Duration: 20 * time.Second}},
			},
			MaxUnhealthy: ptr.To(intstr.FromInt32(2)),
		},
	}
	testutil.Create(t, c, mhc)

	victims := machinesByAge(t, c)
	sick := victims[0]
	stopHeartbeat(t, c, sick)
	testutil.Eventually(t, 90*time.Second, 500*time.Millisecond, func() error {
		names := machinesByAge(t, c)
		if slices.Contains(names, sick) {
			return fmt.Errorf("machine %s, whose node stopped its heartbeat, is still there", sick)
		}
		return nil
	})
	healed := awaitMachines(t, c, 5)
	t.Logf("machine %s replaced: %v", sick, healed)

	// Three of five unhealthy is more than maxUnhealthy 2: the storm guard
	// holds every remediation.
	storm := healed[:3]
	for _, name := range storm {
		stopHeartbeat(t, c, name)
	}
	testutil.Eventually(t, 90*time.Second, 500*time.Millisecond, func() error {
		got := &machinev1beta1.MachineHealthCheck{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(mhc), got); err != nil {
			return err
		}
		cond := machineapi.Condition(got.Status.Conditions, machinev1beta1.RemediationAllowedCondition)
		if cond == nil || cond.Reason != machinev1beta1.TooManyUnhealthyReason {
			return fmt.Errorf("RemediationAllowed is %+v, want TooManyUnhealthy; nodes: %s", cond, readiness(t, c))
		}
		return nil
	})
	time.Sleep(5 * time.Second) // a remediation the guard failed to hold would show by now
	for _, name := range storm {
		m := &machinev1beta1.Machine{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: machineNS, Name: name}, m); err != nil || !m.DeletionTimestamp.IsZero() {
			t.Errorf("machine %s was remediated (err %v) while more than maxUnhealthy were unhealthy", name, err)
		}
	}
}

// startMachineCluster starts a local cluster with pitstop's and the
// Machine API's CRDs installed, stopped when the test ends.
func startMachineCluster(t *testing.T, opts localcluster.Options) (*localcluster.Cluster, client.Client) {
	t.Helper()
	crds, err := config.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	machineCRDs, err := config.MachineAPICRDs()
	if err != nil {
		t.Fatal(err)
	}
	return testutil.StartLocalCluster(t, opts, append(crds, machineCRDs...)...)
}

// workerSet is a MachineSet of kwok machines.
func workerSet(replicas int32) *machinev1beta1.MachineSet {
	labels := map[string]string{"set": "workers"}
	return &machinev1beta1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: machineNS, Name: "workers"},
		Spec: machinev1beta1.MachineSetSpec{
			Replicas: ptr.To(replicas),
			Selector: metav1.LabelSelector{MatchLabels: labels},
			Template: machinev1beta1.MachineTemplateSpec{
				ObjectMeta: machinev1beta1.ObjectMeta{Labels: labels},
				Spec: machinev1beta1.MachineSpec{
					ObjectMeta: machinev1beta1.ObjectMeta{Labels: map[string]string{"pitstop.dev/pool": "workers"}},
					ProviderSpec: machinev1beta1.ProviderSpec{Value: &runtime.RawExtension{Raw: []byte(
						`{"apiVersion": "pitstop.dev/v1alpha1", "kind": "KwokMachineProviderConfig", "zone": "zone-a", "instanceType": "kwok.small"}`)}},
				},
			},
		},
	}
}

// awaitMachines waits until the set has exactly n machines, none being
// deleted, each Running with a Ready node that nodelink linked (nodeRef,
// the node's machine annotation, the label copied from the machine's
// spec), and the MachineSet counts them ready. It returns their names,
// oldest first.
func awaitMachines(t *testing.T, c client.Client, n int) []string {
	t.Helper()
	testutil.Eventually(t, 90*time.Second, 250*time.Millisecond, func() error {
		list := &machinev1beta1.MachineList{}
		if err := c.List(t.Context(), list, client.InNamespace(machineNS)); err != nil {
			return err
		}
		if len(list.Items) != n {
			return fmt.Errorf("%d machines, want %d", len(list.Items), n)
		}
		for _, m := range list.Items {
			if !m.DeletionTimestamp.IsZero() || ptr.Deref(m.Status.Phase, "") != machinev1beta1.PhaseRunning || m.Status.NodeRef == nil {
				return fmt.Errorf("machine %s: phase %q, nodeRef %v", m.Name, ptr.Deref(m.Status.Phase, ""), m.Status.NodeRef)
			}
			node := &corev1.Node{}
			if err := c.Get(t.Context(), client.ObjectKey{Name: m.Status.NodeRef.Name}, node); err != nil {
				return err
			}
			if node.Annotations[machineapi.AnnotationMachine] != machineNS+"/"+m.Name || node.Labels["pitstop.dev/pool"] != "workers" || !localcluster.IsNodeSchedulable(node) {
				return fmt.Errorf("node %s not linked, labelled and Ready yet", node.Name)
			}
		}
		ms := &machinev1beta1.MachineSet{}
		if err := c.Get(t.Context(), client.ObjectKey{Namespace: machineNS, Name: "workers"}, ms); err != nil {
			return err
		}
		if ms.Status.ReadyReplicas != int32(n) || ms.Status.Replicas != int32(n) {
			return fmt.Errorf("MachineSet status: %d replicas, %d ready; want %d", ms.Status.Replicas, ms.Status.ReadyReplicas, n)
		}
		return nil
	})
	return machinesByAge(t, c)
}

// machinesByAge names the machines not being deleted, oldest first.
func machinesByAge(t *testing.T, c client.Client) []string {
	t.Helper()
	list := &machinev1beta1.MachineList{}
	if err := c.List(t.Context(), list, client.InNamespace(machineNS)); err != nil {
		t.Fatal(err)
	}
	items := slices.DeleteFunc(list.Items, func(m machinev1beta1.Machine) bool { return !m.DeletionTimestamp.IsZero() })
	slices.SortFunc(items, func(a, b machinev1beta1.Machine) int {
		if d := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); d != 0 {
			return d
		}
		return strings.Compare(a.Name, b.Name)
	})
	names := make([]string, len(items))
	for i, m := range items {
		names[i] = m.Name
	}
	return names
}

// scale sets the set's replicas and delete policy.
func scale(t *testing.T, c client.Client, ms *machinev1beta1.MachineSet, replicas int32, policy machinev1beta1.MachineSetDeletePolicy) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, 100*time.Millisecond, func() error {
		cur := &machinev1beta1.MachineSet{}
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(ms), cur); err != nil {
			return err
		}
		patch := client.MergeFromWithOptions(cur.DeepCopy(), client.MergeFromWithOptimisticLock{})
		cur.Spec.Replicas, cur.Spec.DeletePolicy = ptr.To(replicas), string(policy)
		return c.Patch(t.Context(), cur, patch)
	})
}

// stopHeartbeat makes kwok stop playing the kubelet of the machine's node,
// as if the machine died: the node lifecycle controller then marks it
// NotReady (Unknown).
func stopHeartbeat(t *testing.T, c client.Client, machine string) {
	t.Helper()
	m := &machinev1beta1.Machine{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: machineNS, Name: machine}, m); err != nil {
		t.Fatal(err)
	}
	node := testutil.GetNode(t, c, m.Status.NodeRef.Name)
	patch := client.MergeFrom(node.DeepCopy())
	delete(node.Annotations, localcluster.AnnotationKwokNode)
	if err := c.Patch(t.Context(), node, patch); err != nil {
		t.Fatal(err)
	}
}

func awaitNodeGone(t *testing.T, c client.Client, name string) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, 250*time.Millisecond, func() error {
		err := c.Get(t.Context(), client.ObjectKey{Name: name}, &corev1.Node{})
		if err == nil {
			return fmt.Errorf("node %s of a removed machine still exists", name)
		}
		return client.IgnoreNotFound(err)
	})
}

// without lists the names of before that are not in after.
func without(before, after []string) []string {
	var gone []string
	for _, name := range before {
		if !slices.Contains(after, name) {
			gone = append(gone, name)
		}
	}
	return gone
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// readiness says each node's Ready condition and heartbeat, for failures.
func readiness(t *testing.T, c client.Client) string {
	nodes := &corev1.NodeList{}
	if err := c.List(t.Context(), nodes); err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, n := range nodes.Items {
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				fmt.Fprintf(&b, "%s=%s(%s, kwok %q) ", n.Name, cond.Status, cond.LastHeartbeatTime.Format(time.TimeOnly), n.Annotations["kwok.x-k8s.io/node"])
			}
		}
	}
	return b.String()
}
