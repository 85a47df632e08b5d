package aws_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/pitstop-dev/pitstop/internal/cloud/aws"
	"github.com/pitstop-dev/pitstop/internal/machineapi/provider"
	"github.com/pitstop-dev/pitstop/internal/sim/ec2sim"
)

func TestDescribeReportsTheInstanceState(t *testing.T) {
	tests := []struct {
		state       string
		wantRunning bool
		wantPoll    time.Duration
	}{
		{state: ec2sim.StatePending, wantPoll: aws.PollTransitioning},
		{state: ec2sim.StateRunning, wantRunning: true},
		{state: ec2sim.StateStopping, wantPoll: aws.PollTransitioning},
		{state: ec2sim.StateStopped},
		{state: ec2sim.StateShuttingDown, wantPoll: aws.PollTransitioning},
	}
	for _, tt := range tests {
		t.Run("an instance that is "+tt.state, func(t *testing.T) {
			acct := newAccount(t)
			id := acct.ec2.AddInstance(ec2sim.Instance{InstanceType: "m6i.xlarge", Zone: "us-east-1b", State: tt.state, Tags: ownedTags("worker")})

			inst, err := acct.provider.Describe(context.Background(), machine(t, "worker", workerSpec()))
			if err != nil {
				t.Fatal(err)
			}
			if inst.ID != id || inst.State != tt.state || inst.Running != tt.wantRunning || inst.PollAfter != tt.wantPoll {
				t.Errorf("Describe returned %s %s running=%t poll=%s, want %s %s running=%t poll=%s",
					inst.ID, inst.State, inst.Running, inst.PollAfter, id, tt.state, tt.wantRunning, tt.wantPoll)
			}
			if inst.ProviderID != "aws:///us-east-1b/"+id || inst.Zone != "us-east-1b" || inst.Region != region || inst.InstanceType != "m6i.xlarge" {
				t.Errorf("Describe returned providerID %q zone %q region %q type %q", inst.ProviderID, inst.Zone, inst.Region, inst.InstanceType)
			}
			st := inst.Status.(*machinev1beta1.AWSMachineProviderStatus)
			if ptr.Deref(st.InstanceState, "") != tt.state || ptr.Deref(st.InstanceID, "") != id {
				t.Errorf("providerStatus %+v, want %s %s", st, id, tt.state)
			}
		})
	}
}

func TestDescribeReportsEveryAddress(t *testing.T) {
	acct := newAccount(t)
	acct.ec2.AddInstance(ec2sim.Instance{
		Zone: "us-east-1a", Tags: ownedTags("worker"),
		PrivateIP: "10.0.1.20", PrivateDNS: "ip-10-0-1-20.ec2.internal", SecondaryPrivateIPs: []string{"10.0.1.21"},
		PublicIP: "203.0.113.9", PublicDNS: "ec2-203-0-113-9.compute-1.amazonaws.com",
	})

	inst, err := acct.provider.Describe(context.Background(), machine(t, "worker", workerSpec()))
	if err != nil {
		t.Fatal(err)
	}
	want := []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: "10.0.1.20"},
		{Type: corev1.NodeInternalIP, Address: "10.0.1.21"},
		{Type: corev1.NodeExternalIP, Address: "203.0.113.9"},
		{Type: corev1.NodeInternalDNS, Address: "ip-10-0-1-20.ec2.internal"},
		{Type: corev1.NodeExternalDNS, Address: "ec2-203-0-113-9.compute-1.amazonaws.com"},
	}
	if !slices.Equal(inst.Addresses, want) {
		t.Errorf("addresses\n%v\nwant\n%v", inst.Addresses, want)
	}
}

func TestDescribeKeepsTheConditionsOfTheProviderStatus(t *testing.T) {
	acct := newAccount(t)
	id := acct.ec2.AddInstance(ec2sim.Instance{Zone: "us-east-1a"})
	created := metav1.Condition{
		Type: string(machinev1beta1.MachineCreation), Status: metav1.ConditionTrue,
		Reason: machinev1beta1.MachineCreationSucceededConditionReason, LastTransitionTime: metav1.NewTime(now.Add(-time.Hour)),
	}

	inst, err := acct.provider.Describe(context.Background(), machine(t, "worker", workerSpec(), withStatus(id, created)))
	if err != nil {
		t.Fatal(err)
	}
	st := inst.Status.(*machinev1beta1.AWSMachineProviderStatus)
	c := meta.FindStatusCondition(st.Conditions, string(machinev1beta1.MachineCreation))
	if c == nil || !c.LastTransitionTime.Equal(&created.LastTransitionTime) {
		t.Errorf("conditions %+v, want the recorded MachineCreation kept as it was", st.Conditions)
	}
}

