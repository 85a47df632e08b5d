package aws_test

import (
	"context"
	"encoding/base64"
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/aws/smithy-go"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/pitstop-dev/pitstop/internal/cloud/aws"
	"github.com/pitstop-dev/pitstop/internal/machineapi/provider"
	"github.com/pitstop-dev/pitstop/internal/sim/ec2sim"
)

func TestCreateLaunchesTheInstanceTheSpecDescribes(t *testing.T) {
	acct := newAccount(t)
	m := machine(t, "demo-worker-a-7xkq2", workerSpec())

	inst, err := acct.provider.Create(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}

	// The subnet and the first security group were looked up by their
	// filters; the subnet within the placement's zone.
	wantParams(t, only(t, acct.ec2, "DescribeSubnets"), map[string]string{
		"Filter.1.Name": "tag:Name", "Filter.1.Value.1": clusterName + "-private-us-east-1a",
		"Filter.2.Name": "availability-zone", "Filter.2.Value.1": "us-east-1a",
	})
	wantParams(t, only(t, acct.ec2, "DescribeSecurityGroups"), map[string]string{
		"Filter.1.Name": "tag:Name", "Filter.1.Value.1": clusterName + "-node",
	})
	run := only(t, acct.ec2, "RunInstances")
	if run.AccessKeyID != accessKeyID || run.Region != region {
		t.Errorf("RunInstances was signed by %q for %q, want the credentials Secret's key %q for %q", run.AccessKeyID, run.Region, accessKeyID, region)
	}
	wantParams(t, run, map[string]string{
		"ImageId":                             ami,
		"InstanceType":                        "m6i.xlarge",
		"MinCount":                            "1",
		"MaxCount":                            "1",
		"ClientToken":                         machineUID,
		"SubnetId":                            "subnet-0aa1",
		"SecurityGroupId.1":                   "sg-0node",
		"SecurityGroupId.2":                   "sg-0lb",
		"Placement.AvailabilityZone":          "us-east-1a",
		"IamInstanceProfile.Name":             clusterName + "-worker-profile",
		"KeyName":                             "demo-key",
		"UserData":                            base64.StdEncoding.EncodeToString([]byte(userData)),
		"BlockDeviceMapping.1.DeviceName":     "/dev/xvda",
		"BlockDeviceMapping.1.Ebs.VolumeSize": "120",
		"BlockDeviceMapping.1.Ebs.VolumeType": "gp3",
		"BlockDeviceMapping.1.Ebs.Encrypted":  "true",
		"BlockDeviceMapping.1.Ebs.KmsKeyId":   "arn:aws:kms:us-east-1:123456789012:key/demo",
		"BlockDeviceMapping.1.Ebs.DeleteOnTermination": "true",
		"TagSpecification.1.ResourceType":              "instance",
		"TagSpecification.2.ResourceType":              "volume",
	})

	launched := acct.ec2.Instances()
	if len(launched) != 1 {
		t.Fatalf("%d instances launched, want 1", len(launched))
	}
	wantTags := map[string]string{"Name": m.Name, "kubernetes.io/cluster/" + clusterName: "owned", "team": "infra"}
	if !maps.Equal(launched[0].Tags, wantTags) {
		t.Errorf("instance tags %v, want %v (the machine's Name wins over the spec's)", launched[0].Tags, wantTags)
	}

	id := launched[0].ID
	want := provider.Instance{
		ID: id, ProviderID: "aws:///us-east-1a/" + id, State: "pending", Running: false,
		Region: region, Zone: "us-east-1a", InstanceType: "m6i.xlarge", PollAfter: aws.PollTransitioning,
	}
	got := *inst
	got.Addresses, got.Status = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Create returned\n%+v\nwant\n%+v", got, want)
	}
	wantAddrs := []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: launched[0].PrivateIP},
		{Type: corev1.NodeInternalDNS, Address: launched[0].PrivateDNS},
	}
	if !slices.Equal(inst.Addresses, wantAddrs) {
		t.Errorf("addresses %v, want %v", inst.Addresses, wantAddrs)
	}
	st := inst.Status.(*machinev1beta1.AWSMachineProviderStatus)
	if ptr.Deref(st.InstanceID, "") != id || ptr.Deref(st.InstanceState, "") != "pending" || st.Kind != "AWSMachineProviderStatus" {
		t.Errorf("providerStatus %+v, want instance %s pending", st, id)
	}
	c := meta.FindStatusCondition(st.Conditions, string(machinev1beta1.MachineCreation))
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != machinev1beta1.MachineCreationSucceededConditionReason || !c.LastTransitionTime.Time.Equal(now) {
		t.Errorf("MachineCreation condition %+v, want True/MachineCreationSucceeded at %s", c, now)
	}
}

