package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/cloud/aws"
	"github.com/pitstop-dev/pitstop/internal/sim/ec2sim"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// TestSurgeResumesAfterSIGKILL: a `pitstop run` process with the Machine
// API on the aws provider (the local EC2 endpoint) and cloud events
// replaces a retiring machine of a MachineSet of 3 with surge; it is
// killed with SIGKILL while it waits for the new machine, and started
// again: the replacement completes, the set never grew past 4 and ends
// at 3, with no surge record left. The test plays the kubelets: each
// instance EC2 launches becomes a Ready Node, held back while the test
// kills pitstop.
func TestSurgeResumesAfterSIGKILL(t *testing.T) {
	ctx := t.Context()
	// Names of this run: envtest keeps namespaces, and -count reruns.
	ns := fmt.Sprintf("surge-kill-%d", surgeKillRuns.Add(1))
	const key, secret = "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	testutil.Namespace(t, env.Client, ns)
	testutil.Create(t, env.Client, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"},
		StringData: map[string]string{"aws_access_key_id": key, "aws_secret_access_key": secret}})
	f := ec2sim.New(t)
	f.AddCredentials(key, secret)
	t.Cleanup(func() {
		for _, i := range f.Instances() {
			_ = env.Client.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + i.ID}})
		}
	})
	f.AddImage(ec2sim.Image{ID: "ami-0c55b159cbfafe1f0", Name: "node", RootDeviceName: "/dev/xvda"})
	f.AddSubnet(ec2sim.Subnet{ID: "subnet-0aa1", VPCID: "vpc-1", Zone: "us-east-1a", CIDR: "10.0.0.0/16"})
	f.AddSecurityGroup(ec2sim.SecurityGroup{ID: "sg-0node", Name: "node", VPCID: "vpc-1"})
	var hold atomic.Bool
	launched := make(chan ec2sim.Instance, 16)
	f.OnLaunch(func(i ec2sim.Instance) { launched <- i })
	f.OnTerminate(func(i ec2sim.Instance) {
		_ = env.Client.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + i.ID}})
	})
	// The kubelets: a Ready Node for each instance launched, unless held.
	go func() {
		var held []ec2sim.Instance
		for {
			select {
			case <-ctx.Done():
				return
			case i := <-launched:
				held = append(held, i)
			case <-time.After(100 * time.Millisecond):
			}
			for len(held) > 0 && !hold.Load() {
				joinNode(ctx, ns+"-"+held[0].ID, held[0])
				f.SetState(held[0].ID, ec2sim.StateRunning)
				held = held[1:]
			}
		}
	}()

	spec, _ := json.Marshal(map[string]any{"apiVersion": "machine.openshift.io/v1beta1", "kind": aws.Kind, "instanceType": "m6i.large",
		"ami": map[string]string{"id": "ami-0c55b159cbfafe1f0"}, "subnet": map[string]string{"id": "subnet-0aa1"},
		"securityGroups": []map[string]string{{"id": "sg-0node"}}, "credentialsSecret": map[string]string{"name": "creds"},
		"placement": map[string]string{"region": "us-east-1", "availabilityZone": "us-east-1a"}})
	labels := map[string]string{"set": ns}
	ms := &machinev1beta1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "workers"},
		Spec: machinev1beta1.MachineSetSpec{Replicas: ptr.To[int32](3), Selector: metav1.LabelSelector{MatchLabels: labels},
			Template: machinev1beta1.MachineTemplateSpec{ObjectMeta: machinev1beta1.ObjectMeta{Labels: labels},
				Spec: machinev1beta1.MachineSpec{ObjectMeta: machinev1beta1.ObjectMeta{Labels: map[string]string{"pool": ns}},
					ProviderSpec: machinev1beta1.ProviderSpec{Value: &runtime.RawExtension{Raw: spec}}}}},
	}
	testutil.Create(t, env.Client, ms, &pitstopv1alpha1.MaintenanceProfile{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: pitstopv1alpha1.MaintenanceProfileSpec{
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": ns}},
			Checks:       []pitstopv1alpha1.CheckInstance{{Name: "scheduled", HasLabel: &pitstopv1alpha1.KeyValueCheck{Key: pitstopv1alpha1.LabelScheduledEvent}}},
			Triggers:     []pitstopv1alpha1.TriggerInstance{{Name: "replace", ReplaceMachine: &pitstopv1alpha1.ReplaceMachineTrigger{}}},
			States: pitstopv1alpha1.StatesSpec{
				Operational:         pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "scheduled", Next: pitstopv1alpha1.StateMaintenanceRequired}}},
				MaintenanceRequired: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "scheduled", Triggers: []string{"replace"}, Next: pitstopv1alpha1.StateInMaintenance}}},
				InMaintenance:       pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "!scheduled", Next: pitstopv1alpha1.StateOperational}}},
			},
		},
	})

	args, _, health := runArgs(t, "pitstop-"+ns)
	args = append(args, "--leader-elect=false", "--machine-api", "--machine-providers=aws", "--aws-region=us-east-1", "--aws-endpoint="+f.URL,
		"--cloud-events=aws", "--cloud-events-interval=10s")
	p := startPitstop(t, args...)
	awaitOK(t, "http://"+health+"/readyz")
	machines := awaitSetRunning(t, ns, 3)

	var most atomic.Int32
	stop := watchReplicas(ctx, ns, &most)
	defer stop()
	hold.Store(true)
	old := machines[0]
	f.ScheduleEvent(aws.InstanceIDOf(ptr.Deref(old.Spec.ProviderID, "")), ec2sim.ScheduledEvent{ID: "instance-event-kill", Code: "instance-retirement", NotBefore: time.Now().Add(72 * time.Hour)})
	testutil.Eventually(t, time.Minute, 100*time.Millisecond, func() error {
		var list pitstopv1alpha1.MachineMaintenanceList
		if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, mm := range list.Items {
			if a := mm.Status.Action; a != nil && a.Step == pitstopv1alpha1.StepWaitingForReplacement {
				return nil
			}
		}
		return errors.New("the surge is not waiting for its new machine yet")
	})
	if code := p.signal(syscall.SIGKILL, 10*time.Second); code == 0 {
		t.Fatal("exit code 0 after SIGKILL")
	}
	hold.Store(false)
	startPitstop(t, args...)
	awaitOK(t, "http://"+health+"/readyz")

	testutil.Eventually(t, 2*time.Minute, 200*time.Millisecond, func() error {
		var list pitstopv1alpha1.MachineMaintenanceList
		if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(list.Items) != 1 || list.Items[0].Status.Phase != pitstopv1alpha1.EventCompleted {
			var seen []string
			for _, mm := range list.Items {
				step := ""
				if a := mm.Status.Action; a != nil {
					step = string(a.Step)
				}
				seen = append(seen, fmt.Sprintf("%s (%s %s, phase %s, step %s, conditions %v)", mm.Name, mm.Spec.InstanceID, mm.Spec.EventID, mm.Status.Phase, step, mm.Status.Conditions))
			}
			return fmt.Errorf("MachineMaintenances %v, want 1 Completed", seen)
		}
		got := &machinev1beta1.MachineSet{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ms), got); err != nil {
			return err
		}
		if *got.Spec.Replicas != 3 || len(got.Annotations) != 0 {
			return fmt.Errorf("the set is at %d replicas, annotations %v", *got.Spec.Replicas, got.Annotations)
		}
		return nil
	})
	if m := most.Load(); m != 4 {
		t.Errorf("the set reached %d replicas, want 4: one surge, never twice", m)
	}
	if len(awaitSetRunning(t, ns, 3)) != 3 {
		t.Error("the set does not end with 3 running machines")
	}
}