func TestDescribeFollowsNextTokenAcrossPages(t *testing.T) {
	acct := newAccount(t)
	// Five instances of other machines launched first; EC2 filters within
	// each page, so the first pages come back empty but for a nextToken.
	for i := range 5 {
		acct.ec2.AddInstance(ec2sim.Instance{Tags: ownedTags(fmt.Sprintf("other-%d", i))})
	}
	id := acct.ec2.AddInstance(ec2sim.Instance{Tags: ownedTags("worker")})
	acct.ec2.SetPageSize(2)

	inst, err := acct.provider.Describe(context.Background(), machine(t, "worker", workerSpec()))
	if err != nil {
		t.Fatal(err)
	}
	if inst.ID != id {
		t.Errorf("Describe returned %s, want %s from the last page", inst.ID, id)
	}
	pages := acct.ec2.Requests("DescribeInstances")
	if len(pages) != 3 {
		t.Fatalf("%d DescribeInstances requests, want 3 pages of 2", len(pages))
	}
	wantTokens := []string{"", "fake-page-2", "fake-page-4"}
	for i, p := range pages {
		if got := p.Params.Get("NextToken"); got != wantTokens[i] {
			t.Errorf("page %d sent NextToken %q, want %q", i+1, got, wantTokens[i])
		}
		wantParams(t, p, map[string]string{
			"Filter.1.Name": "tag:Name", "Filter.1.Value.1": "worker",
			"Filter.2.Name": "instance-state-name", "Filter.2.Value.1": "pending",
			"Filter.3.Name": "tag:kubernetes.io/cluster/" + clusterName, "Filter.3.Value.1": "owned",
		})
	}
}

func TestDescribeNewestOfSeveralTaggedInstances(t *testing.T) {
	acct := newAccount(t)
	acct.ec2.AddInstance(ec2sim.Instance{Tags: ownedTags("worker")})
	newer := acct.ec2.AddInstance(ec2sim.Instance{Tags: ownedTags("worker")})

	inst, err := acct.provider.Describe(context.Background(), machine(t, "worker", workerSpec()))
	if err != nil {
		t.Fatal(err)
	}
	if inst.ID != newer {
		t.Errorf("Describe returned %s, want the newest, %s", inst.ID, newer)
	}
}

func TestDescribeNotFound(t *testing.T) {
	tests := []struct {
		name     string
		instance *ec2sim.Instance
		edits    []func(*machinev1beta1.Machine)
	}{
		{
			name:  "an instance ID EC2 does not know (InvalidInstanceID.NotFound)",
			edits: []func(*machinev1beta1.Machine){withStatus("i-0123456789abcdef0")},
		},
		{
			name:     "a terminated instance recorded in providerStatus",
			instance: &ec2sim.Instance{ID: "i-0aaaaaaaaaaaaaaaa", State: ec2sim.StateTerminated, Tags: ownedTags("worker")},
			edits:    []func(*machinev1beta1.Machine){withStatus("i-0aaaaaaaaaaaaaaaa")},
		},
		{
			name:     "a terminated instance named in spec.providerID",
			instance: &ec2sim.Instance{ID: "i-0aaaaaaaaaaaaaaaa", State: ec2sim.StateTerminated},
			edits:    []func(*machinev1beta1.Machine){withProviderID("aws:///us-east-1a/i-0aaaaaaaaaaaaaaaa")},
		},
		{
			name:     "a terminated instance found by its tags",
			instance: &ec2sim.Instance{State: ec2sim.StateTerminated, Tags: ownedTags("worker")},
		},
		{
			name: "no instance tagged for the machine",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			acct := newAccount(t)
			if tt.instance != nil {
				acct.ec2.AddInstance(*tt.instance)
			}

			_, err := acct.provider.Describe(context.Background(), machine(t, "worker", workerSpec(), tt.edits...))

			if !errors.Is(err, provider.ErrNotFound) {
				t.Fatalf("Describe: %v, want ErrNotFound", err)
			}
		})
	}
}

func TestDescribeErrorsThatAreNotNotFound(t *testing.T) {
	acct := newAccount(t)
	acct.ec2.Fail("DescribeInstances", -1, ec2sim.Fault{Code: "UnauthorizedOperation", Message: "You are not authorized to perform this operation.", Status: 403})

	_, err := acct.provider.Describe(context.Background(), machine(t, "worker", workerSpec(), withStatus("i-0123456789abcdef0")))

	if err == nil || errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("Describe: %v, want an error that is not ErrNotFound: the instance may well exist", err)
	}
	if n := len(acct.ec2.Requests("DescribeInstances")); n != 1 {
		t.Errorf("%d DescribeInstances requests, want 1: UnauthorizedOperation is not retried", n)
	}
}

func TestDescribeRightAfterLaunch(t *testing.T) {
	tests := []struct {
		name         string
		launchedAgo  time.Duration
		wantNotFound bool
	}{
		{name: "an instance EC2 does not show 30s after its launch is not yet visible, not gone", launchedAgo: 30 * time.Second},
		{name: "an instance EC2 does not show 10m after its launch is gone", launchedAgo: 10 * time.Minute, wantNotFound: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			acct := newAccount(t)
			created := metav1.Condition{
				Type: string(machinev1beta1.MachineCreation), Status: metav1.ConditionTrue,
				Reason: machinev1beta1.MachineCreationSucceededConditionReason, LastTransitionTime: metav1.NewTime(now.Add(-tt.launchedAgo)),
			}
			m := machine(t, "worker", workerSpec(), withStatus("i-0123456789abcdef0", created), withProviderID("aws:///us-east-1a/i-0123456789abcdef0"))

			_, err := acct.provider.Describe(context.Background(), m)

			if err == nil {
				t.Fatal("Describe: no error for an instance EC2 does not know")
			}
			if errors.Is(err, provider.ErrNotFound) != tt.wantNotFound {
				t.Errorf("Describe: %v; ErrNotFound %t, want %t", err, errors.Is(err, provider.ErrNotFound), tt.wantNotFound)
			}
		})
	}
}