func TestCreateNeverLaunchesASecondInstance(t *testing.T) {
	tests := []struct {
		name string
		// before prepares the account and returns the instance the
		// machine already has.
		before func(t *testing.T, acct *account) string
		edits  []func(*machinev1beta1.Machine)
		// launches is how many RunInstances requests Create sends: the
		// client token makes EC2 return the existing instance even then.
		launches int
	}{
		{
			name: "a second Create finds the instance by its Name and cluster tags",
			before: func(t *testing.T, acct *account) string {
				inst, err := acct.provider.Create(context.Background(), machine(t, "worker", workerSpec()))
				if err != nil {
					t.Fatal(err)
				}
				return inst.ID
			},
		},
		{
			name: "the instance recorded in providerStatus is described by ID",
			before: func(t *testing.T, acct *account) string {
				return acct.ec2.AddInstance(ec2sim.Instance{InstanceType: "m6i.xlarge", Zone: "us-east-1a"})
			},
			edits: []func(*machinev1beta1.Machine){withStatus("i-00000000000000001")},
		},
		{
			name: "the instance in spec.providerID is described by ID",
			before: func(t *testing.T, acct *account) string {
				return acct.ec2.AddInstance(ec2sim.Instance{InstanceType: "m6i.xlarge", Zone: "us-east-1a"})
			},
			edits: []func(*machinev1beta1.Machine){withProviderID("aws:///us-east-1a/i-00000000000000001")},
		},
		{
			name: "an instance the tags do not find (EC2 is eventually consistent) comes back from RunInstances by client token",
			before: func(t *testing.T, acct *account) string {
				return acct.ec2.AddInstance(ec2sim.Instance{ImageID: ami, InstanceType: "m6i.xlarge", ClientToken: machineUID, State: ec2sim.StatePending})
			},
			launches: 1,
		},
		{
			name: "a machine without a cluster label finds its instance by client token",
			before: func(t *testing.T, acct *account) string {
				return acct.ec2.AddInstance(ec2sim.Instance{ClientToken: machineUID, Tags: map[string]string{"Name": "worker"}})
			},
			edits: []func(*machinev1beta1.Machine){withoutClusterLabel},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			acct := newAccount(t)
			existing := tt.before(t, acct)
			launchesBefore := len(acct.ec2.Requests("RunInstances"))

			inst, err := acct.provider.Create(context.Background(), machine(t, "worker", workerSpec(), tt.edits...))
			if err != nil {
				t.Fatal(err)
			}
			if inst.ID != existing {
				t.Errorf("Create returned %s, want the existing %s", inst.ID, existing)
			}
			if n := len(acct.ec2.Instances()); n != 1 {
				t.Errorf("%d instances in the account, want 1", n)
			}
			if n := len(acct.ec2.Requests("RunInstances")) - launchesBefore; n != tt.launches {
				t.Errorf("%d RunInstances requests, want %d", n, tt.launches)
			}
		})
	}
}

