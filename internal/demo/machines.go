//go:build linux

package demo

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pitstop-dev/pitstop/internal/localcluster"
	"github.com/pitstop-dev/pitstop/internal/machineapi"
)

// machineDemoNamespace holds the demo's MachineSet and health check.
const machineDemoNamespace = "machines"

// Machines shows the Machine API on the kwok provider: it scales a
// MachineSet from 0 to replicas, then stops the heartbeat of one machine's
// node and lets a MachineHealthCheck replace the machine, printing each
// step. timeout is how long the node must be unreachable before the health
// check acts.
func Machines(ctx context.Context, c client.Client, out io.Writer, replicas int32, timeout time.Duration) error {
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: machineDemoNamespace}}); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	labels := map[string]string{"set": "demo-workers"}
	ms := &machinev1beta1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: machineDemoNamespace, Name: "demo-workers"},
		Spec: machinev1beta1.MachineSetSpec{
			Replicas: ptr.To[int32](0),
			Selector: metav1.LabelSelector{MatchLabels: labels},
			Template: machinev1beta1.MachineTemplateSpec{
				ObjectMeta: machinev1beta1.ObjectMeta{Labels: labels},
				Spec: machinev1beta1.MachineSpec{
					ObjectMeta: machinev1beta1.ObjectMeta{Labels: map[string]string{"pitstop.dev/pool": "demo-workers"}},
					ProviderSpec: machinev1beta1.ProviderSpec{Value: &runtime.RawExtension{Raw: []byte(
						`{"apiVersion": "pitstop.dev/v1alpha1", "kind": "KwokMachineProviderConfig", "zone": "zone-a", "instanceType": "kwok.small", "deleteDelay": "2s"}`)}},
				},
			},
		},
	}
	if err := c.Create(ctx, ms); err != nil {
		return fmt.Errorf("creating MachineSet %s/%s: %w", ms.Namespace, ms.Name, err)
	}
	fmt.Fprintf(out, "Machines: created MachineSet %s/%s on the kwok provider; scaling it 0 → %d.\n", ms.Namespace, ms.Name, replicas)
	patch := client.MergeFrom(ms.DeepCopy())
	ms.Spec.Replicas = ptr.To(replicas)
	if err := c.Patch(ctx, ms, patch); err != nil {
		return err
	}
	started := time.Now()
	machines, err := awaitDemoMachines(ctx, c, int(replicas))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Machines: %d Running in %.1fs, each linked to its node: %s\n", replicas, time.Since(started).Seconds(), strings.Join(machines, ", "))

	mhc := &machinev1beta1.MachineHealthCheck{
		ObjectMeta: metav1.ObjectMeta{Namespace: machineDemoNamespace, Name: "demo-workers"},
		Spec: machinev1beta1.MachineHealthCheckSpec{
			Selector: metav1.LabelSelector{MatchLabels: labels},
			UnhealthyConditions: []machinev1beta1.UnhealthyCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Timeout: metav1.Duration{Duration: timeout}},
				{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Timeout: metav1.Duration{Duration: timeout}},
			},
			MaxUnhealthy: ptr.To(intstr.FromString("40%")),
		},
	}
	if err := c.Create(ctx, mhc); err != nil {
		return fmt.Errorf("creating MachineHealthCheck %s/%s: %w", mhc.Namespace, mhc.Name, err)
	}
	sick := machines[0]
	if err := stopNodeHeartbeat(ctx, c, sick); err != nil {
		return err
	}
	fmt.Fprintf(out, "Machines: created MachineHealthCheck %s/%s (node unreachable for %s → replace, at most 40%% at once); stopped the heartbeat of machine %s's node.\n",
		mhc.Namespace, mhc.Name, timeout, sick)
	started = time.Now()
	var healed []string
	err = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		healed, err = runningDemoMachines(ctx, c)
		return err == nil && len(healed) == int(replicas) && !slices.Contains(healed, sick), nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Machines: the MachineHealthCheck replaced machine %s in %.1fs with %s\n", sick, time.Since(started).Seconds(), strings.Join(without(healed, machines), ", "))
	return nil
}

// awaitDemoMachines waits until n demo machines run, linked to Ready nodes.
func awaitDemoMachines(ctx context.Context, c client.Client, n int) ([]string, error) {
	var names []string
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var err error
		names, err = runningDemoMachines(ctx, c)
		return err == nil && len(names) == n, nil
	})
	return names, err
}

// runningDemoMachines names the demo's machines that are Running and
// linked to a Ready node, oldest first.
func runningDemoMachines(ctx context.Context, c client.Client) ([]string, error) {
	list := &machinev1beta1.MachineList{}
	if err := c.List(ctx, list, client.InNamespace(machineDemoNamespace)); err != nil {
		return nil, err
	}
	slices.SortFunc(list.Items, func(a, b machinev1beta1.Machine) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	var names []string
	for _, m := range list.Items {
		if !m.DeletionTimestamp.IsZero() || ptr.Deref(m.Status.Phase, "") != machinev1beta1.PhaseRunning || m.Status.NodeRef == nil {
			continue
		}
		node := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: m.Status.NodeRef.Name}, node); err != nil {
			continue
		}
		if node.Annotations[machineapi.AnnotationMachine] == m.Namespace+"/"+m.Name && localcluster.IsNodeSchedulable(node) {
			names = append(names, m.Name)
		}
	}
	return names, nil
}

// stopNodeHeartbeat makes kwok stop playing the kubelet of the machine's
// node, as if the machine died.
func stopNodeHeartbeat(ctx context.Context, c client.Client, machine string) error {
	m := &machinev1beta1.Machine{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: machineDemoNamespace, Name: machine}, m); err != nil {
		return err
	}
	node := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: m.Status.NodeRef.Name}, node); err != nil {
		return err
	}
	patch := client.MergeFrom(node.DeepCopy())
	delete(node.Annotations, localcluster.AnnotationKwokNode)
	return c.Patch(ctx, node, patch)
}

// without lists the names of a that are not in b.
func without(a, b []string) []string {
	var out []string
	for _, name := range a {
		if !slices.Contains(b, name) {
			out = append(out, name)
		}
	}
	return out
}
