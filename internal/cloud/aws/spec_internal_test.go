package aws

import (
	"reflect"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestRunInstancesInput(t *testing.T) {
	base := func() *machinev1beta1.AWSMachineProviderConfig {
		return &machinev1beta1.AWSMachineProviderConfig{AMI: machinev1beta1.AWSResourceReference{ID: ptr.To("ami-1")}, InstanceType: "m6i.large"}
	}
	l := launch{subnetID: "subnet-1", zone: "us-east-1a", securityGroupIDs: []string{"sg-1", "sg-2"}}
	tests := []struct {
		name  string
		edit  func(*machinev1beta1.AWSMachineProviderConfig)
		check func(t *testing.T, in *ec2.RunInstancesInput)
	}{
		{
			name: "without a public IP the subnet and security groups go on the request",
			check: func(t *testing.T, in *ec2.RunInstancesInput) {
				want(t, "SubnetId", awssdk.ToString(in.SubnetId), "subnet-1")
				want(t, "SecurityGroupIds", in.SecurityGroupIds, []string{"sg-1", "sg-2"})
				want(t, "NetworkInterfaces", len(in.NetworkInterfaces), 0)
				want(t, "InstanceMarketOptions", in.InstanceMarketOptions, (*types.InstanceMarketOptionsRequest)(nil))
			},
		},
		{
			name: "a public IP moves the subnet and security groups onto the network interface",
			edit: func(s *machinev1beta1.AWSMachineProviderConfig) { s.PublicIP = ptr.To(true); s.DeviceIndex = 0 },
			check: func(t *testing.T, in *ec2.RunInstancesInput) {
				want(t, "SubnetId", in.SubnetId, (*string)(nil))
				want(t, "SecurityGroupIds", len(in.SecurityGroupIds), 0)
				want(t, "NetworkInterfaces", in.NetworkInterfaces, []types.InstanceNetworkInterfaceSpecification{{
					DeviceIndex: awssdk.Int32(0), AssociatePublicIpAddress: ptr.To(true), SubnetId: awssdk.String("subnet-1"),
					Groups: []string{"sg-1", "sg-2"}, DeleteOnTermination: ptr.To(true),
				}})
			},
		},
		{
			name: "an EFA interface is asked for on the network interface",
			edit: func(s *machinev1beta1.AWSMachineProviderConfig) {
				s.NetworkInterfaceType = machinev1beta1.AWSEFANetworkInterfaceType
			},
			check: func(t *testing.T, in *ec2.RunInstancesInput) {
				want(t, "InterfaceType", awssdk.ToString(in.NetworkInterfaces[0].InterfaceType), "efa")
				want(t, "AssociatePublicIpAddress", in.NetworkInterfaces[0].AssociatePublicIpAddress, (*bool)(nil))
			},
		},
		{
			name: "spot options without a price bid up to the on-demand price, one time, terminated on interruption",
			edit: func(s *machinev1beta1.AWSMachineProviderConfig) {
				s.SpotMarketOptions = &machinev1beta1.SpotMarketOptions{}
			},
			check: func(t *testing.T, in *ec2.RunInstancesInput) {
				want(t, "InstanceMarketOptions", in.InstanceMarketOptions, &types.InstanceMarketOptionsRequest{
					MarketType: types.MarketTypeSpot,
					SpotOptions: &types.SpotMarketOptions{
						InstanceInterruptionBehavior: types.InstanceInterruptionBehaviorTerminate,
						SpotInstanceType:             types.SpotInstanceTypeOneTime,
					},
				})
			},
		},
		{
			name: "a spot max price is sent as given",
			edit: func(s *machinev1beta1.AWSMachineProviderConfig) {
				s.SpotMarketOptions = &machinev1beta1.SpotMarketOptions{MaxPrice: ptr.To("0.12")}
			},
			check: func(t *testing.T, in *ec2.RunInstancesInput) {
				want(t, "MaxPrice", awssdk.ToString(in.InstanceMarketOptions.SpotOptions.MaxPrice), "0.12")
			},
		},
		{
			name: "a capacity block targets its reservation",
			edit: func(s *machinev1beta1.AWSMachineProviderConfig) {
				s.MarketType = machinev1beta1.MarketTypeCapacityBlock
				s.CapacityReservationID = "cr-1"
			},
			check: func(t *testing.T, in *ec2.RunInstancesInput) {
				want(t, "MarketType", in.InstanceMarketOptions.MarketType, types.MarketTypeCapacityBlock)
				want(t, "CapacityReservationId", awssdk.ToString(in.CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId), "cr-1")
			},
		},
		{
			name: "required metadata authentication is IMDSv2 only",
			edit: func(s *machinev1beta1.AWSMachineProviderConfig) {
				s.MetadataServiceOptions.Authentication = machinev1beta1.MetadataServiceAuthenticationRequired
			},
			check: func(t *testing.T, in *ec2.RunInstancesInput) {
				want(t, "HttpTokens", in.MetadataOptions.HttpTokens, types.HttpTokensStateRequired)
			},
		},
		{
			name: "AMD SEV-SNP confidential computing is enabled on the CPU options",
			edit: func(s *machinev1beta1.AWSMachineProviderConfig) {
				s.CPUOptions = &machinev1beta1.CPUOptions{ConfidentialCompute: ptr.To(machinev1beta1.AWSConfidentialComputePolicySEVSNP)}
			},
			check: func(t *testing.T, in *ec2.RunInstancesInput) {
				want(t, "AmdSevSnp", in.CpuOptions.AmdSevSnp, types.AmdSevSnpSpecificationEnabled)
			},
		},
		{
			name: "a placement group partition and tenancy go with the zone",
			edit: func(s *machinev1beta1.AWSMachineProviderConfig) {
				s.PlacementGroupName, s.PlacementGroupPartition = "pg-1", ptr.To[int32](3)
				s.Placement.Tenancy = machinev1beta1.DedicatedTenancy
			},
			check: func(t *testing.T, in *ec2.RunInstancesInput) {
				want(t, "Placement", in.Placement, &types.Placement{
					AvailabilityZone: awssdk.String("us-east-1a"), GroupName: awssdk.String("pg-1"),
					PartitionNumber: ptr.To[int32](3), Tenancy: types.TenancyDedicated,
				})
			},
		},
		{
			name: "an IAM instance profile by ARN is sent as an ARN",
			edit: func(s *machinev1beta1.AWSMachineProviderConfig) {
				s.IAMInstanceProfile = &machinev1beta1.AWSResourceReference{ARN: ptr.To("arn:aws:iam::1:instance-profile/w")}
			},
			check: func(t *testing.T, in *ec2.RunInstancesInput) {
				want(t, "IamInstanceProfile", in.IamInstanceProfile, &types.IamInstanceProfileSpecification{Arn: ptr.To("arn:aws:iam::1:instance-profile/w")})
			},
		},
		{
			name: "a named block device keeps its name and the root volume takes the AMI's",
			edit: func(s *machinev1beta1.AWSMachineProviderConfig) {
				s.BlockDevices = []machinev1beta1.BlockDeviceMappingSpec{
					{DeviceName: ptr.To("/dev/sdf"), EBS: &machinev1beta1.EBSBlockDeviceSpec{VolumeSize: ptr.To[int64](50), Iops: ptr.To[int64](3000), VolumeType: ptr.To("io2")}},
					{EBS: &machinev1beta1.EBSBlockDeviceSpec{VolumeSize: ptr.To[int64](120)}},
				}
			},
			check: func(t *testing.T, in *ec2.RunInstancesInput) {
				want(t, "BlockDeviceMappings", in.BlockDeviceMappings, []types.BlockDeviceMapping{
					{DeviceName: ptr.To("/dev/sdf"), Ebs: &types.EbsBlockDevice{DeleteOnTermination: ptr.To(true), VolumeSize: ptr.To[int32](50), Iops: ptr.To[int32](3000), VolumeType: types.VolumeTypeIo2}},
					{DeviceName: ptr.To("/dev/xvda"), Ebs: &types.EbsBlockDevice{DeleteOnTermination: ptr.To(true), VolumeSize: ptr.To[int32](120)}},
				})
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := base()
			if tt.edit != nil {
				tt.edit(spec)
			}
			if err := validate(spec); err != nil {
				t.Fatalf("the test's spec is invalid: %v", err)
			}
			m := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "w", UID: "uid-1"}}
			l := l
			l.rootDeviceName = "/dev/xvda"
			tt.check(t, runInstancesInput(m, spec, l))
		})
	}
}