func TestCreateLaunchesWhenOnlyAnotherMachinesInstanceMatchesTheName(t *testing.T) {
	tests := []struct {
		name     string
		instance ec2sim.Instance
		edits    []func(*machinev1beta1.Machine)
	}{
		{
			name:     "an instance of the same name in another cluster",
			instance: ec2sim.Instance{Tags: map[string]string{"Name": "worker", "kubernetes.io/cluster/other-cluster": "owned"}},
		},
		{
			name:     "a terminated instance of this machine's name and cluster",
			instance: ec2sim.Instance{State: ec2sim.StateTerminated, Tags: ownedTags("worker")},
		},
		{
			name:     "an instance of the same name launched by someone else, for a machine without a cluster label",
			instance: ec2sim.Instance{ClientToken: "someone-else", Tags: map[string]string{"Name": "worker"}},
			edits:    []func(*machinev1beta1.Machine){withoutClusterLabel},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			acct := newAccount(t)
			other := acct.ec2.AddInstance(tt.instance)

			inst, err := acct.provider.Create(context.Background(), machine(t, "worker", workerSpec(), tt.edits...))
			if err != nil {
				t.Fatal(err)
			}
			if inst.ID == other {
				t.Errorf("Create adopted %s, which is not this machine's", other)
			}
			if n := len(acct.ec2.Requests("RunInstances")); n != 1 {
				t.Errorf("%d RunInstances requests, want 1", n)
			}
		})
	}
}

func TestCreateReportsTheTerminatedInstanceOfTheSameMachineInsteadOfASecondOne(t *testing.T) {
	acct := newAccount(t)
	gone := acct.ec2.AddInstance(ec2sim.Instance{ClientToken: machineUID, State: ec2sim.StateTerminated})

	inst, err := acct.provider.Create(context.Background(), machine(t, "worker", workerSpec()))
	if err != nil {
		t.Fatal(err)
	}
	// The Machine records it, then Describe finds it gone and the Machine
	// fails, as for any instance that vanished.
	if inst.ID != gone || inst.State != ec2sim.StateTerminated || inst.Running {
		t.Errorf("Create returned %s %s running=%t, want the terminated %s", inst.ID, inst.State, inst.Running, gone)
	}
	if n := len(acct.ec2.Instances()); n != 1 {
		t.Errorf("%d instances in the account, want only the terminated one", n)
	}
}

