//go:build linux

package demo

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/config"
	"github.com/pitstop-dev/pitstop/internal/cloud/aws"
	"github.com/pitstop-dev/pitstop/internal/kwoknode"
	"github.com/pitstop-dev/pitstop/internal/maintenance"
	"github.com/pitstop-dev/pitstop/internal/nodeview"
	"github.com/pitstop-dev/pitstop/internal/sim/ec2sim"
)

// The local EC2 of the cloud events demo: its region, account keys and
// the resources a Machine's providerSpec names.
const (
	CloudRegion        = "us-east-1"
	cloudZone          = "us-east-1a"
	cloudAccessKey     = "AKIAIOSFODNN7EXAMPLE"
	cloudSecretKey     = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	cloudAMI           = "ami-0c55b159cbfafe1f0"
	cloudSubnet        = "subnet-0aa1"
	cloudSecurityGroup = "sg-0node"
	// CloudNamespace holds the demo's MachineSet, its credentials Secret
	// and its MachineMaintenances.
	CloudNamespace = "openshift-machine-api"
	// CloudSet is the demo's MachineSet; its nodes carry
	// pitstop.dev/pool=CloudSet.
	CloudSet = "cloud-workers"
)

// LocalEC2 starts the EC2 endpoint the cloud events demo runs against: it
// speaks EC2's wire format, and each instance it launches becomes a kwok
// Node (providerID aws:///us-east-1a/<id>, the instance's private IP),
// which goes when the instance is terminated and gets a new boot ID when
// it is rebooted. Close it when the cluster stops.
func LocalEC2(c client.Client) *ec2sim.Server {
	f := ec2sim.Start()
	f.AddCredentials(cloudAccessKey, cloudSecretKey)
	f.AddImage(ec2sim.Image{ID: cloudAMI, Name: "demo-node", RootDeviceName: "/dev/xvda"})
	f.AddSubnet(ec2sim.Subnet{ID: cloudSubnet, VPCID: "vpc-0d1", Zone: cloudZone, CIDR: "10.0.0.0/16"})
	f.AddSecurityGroup(ec2sim.SecurityGroup{ID: cloudSecurityGroup, Name: "demo-node", VPCID: "vpc-0d1"})
	var mu sync.Mutex
	index := 0
	f.OnLaunch(func(i ec2sim.Instance) {
		mu.Lock()
		index++
		n := index
		mu.Unlock()
		node := kwoknode.New(i.PrivateDNS, 1000+n, i.Zone, 110, nil)
		node.Spec.ProviderID = "aws:///" + i.Zone + "/" + i.ID
		node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: i.PrivateIP}, {Type: corev1.NodeHostName, Address: i.PrivateDNS}}
		node.Status.NodeInfo.BootID = i.ID + "-boot-1"
		ctx := context.Background()
		if err := c.Create(ctx, node); err != nil && !apierrors.IsAlreadyExists(err) {
			return
		}
		// kwok plays the kubelet from here; the status it keeps is the
		// one written now (the boot ID among it).
		status := node.DeepCopy()
		_ = c.Get(ctx, client.ObjectKeyFromObject(node), status)
		base := status.DeepCopy()
		status.Status.Addresses, status.Status.NodeInfo.BootID = node.Status.Addresses, node.Status.NodeInfo.BootID
		status.Status.Capacity, status.Status.Allocatable = node.Status.Capacity, node.Status.Allocatable
		_ = c.Status().Patch(ctx, status, client.MergeFrom(base))
		f.SetState(i.ID, ec2sim.StateRunning)
	})
	f.OnTerminate(func(i ec2sim.Instance) {
		_ = c.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: i.PrivateDNS}})
	})
	f.OnReboot(func(id string) {
		go func() {
			i, _ := f.Instance(id)
			ctx := context.Background()
			_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				node := &corev1.Node{}
				if err := c.Get(ctx, client.ObjectKey{Name: i.PrivateDNS}, node); err != nil {
					return false, nil
				}
				base := node.DeepCopy()
				node.Status.NodeInfo.BootID = fmt.Sprintf("%s-boot-%d", id, f.Reboots(id)+1)
				return c.Status().Patch(ctx, node, client.MergeFrom(base)) == nil, nil
			})
		}()
	})
	return f
}