func TestInstanceTags(t *testing.T) {
	tests := []struct {
		name   string
		labels map[string]string
		tags   []machinev1beta1.TagSpecification
		want   map[string]string
	}{
		{
			name:   "the machine's name and cluster win over spec tags of the same keys",
			labels: map[string]string{machinev1beta1.MachineClusterIDLabel: "c1"},
			tags:   []machinev1beta1.TagSpecification{{Name: "Name", Value: "x"}, {Name: "kubernetes.io/cluster/c1", Value: "shared"}, {Name: "env", Value: "prod"}},
			want:   map[string]string{"Name": "w", "kubernetes.io/cluster/c1": "owned", "env": "prod"},
		},
		{
			name: "a machine without a cluster label gets no cluster tag",
			tags: []machinev1beta1.TagSpecification{{Name: "env", Value: "prod"}},
			want: map[string]string{"Name": "w", "env": "prod"},
		},
		{
			name: "the first of two spec tags of one key wins",
			tags: []machinev1beta1.TagSpecification{{Name: "env", Value: "prod"}, {Name: "env", Value: "dev"}},
			want: map[string]string{"Name": "w", "env": "prod"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "w", Labels: tt.labels}}
			got := map[string]string{}
			tags := instanceTags(m, &machinev1beta1.AWSMachineProviderConfig{Tags: tt.tags})
			for _, tag := range tags {
				got[*tag.Key] = *tag.Value
			}
			want(t, "tags", got, tt.want)
			want(t, "number of tags", len(tags), len(tt.want))
		})
	}
}

func TestInstanceIDFromProviderID(t *testing.T) {
	tests := []struct{ name, providerID, want string }{
		{name: "the kubelet's form names zone and instance", providerID: "aws:///us-east-1a/i-0123456789abcdef0", want: "i-0123456789abcdef0"},
		{name: "a form without the zone still names the instance", providerID: "aws:///i-0123456789abcdef0", want: "i-0123456789abcdef0"},
		{name: "another provider's ID names no instance", providerID: "kwok://worker-1", want: ""},
		{name: "an AWS ID without an instance names none", providerID: "aws:///us-east-1a/", want: ""},
		{name: "an empty ID names none", providerID: "", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want(t, "instance ID", instanceIDFrom(tt.providerID), tt.want)
		})
	}
}

func want[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s = %#v, want %#v", what, got, want)
	}
}