func TestCreateRetriesWhenEC2Throttles(t *testing.T) {
	tests := []struct {
		name        string
		maxAttempts int
		throttles   int // < 0: for ever
		wantCalls   int
		wantErr     bool
	}{
		{name: "two throttles, then success: the SDK retried", maxAttempts: 3, throttles: 2, wantCalls: 3},
		{name: "throttling that never ends fails after the configured 3 attempts", maxAttempts: 3, throttles: -1, wantCalls: 3, wantErr: true},
		{name: "throttling that never ends fails after the configured 5 attempts", maxAttempts: 5, throttles: -1, wantCalls: 5, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			acct := newAccount(t, func(o *aws.Options) { o.RetryMaxAttempts = tt.maxAttempts })
			acct.ec2.Fail("RunInstances", tt.throttles, ec2sim.Throttled)

			inst, err := acct.provider.Create(context.Background(), machine(t, "worker", workerSpec()))

			calls := acct.ec2.Requests("RunInstances")
			if len(calls) != tt.wantCalls {
				t.Errorf("%d RunInstances requests, want %d", len(calls), tt.wantCalls)
			}
			for _, c := range calls {
				if c.Params.Get("ClientToken") != machineUID {
					t.Errorf("attempt sent ClientToken %q, want the machine's UID on every attempt", c.Params.Get("ClientToken"))
				}
			}
			if tt.wantErr {
				var apiErr smithy.APIError
				if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "RequestLimitExceeded" {
					t.Fatalf("Create: %v, want EC2's RequestLimitExceeded", err)
				}
				if errors.Is(err, provider.ErrInvalidConfig) {
					t.Errorf("throttling is marked as invalid configuration: %v", err)
				}
				if n := len(acct.ec2.Instances()); n != 0 {
					t.Errorf("%d instances launched, want none", n)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if n := len(acct.ec2.Instances()); n != 1 || inst.ID != acct.ec2.Instances()[0].ID {
				t.Errorf("%d instances launched, want the one Create returned", n)
			}
		})
	}
}

func TestCreateRefusesInvalidSpecs(t *testing.T) {
	tests := []struct {
		name string
		edit func(*machinev1beta1.AWSMachineProviderConfig)
		// field is what the error must name.
		field string
		// asksEC2 is whether finding the problem takes EC2 requests.
		asksEC2 bool
	}{
		{name: "no AMI", edit: func(s *machinev1beta1.AWSMachineProviderConfig) { s.AMI = machinev1beta1.AWSResourceReference{} }, field: "ami.id"},
		{name: "an AMI by filters only", edit: func(s *machinev1beta1.AWSMachineProviderConfig) {
			s.AMI = machinev1beta1.AWSResourceReference{Filters: []machinev1beta1.Filter{{Name: "name", Values: []string{"rhcos-*"}}}}
		}, field: "ami.id"},
		{name: "no instance type", edit: func(s *machinev1beta1.AWSMachineProviderConfig) { s.InstanceType = "" }, field: "instanceType"},
		{name: "a security group with neither id nor filters", edit: func(s *machinev1beta1.AWSMachineProviderConfig) {
			s.SecurityGroups = append(s.SecurityGroups, machinev1beta1.AWSResourceReference{ARN: ptr.To("arn:aws:ec2:sg")})
		}, field: "securityGroups[2]"},
		{name: "a subnet filter without values", edit: func(s *machinev1beta1.AWSMachineProviderConfig) {
			s.Subnet.Filters = []machinev1beta1.Filter{{Name: "tag:Name"}}
		}, field: "subnet.filters[0].values"},
		{name: "a tag without a name", edit: func(s *machinev1beta1.AWSMachineProviderConfig) {
			s.Tags = append(s.Tags, machinev1beta1.TagSpecification{Value: "x"})
		}, field: "tags[2].name"},
		{name: "load balancers", edit: func(s *machinev1beta1.AWSMachineProviderConfig) {
			s.LoadBalancers = []machinev1beta1.LoadBalancerReference{{Name: "demo-int", Type: machinev1beta1.NetworkLoadBalancerType}}
		}, field: "loadBalancers"},
		{name: "an IAM instance profile by filters", edit: func(s *machinev1beta1.AWSMachineProviderConfig) {
			s.IAMInstanceProfile = &machinev1beta1.AWSResourceReference{Filters: []machinev1beta1.Filter{{Name: "x", Values: []string{"y"}}}}
		}, field: "iamInstanceProfile"},
		{name: "two root volumes", edit: func(s *machinev1beta1.AWSMachineProviderConfig) {
			s.BlockDevices = append(s.BlockDevices, s.BlockDevices[0])
		}, field: "blockDevices[1].deviceName"},
		{name: "a region that is not one", edit: func(s *machinev1beta1.AWSMachineProviderConfig) { s.Placement.Region = "us east" }, field: "placement.region"},
		{name: "an unknown tenancy", edit: func(s *machinev1beta1.AWSMachineProviderConfig) { s.Placement.Tenancy = "shared" }, field: "placement.tenancy"},
		{name: "a capacity block without a reservation", edit: func(s *machinev1beta1.AWSMachineProviderConfig) {
			s.MarketType = machinev1beta1.MarketTypeCapacityBlock
		}, field: "capacityReservationId"},
		{name: "a user data Secret without a name", edit: func(s *machinev1beta1.AWSMachineProviderConfig) {
			s.UserDataSecret = &corev1.LocalObjectReference{}
		}, field: "userDataSecret.name"},
		{name: "subnet filters that match no subnet", edit: func(s *machinev1beta1.AWSMachineProviderConfig) {
			s.Subnet.Filters[0].Values = []string{"deleted-subnet"}
		}, field: "subnet.filters", asksEC2: true},
		{name: "subnet filters that match a subnet in another zone only", edit: func(s *machinev1beta1.AWSMachineProviderConfig) {
			s.Placement.AvailabilityZone = "us-east-1c"
		}, field: "subnet.filters", asksEC2: true},
		{name: "security group filters that match no group", edit: func(s *machinev1beta1.AWSMachineProviderConfig) {
			s.SecurityGroups[0].Filters[0].Values = []string{"deleted-sg"}
		}, field: "securityGroups[0].filters", asksEC2: true},
		{name: "a root volume on an AMI that does not exist", edit: func(s *machinev1beta1.AWSMachineProviderConfig) {
			s.AMI.ID = ptr.To("ami-0deleted")
		}, field: "ami.id", asksEC2: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			acct := newAccount(t)
			spec := workerSpec()
			tt.edit(spec)

			_, err := acct.provider.Create(context.Background(), machine(t, "worker", spec))

			if !errors.Is(err, provider.ErrInvalidConfig) {
				t.Fatalf("Create: %v, want an error wrapping ErrInvalidConfig", err)
			}
			if !strings.Contains(err.Error(), "spec.providerSpec.value."+tt.field) {
				t.Errorf("error %q does not name %s", err, tt.field)
			}
			if asked := len(acct.ec2.Requests("")) > 0; asked != tt.asksEC2 {
				t.Errorf("sent EC2 requests: %t, want %t", asked, tt.asksEC2)
			}
			if n := len(acct.ec2.Requests("RunInstances")); n != 0 {
				t.Errorf("%d RunInstances requests for an invalid spec", n)
			}
		})
	}
}