// MoveWindow sets every time window of profile to from-to UTC, on every
// day of the week.
func MoveWindow(profile *pitstopv1alpha1.MaintenanceProfile, from, to time.Time) {
	for i := range profile.Spec.Checks {
		if profile.Spec.Checks[i].TimeWindow != nil {
			profile.Spec.Checks[i].TimeWindow = &pitstopv1alpha1.TimeWindowCheck{Start: from.Format("15:04"), End: to.Format("15:04"), TimeZone: "UTC"}
		}
	}
}

// CloudEvents shows cloud events handled end to end against the local
// EC2: a MachineSet of replicas aws Machines; EC2 schedules retirements
// for three of them and a reboot for a fourth while the profile's window
// is shut, so their MachineMaintenances are Planned and nothing moves;
// then the window opens: the retiring machines are replaced one at a
// time, a new machine first, and the rebooting one is rebooted in place.
// It prints each step, and fails if a replacement ever leaves the set with
// fewer than replicas Ready, schedulable nodes.
func CloudEvents(ctx context.Context, c client.Client, out io.Writer, ec2 *ec2sim.Server, replicas int32) error {
	if err := setUpCloudSet(ctx, c, out, replicas); err != nil {
		return err
	}
	fewest, stop := watchCloudCapacity(ctx, c)
	defer stop()
	data, err := config.Sample("cloud-events.yaml")
	if err != nil {
		return err
	}
	profile := &pitstopv1alpha1.MaintenanceProfile{}
	if err := yaml.UnmarshalStrict(data, profile); err != nil {
		return err
	}
	// The sample's own window (Saturday mornings) may be open right now:
	// shut it for the first act, whatever the day and hour, by moving it
	// six hours ahead.
	shut := time.Now().UTC().Add(6 * time.Hour)
	MoveWindow(profile, shut, shut.Add(time.Hour))
	if err := c.Create(ctx, profile); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating MaintenanceProfile %s: %w", profile.Name, err)
	}
	fmt.Fprintf(out, "Cloud events: applied MaintenanceProfile %s (config/samples/cloud-events.yaml, its window moved to %s-%s UTC, shut).\n",
		profile.Name, shut.Format("15:04"), shut.Add(time.Hour).Format("15:04"))
	machines, err := cloudMachines(ctx, c)
	if err != nil {
		return err
	}
	notBefore := time.Now().Add(72 * time.Hour).UTC().Truncate(time.Second)
	var names []string
	for k, m := range machines[:4] {
		id := aws.InstanceIDOf(ptr.Deref(m.Spec.ProviderID, ""))
		code, desc := "instance-retirement", "The instance is running on degraded hardware"
		if k == 3 {
			code, desc = "instance-reboot", "The instance is scheduled for a reboot"
		}
		eventID := fmt.Sprintf("instance-event-%04d", k+1)
		ec2.ScheduleEvent(id, ec2sim.ScheduledEvent{ID: eventID, Code: code, Description: desc, NotBefore: notBefore})
		names = append(names, maintenance.MachineMaintenanceName(id, eventID))
		fmt.Fprintf(out, "Cloud events: EC2 scheduled %s for %s (machine %s) at %s.\n", code, id, m.Name, notBefore.Format(time.RFC3339))
	}
	if err := awaitPhases(ctx, c, names, pitstopv1alpha1.EventPlanned); err != nil {
		return err
	}
	fmt.Fprintf(out, "Cloud events: 4 MachineMaintenances Planned (kubectl get machinemaintenances -n %s); the window is shut, nothing moves.\n", CloudNamespace)

	now := time.Now().UTC()
	patch := client.MergeFrom(profile.DeepCopy())
	MoveWindow(profile, now.Add(-time.Minute), now.Add(2*time.Hour))
	if err := c.Patch(ctx, profile, patch); err != nil {
		return err
	}
	fmt.Fprintln(out, "Cloud events: the window opens: one machine at a time, retirements replaced (a new machine first), the reboot done in place.")
	started := time.Now()
	if err := awaitPhases(ctx, c, names, pitstopv1alpha1.EventCompleted); err != nil {
		return err
	}
	least, lacking := fewest()
	fmt.Fprintf(out, "Cloud events: all 4 Completed in %.1fs; fewest nodes of the set in service during the replacements: %d of %d (the node rebooted in place not counted out).\n",
		time.Since(started).Seconds(), least, replicas)
	if least < int(replicas) {
		return fmt.Errorf("the set had only %d nodes in service at one point, fewer than %d; the others: %s", least, replicas, strings.Join(lacking, ", "))
	}
	return nil
}