var surgeKillRuns atomic.Int32

// joinNode makes the Ready Node of an instance, as its kubelet and the
// node lifecycle controller would (no not-ready taint once Ready).
func joinNode(ctx context.Context, name string, i ec2sim.Instance) {
	node := testutil.Node(name)
	node.Spec.ProviderID = "aws:///" + i.Zone + "/" + i.ID
	if env.Client.Create(ctx, node) != nil {
		return
	}
	base := node.DeepCopy()
	node.Spec.Taints = nil
	_ = env.Client.Patch(ctx, node, client.MergeFrom(base))
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: i.PrivateIP}}
	_ = env.Client.Status().Update(ctx, node)
}

// awaitSetRunning waits until n Machines of the namespace run, linked to
// their Nodes, and returns them.
func awaitSetRunning(t *testing.T, ns string, n int) []machinev1beta1.Machine {
	t.Helper()
	var running []machinev1beta1.Machine
	testutil.Eventually(t, 2*time.Minute, 200*time.Millisecond, func() error {
		var list machinev1beta1.MachineList
		if err := env.Client.List(t.Context(), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		running = nil
		for _, m := range list.Items {
			if m.DeletionTimestamp.IsZero() && ptr.Deref(m.Status.Phase, "") == machinev1beta1.PhaseRunning && m.Status.NodeRef != nil {
				running = append(running, m)
			}
		}
		if len(running) != n || len(list.Items) != n {
			return fmt.Errorf("%d of %d machines running and linked (%d in all)", len(running), n, len(list.Items))
		}
		return nil
	})
	return running
}

// watchReplicas records the most replicas the namespace's MachineSet had.
func watchReplicas(ctx context.Context, ns string, most *atomic.Int32) func() {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			got := &machinev1beta1.MachineSet{}
			if env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "workers"}, got) == nil && *got.Spec.Replicas > most.Load() {
				most.Store(*got.Spec.Replicas)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	return func() { cancel(); <-done }
}