func TestCreateDecodesTheSpecLeniently(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		wantErr bool
	}{
		{
			name: "a field pitstop does not know (a newer OpenShift's) is ignored",
			raw: `{"apiVersion":"machine.openshift.io/v1beta1","kind":"AWSMachineProviderConfig","ami":{"id":"` + ami + `"},` +
				`"instanceType":"m6i.large","placement":{"region":"us-east-1"},"credentialsSecret":{"name":"` + credsSecret + `"},` +
				`"hostPlacement":{"affinity":"AnyAvailable"}}`,
		},
		{
			name:    "a spec that is not a document is invalid",
			raw:     `{"kind":"AWSMachineProviderConfig","instanceType":[}`,
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			acct := newAccount(t)
			m := machine(t, "worker", workerSpec())
			m.Spec.ProviderSpec.Value = &runtime.RawExtension{Raw: []byte(tt.raw)}

			_, err := acct.provider.Create(context.Background(), m)

			if tt.wantErr != (err != nil) {
				t.Fatalf("Create: %v, want error %t", err, tt.wantErr)
			}
			if tt.wantErr && !errors.Is(err, provider.ErrInvalidConfig) {
				t.Errorf("error %v does not wrap ErrInvalidConfig", err)
			}
			if !tt.wantErr {
				wantParams(t, only(t, acct.ec2, "RunInstances"), map[string]string{"ImageId": ami, "InstanceType": "m6i.large"})
			}
		})
	}
}

func TestCreateWithAPublicIPAsksForItOnTheNetworkInterface(t *testing.T) {
	acct := newAccount(t)
	spec := workerSpec()
	spec.PublicIP = ptr.To(true)

	inst, err := acct.provider.Create(context.Background(), machine(t, "worker", spec))
	if err != nil {
		t.Fatal(err)
	}

	wantParams(t, only(t, acct.ec2, "RunInstances"), map[string]string{
		"SubnetId":                                    "",
		"SecurityGroupId.1":                           "",
		"NetworkInterface.1.DeviceIndex":              "0",
		"NetworkInterface.1.SubnetId":                 "subnet-0aa1",
		"NetworkInterface.1.SecurityGroupId.1":        "sg-0node",
		"NetworkInterface.1.SecurityGroupId.2":        "sg-0lb",
		"NetworkInterface.1.AssociatePublicIpAddress": "true",
	})
	launched := acct.ec2.Instances()[0]
	if !slices.Contains(inst.Addresses, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: launched.PublicIP}) ||
		!slices.Contains(inst.Addresses, corev1.NodeAddress{Type: corev1.NodeExternalDNS, Address: launched.PublicDNS}) {
		t.Errorf("addresses %v lack the public IP %s and name %s", inst.Addresses, launched.PublicIP, launched.PublicDNS)
	}
}