// setUpCloudSet creates the demo's namespace, credentials and MachineSet
// and waits for its machines to run.
func setUpCloudSet(ctx context.Context, c client.Client, out io.Writer, replicas int32) error {
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: CloudNamespace}}); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: CloudNamespace, Name: "aws-cloud-credentials"},
		StringData: map[string]string{"aws_access_key_id": cloudAccessKey, "aws_secret_access_key": cloudSecretKey}}
	if err := c.Create(ctx, secret); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	spec, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&machinev1beta1.AWSMachineProviderConfig{
		TypeMeta:          metav1.TypeMeta{APIVersion: "machine.openshift.io/v1beta1", Kind: aws.Kind},
		AMI:               machinev1beta1.AWSResourceReference{ID: ptr.To(cloudAMI)},
		InstanceType:      "m6i.xlarge",
		Placement:         machinev1beta1.Placement{Region: CloudRegion, AvailabilityZone: cloudZone},
		Subnet:            machinev1beta1.AWSResourceReference{ID: ptr.To(cloudSubnet)},
		SecurityGroups:    []machinev1beta1.AWSResourceReference{{ID: ptr.To(cloudSecurityGroup)}},
		CredentialsSecret: &corev1.LocalObjectReference{Name: secret.Name},
	})
	if err != nil {
		return err
	}
	raw, err := yaml.Marshal(spec)
	if err != nil {
		return err
	}
	labels := map[string]string{"set": CloudSet}
	ms := &machinev1beta1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: CloudNamespace, Name: CloudSet},
		Spec: machinev1beta1.MachineSetSpec{
			Replicas: ptr.To(replicas),
			Selector: metav1.LabelSelector{MatchLabels: labels},
			Template: machinev1beta1.MachineTemplateSpec{
				ObjectMeta: machinev1beta1.ObjectMeta{Labels: labels},
				Spec: machinev1beta1.MachineSpec{
					ObjectMeta:   machinev1beta1.ObjectMeta{Labels: map[string]string{"pitstop.dev/pool": CloudSet}},
					ProviderSpec: machinev1beta1.ProviderSpec{Value: &runtime.RawExtension{Raw: mustJSON(raw)}},
				},
			},
		},
	}
	if err := c.Create(ctx, ms); err != nil {
		return fmt.Errorf("creating MachineSet %s/%s: %w", ms.Namespace, ms.Name, err)
	}
	started := time.Now()
	err = wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		n, err := readyCloudNodes(ctx, c)
		return err == nil && n == int(replicas), nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Cloud events: MachineSet %s/%s of %d aws Machines Running on the local EC2 endpoint in %.1fs.\n", CloudNamespace, CloudSet, replicas, time.Since(started).Seconds())
	return nil
}

func mustJSON(y []byte) []byte {
	j, err := yaml.YAMLToJSON(y)
	if err != nil {
		panic(err)
	}
	return j
}

// cloudMachines lists the set's running Machines, oldest first.
func cloudMachines(ctx context.Context, c client.Client) ([]machinev1beta1.Machine, error) {
	list := &machinev1beta1.MachineList{}
	if err := c.List(ctx, list, client.InNamespace(CloudNamespace)); err != nil {
		return nil, err
	}
	slices.SortFunc(list.Items, func(a, b machinev1beta1.Machine) int { return strings.Compare(a.Name, b.Name) })
	var out []machinev1beta1.Machine
	for _, m := range list.Items {
		if m.DeletionTimestamp.IsZero() && m.Spec.ProviderID != nil {
			out = append(out, m)
		}
	}
	if len(out) < 4 {
		return nil, fmt.Errorf("%d machines with an instance, want at least 4", len(out))
	}
	return out, nil
}

// readyCloudNodes counts the nodes of the set in service: not cordoned,
// and Ready once (no not-ready taint left on a new node); a node whose
// heartbeat lapsed stays counted, as it is not pitstop that took it out.
// The node rebooted in place counts as one of them: a reboot takes its node out
// by design, a replacement must not.
func readyCloudNodes(ctx context.Context, c client.Client) (int, error) {
	n, _, err := cloudCapacity(ctx, c)
	return n, err
}

// cloudCapacity is readyCloudNodes, with what the nodes that do not count
// lack.
func cloudCapacity(ctx context.Context, c client.Client) (int, []string, error) {
	nodes := &corev1.NodeList{}
	if err := c.List(ctx, nodes, client.MatchingLabels{"pitstop.dev/pool": CloudSet}); err != nil {
		return 0, nil, err
	}
	mms := &pitstopv1alpha1.MachineMaintenanceList{}
	if err := c.List(ctx, mms, client.InNamespace(CloudNamespace)); err != nil {
		return 0, nil, err
	}
	rebooting := map[string]bool{}
	for _, mm := range mms.Items {
		// Its drain comes before the reboot is asked for.
		if strings.HasSuffix(mm.Spec.Code, "-reboot") {
			rebooting[mm.Spec.NodeName] = true
		}
	}
	n := 0
	var out []string
	for i := range nodes.Items {
		node := &nodes.Items[i]
		// A node whose heartbeat lapsed (unreachable) is not one pitstop
		// took out: on a busy machine kwok's heartbeats can lapse.
		inService := !node.Spec.Unschedulable && !nodeview.HasTaint(node, corev1.TaintNodeNotReady)
		if inService || rebooting[node.Name] {
			n++
			continue
		}
		taints := make([]string, 0, len(node.Spec.Taints))
		for _, t := range node.Spec.Taints {
			taints = append(taints, t.Key)
		}
		out = append(out, fmt.Sprintf("%s (ready %v, cordoned %v, taints %v)", node.Name, nodeview.Ready(node), node.Spec.Unschedulable, taints))
	}
	return n, out, nil
}

// watchCloudCapacity records the fewest Ready nodes of the set seen, four
// times a second, until stop.
func watchCloudCapacity(ctx context.Context, c client.Client) (fewest func() (int, []string), stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var mu sync.Mutex
	least := 1 << 30
	var lacking []string
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			if n, out, err := cloudCapacity(ctx, c); err == nil {
				mu.Lock()
				if n < least {
					least, lacking = n, out
				}
				mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
	})
	return func() (int, []string) { mu.Lock(); defer mu.Unlock(); return least, lacking }, func() { cancel(); wg.Wait() }
}

// awaitPhases waits until every named MachineMaintenance of the demo has
// the phase.
func awaitPhases(ctx context.Context, c client.Client, names []string, phase pitstopv1alpha1.MachineMaintenancePhase) error {
	return wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		for _, name := range names {
			mm := &pitstopv1alpha1.MachineMaintenance{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: CloudNamespace, Name: name}, mm); err != nil || mm.Status.Phase != phase {
				return false, nil
			}
		}
		return true, nil
	})
}
