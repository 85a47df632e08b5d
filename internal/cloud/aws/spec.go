package aws

import (
	"encoding/base64"
	"fmt"
	"regexp"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"

	"github.com/pitstop-dev/pitstop/internal/machineapi/provider"
)

// clusterTagPrefix starts the tag that marks what a cluster owns, as
// Kubernetes' AWS integrations and OpenShift's installer use it:
// kubernetes.io/cluster/<cluster ID>=owned.
const clusterTagPrefix = "kubernetes.io/cluster/"

// regionPattern is what an AWS region name looks like (us-east-1,
// us-gov-west-1, cn-north-1, eu-isoe-west-1).
var regionPattern = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]+$`)

// decodeSpec decodes the machine's providerSpec leniently: the type is
// OpenShift's and gains fields over time, which a newer cluster's
// Machines may carry.
func decodeSpec(m *machinev1beta1.Machine) (*machinev1beta1.AWSMachineProviderConfig, error) {
	spec := &machinev1beta1.AWSMachineProviderConfig{}
	if err := provider.DecodeSpec(m, spec, false); err != nil {
		return nil, err
	}
	return spec, nil
}

// validate refuses, naming the field, a spec that cannot launch an
// instance. It checks what EC2 would refuse only as far as the spec alone
// tells; what depends on the account (an AMI that does not exist) is
// EC2's to refuse.
func validate(spec *machinev1beta1.AWSMachineProviderConfig) error {
	checks := []func(*machinev1beta1.AWSMachineProviderConfig) error{
		validateRequired, validateNetwork, validateSecrets, validateBlockDevices, validatePlacement, validateMarket,
	}
	for _, check := range checks {
		if err := check(spec); err != nil {
			return err
		}
	}
	return nil
}

func validateRequired(spec *machinev1beta1.AWSMachineProviderConfig) error {
	if awssdk.ToString(spec.AMI.ID) == "" {
		if spec.AMI.ARN != nil || len(spec.AMI.Filters) > 0 {
			return provider.InvalidConfig("ami.id", "is required: pitstop does not resolve an AMI by arn or filters")
		}
		return provider.InvalidConfig("ami.id", "is required")
	}
	if spec.InstanceType == "" {
		return provider.InvalidConfig("instanceType", "is required")
	}
	for i, t := range spec.Tags {
		if t.Name == "" {
			return provider.InvalidConfig(fmt.Sprintf("tags[%d].name", i), "is empty")
		}
	}
	if len(spec.LoadBalancers) > 0 {
		return provider.InvalidConfig("loadBalancers", "is not supported: pitstop does not register instances with load balancers")
	}
	if ref := spec.IAMInstanceProfile; ref != nil && awssdk.ToString(ref.ID) == "" && awssdk.ToString(ref.ARN) == "" {
		return provider.InvalidConfig("iamInstanceProfile", "needs id (the profile's name) or arn; filters are not supported")
	}
	return nil
}

func validateNetwork(spec *machinev1beta1.AWSMachineProviderConfig) error {
	if s := spec.Subnet; awssdk.ToString(s.ID) == "" && len(s.Filters) == 0 && s.ARN != nil {
		return provider.InvalidConfig("subnet.arn", "is not supported: set subnet.id or subnet.filters")
	}
	if err := validateFilters("subnet.filters", spec.Subnet.Filters); err != nil {
		return err
	}
	for i, sg := range spec.SecurityGroups {
		field := fmt.Sprintf("securityGroups[%d]", i)
		if awssdk.ToString(sg.ID) == "" && len(sg.Filters) == 0 {
			return provider.InvalidConfig(field, "needs id or filters (arn is not supported)")
		}
		if err := validateFilters(field+".filters", sg.Filters); err != nil {
			return err
		}
	}
	switch spec.NetworkInterfaceType {
	case "", machinev1beta1.AWSENANetworkInterfaceType, machinev1beta1.AWSEFANetworkInterfaceType:
	default:
		return provider.InvalidConfig("networkInterfaceType", "%q is not ENA or EFA", spec.NetworkInterfaceType)
	}
	if spec.DeviceIndex < 0 {
		return provider.InvalidConfig("deviceIndex", "%d is negative", spec.DeviceIndex)
	}
	switch spec.MetadataServiceOptions.Authentication {
	case "", machinev1beta1.MetadataServiceAuthenticationRequired, machinev1beta1.MetadataServiceAuthenticationOptional:
	default:
		return provider.InvalidConfig("metadataServiceOptions.authentication", "%q is not Required or Optional", spec.MetadataServiceOptions.Authentication)
	}
	return nil
}

func validateFilters(field string, filters []machinev1beta1.Filter) error {
	for i, f := range filters {
		if f.Name == "" {
			return provider.InvalidConfig(fmt.Sprintf("%s[%d].name", field, i), "is empty")
		}
		if len(f.Values) == 0 {
			return provider.InvalidConfig(fmt.Sprintf("%s[%d].values", field, i), "is empty")
		}
	}
	return nil
}

func validateSecrets(spec *machinev1beta1.AWSMachineProviderConfig) error {
	if spec.CredentialsSecret != nil && spec.CredentialsSecret.Name == "" {
		return provider.InvalidConfig("credentialsSecret.name", "is empty")
	}
	if spec.UserDataSecret != nil && spec.UserDataSecret.Name == "" {
		return provider.InvalidConfig("userDataSecret.name", "is empty")
	}
	return nil
}

func validateBlockDevices(spec *machinev1beta1.AWSMachineProviderConfig) error {
	roots := 0
	for i, bd := range spec.BlockDevices {
		field := fmt.Sprintf("blockDevices[%d]", i)
		if bd.DeviceName == nil {
			roots++
			if roots > 1 {
				return provider.InvalidConfig(field+".deviceName", "is empty on more than one block device: only the root volume has no device name")
			}
			if bd.EBS == nil {
				return provider.InvalidConfig(field+".ebs", "is required for the root volume")
			}
		}
		if ebs := bd.EBS; ebs != nil {
			if ebs.VolumeSize != nil && (*ebs.VolumeSize < 1 || *ebs.VolumeSize > 65536) {
				return provider.InvalidConfig(field+".ebs.volumeSize", "%d GiB is outside 1..65536", *ebs.VolumeSize)
			}
			if ebs.Iops != nil && (*ebs.Iops < 0 || *ebs.Iops > 1<<31-1) {
				return provider.InvalidConfig(field+".ebs.iops", "%d is out of range", *ebs.Iops)
			}
		}
	}
	return nil
}

func validatePlacement(spec *machinev1beta1.AWSMachineProviderConfig) error {
	if r := spec.Placement.Region; r != "" && !regionPattern.MatchString(r) {
		return provider.InvalidConfig("placement.region", "%q is not an AWS region", r)
	}
	switch spec.Placement.Tenancy {
	case "", machinev1beta1.DefaultTenancy, machinev1beta1.DedicatedTenancy, machinev1beta1.HostTenancy:
	default:
		return provider.InvalidConfig("placement.tenancy", "%q is not default, dedicated or host", spec.Placement.Tenancy)
	}
	if p := spec.PlacementGroupPartition; p != nil {
		if spec.PlacementGroupName == "" {
			return provider.InvalidConfig("placementGroupPartition", "needs placementGroupName")
		}
		if *p < 1 || *p > 7 {
			return provider.InvalidConfig("placementGroupPartition", "%d is outside 1..7", *p)
		}
	}
	if c := spec.CPUOptions; c != nil && c.ConfidentialCompute != nil {
		switch *c.ConfidentialCompute {
		case machinev1beta1.AWSConfidentialComputePolicyDisabled, machinev1beta1.AWSConfidentialComputePolicySEVSNP:
		default:
			return provider.InvalidConfig("cpuOptions.confidentialCompute", "%q is not Disabled or %s", *c.ConfidentialCompute, machinev1beta1.AWSConfidentialComputePolicySEVSNP)
		}
	}
	return nil
}

func validateMarket(spec *machinev1beta1.AWSMachineProviderConfig) error {
	switch spec.MarketType {
	case "", machinev1beta1.MarketTypeSpot:
	case machinev1beta1.MarketTypeOnDemand:
		if spec.SpotMarketOptions != nil {
			return provider.InvalidConfig("spotMarketOptions", "cannot be set with marketType OnDemand")
		}
	case machinev1beta1.MarketTypeCapacityBlock:
		if spec.SpotMarketOptions != nil {
			return provider.InvalidConfig("spotMarketOptions", "cannot be set with marketType CapacityBlock")
		}
		if spec.CapacityReservationID == "" {
			return provider.InvalidConfig("capacityReservationId", "is required with marketType CapacityBlock")
		}
	default:
		return provider.InvalidConfig("marketType", "%q is not OnDemand, Spot or CapacityBlock", spec.MarketType)
	}
	return nil
}

// launch is what Create looked up before it can launch: the subnet and
// zone, the security groups, the user data and the AMI's root device.
type launch struct {
	subnetID         string
	zone             string
	securityGroupIDs []string
	// userData is the userDataSecret's userData, nil without a secret.
	userData []byte
	// rootDeviceName is the AMI's root device, looked up only when the
	// spec sizes the root volume.
	rootDeviceName string
}

// runInstancesInput is the RunInstances request for a machine: its spec
// as EC2 wants it, tagged with its name and cluster, and idempotent
// through the Machine's UID as client token.
func runInstancesInput(m *machinev1beta1.Machine, spec *machinev1beta1.AWSMachineProviderConfig, l launch) *ec2.RunInstancesInput {
	tags := instanceTags(m, spec)
	in := &ec2.RunInstancesInput{
		ImageId:      spec.AMI.ID,
		InstanceType: types.InstanceType(spec.InstanceType),
		MinCount:     awssdk.Int32(1),
		MaxCount:     awssdk.Int32(1),
		ClientToken:  awssdk.String(string(m.UID)),
		KeyName:      spec.KeyName,
		TagSpecifications: []types.TagSpecification{
			{ResourceType: types.ResourceTypeInstance, Tags: tags},
			{ResourceType: types.ResourceTypeVolume, Tags: tags},
		},
		Placement:           placement(spec, l),
		BlockDeviceMappings: blockDevices(spec, l.rootDeviceName),
	}
	if l.userData != nil {
		in.UserData = awssdk.String(base64.StdEncoding.EncodeToString(l.userData))
	}
	if ref := spec.IAMInstanceProfile; ref != nil {
		if arn := awssdk.ToString(ref.ARN); arn != "" && awssdk.ToString(ref.ID) == "" {
			in.IamInstanceProfile = &types.IamInstanceProfileSpecification{Arn: ref.ARN}
		} else {
			in.IamInstanceProfile = &types.IamInstanceProfileSpecification{Name: ref.ID}
		}
	}
	setNetwork(in, spec, l)
	switch spec.MetadataServiceOptions.Authentication {
	case machinev1beta1.MetadataServiceAuthenticationRequired:
		in.MetadataOptions = &types.InstanceMetadataOptionsRequest{HttpTokens: types.HttpTokensStateRequired}
	case machinev1beta1.MetadataServiceAuthenticationOptional:
		in.MetadataOptions = &types.InstanceMetadataOptionsRequest{HttpTokens: types.HttpTokensStateOptional}
	}
	in.InstanceMarketOptions = marketOptions(spec)
	if spec.CapacityReservationID != "" {
		in.CapacityReservationSpecification = &types.CapacityReservationSpecification{
			CapacityReservationTarget: &types.CapacityReservationTarget{CapacityReservationId: awssdk.String(spec.CapacityReservationID)},
		}
	}
	if c := spec.CPUOptions; c != nil && c.ConfidentialCompute != nil {
		state := types.AmdSevSnpSpecificationDisabled
		if *c.ConfidentialCompute == machinev1beta1.AWSConfidentialComputePolicySEVSNP {
			state = types.AmdSevSnpSpecificationEnabled
		}
		in.CpuOptions = &types.CpuOptionsRequest{AmdSevSnp: state}
	}
	return in
}

// setNetwork puts the subnet and security groups on the request. A public
// IP or an EFA interface can only be asked for on a network interface,
// which then carries the subnet and security groups too.
func setNetwork(in *ec2.RunInstancesInput, spec *machinev1beta1.AWSMachineProviderConfig, l launch) {
	if spec.PublicIP != nil || spec.NetworkInterfaceType == machinev1beta1.AWSEFANetworkInterfaceType {
		ni := types.InstanceNetworkInterfaceSpecification{
			DeviceIndex:              awssdk.Int32(int32(spec.DeviceIndex)),
			AssociatePublicIpAddress: spec.PublicIP,
			Groups:                   l.securityGroupIDs,
			DeleteOnTermination:      awssdk.Bool(true),
		}
		if l.subnetID != "" {
			ni.SubnetId = awssdk.String(l.subnetID)
		}
		if spec.NetworkInterfaceType == machinev1beta1.AWSEFANetworkInterfaceType {
			ni.InterfaceType = awssdk.String(string(types.NetworkInterfaceTypeEfa))
		}
		in.NetworkInterfaces = []types.InstanceNetworkInterfaceSpecification{ni}
	} else {
		if l.subnetID != "" {
			in.SubnetId = awssdk.String(l.subnetID)
		}
		in.SecurityGroupIds = l.securityGroupIDs
	}
}

// instanceTags are the spec's tags with Name=<machine name> and, when the
// Machine names its cluster, kubernetes.io/cluster/<id>=owned. Those two
// win over spec tags of the same key: Describe finds the instance by them.
func instanceTags(m *machinev1beta1.Machine, spec *machinev1beta1.AWSMachineProviderConfig) []types.Tag {
	tags := []types.Tag{}
	seen := map[string]bool{}
	add := func(k, v string) {
		if !seen[k] {
			seen[k] = true
			tags = append(tags, types.Tag{Key: awssdk.String(k), Value: awssdk.String(v)})
		}
	}
	if id := clusterID(m); id != "" {
		add(clusterTagPrefix+id, "owned")
	}
	add("Name", m.Name)
	for _, t := range spec.Tags {
		add(t.Name, t.Value)
	}
	return tags
}

// clusterID is the Machine's cluster, from the label OpenShift's
// installer sets on every Machine.
func clusterID(m *machinev1beta1.Machine) string {
	return m.Labels[machinev1beta1.MachineClusterIDLabel]
}

func placement(spec *machinev1beta1.AWSMachineProviderConfig, l launch) *types.Placement {
	p := &types.Placement{Tenancy: types.Tenancy(spec.Placement.Tenancy)}
	if l.zone != "" {
		p.AvailabilityZone = awssdk.String(l.zone)
	}
	if spec.PlacementGroupName != "" {
		p.GroupName = awssdk.String(spec.PlacementGroupName)
		p.PartitionNumber = spec.PlacementGroupPartition
	}
	if *p == (types.Placement{}) {
		return nil
	}
	return p
}

// blockDevices maps the spec's block devices; the one without a device
// name is the root volume, which takes the AMI's root device name. Every
// volume goes with its instance, as OpenShift's machines do.
func blockDevices(spec *machinev1beta1.AWSMachineProviderConfig, rootDeviceName string) []types.BlockDeviceMapping {
	var out []types.BlockDeviceMapping
	for _, bd := range spec.BlockDevices {
		name := bd.DeviceName
		if name == nil {
			name = awssdk.String(rootDeviceName)
		}
		mapping := types.BlockDeviceMapping{DeviceName: name, NoDevice: bd.NoDevice, VirtualName: bd.VirtualName}
		if ebs := bd.EBS; ebs != nil {
			dev := &types.EbsBlockDevice{
				DeleteOnTermination: awssdk.Bool(true),
				Encrypted:           ebs.Encrypted,
				VolumeType:          types.VolumeType(awssdk.ToString(ebs.VolumeType)),
			}
			if ebs.VolumeSize != nil {
				dev.VolumeSize = awssdk.Int32(int32(*ebs.VolumeSize))
			}
			if ebs.Iops != nil && *ebs.Iops > 0 {
				dev.Iops = awssdk.Int32(int32(*ebs.Iops))
			}
			if key := awssdk.ToString(ebs.KMSKey.ID); key != "" {
				dev.KmsKeyId = ebs.KMSKey.ID
			} else if key := awssdk.ToString(ebs.KMSKey.ARN); key != "" {
				dev.KmsKeyId = ebs.KMSKey.ARN
			}
			mapping.Ebs = dev
		}
		out = append(out, mapping)
	}
	return out
}

func marketOptions(spec *machinev1beta1.AWSMachineProviderConfig) *types.InstanceMarketOptionsRequest {
	switch {
	case spec.MarketType == machinev1beta1.MarketTypeCapacityBlock:
		return &types.InstanceMarketOptionsRequest{MarketType: types.MarketTypeCapacityBlock}
	case spec.SpotMarketOptions != nil || spec.MarketType == machinev1beta1.MarketTypeSpot:
		opts := &types.SpotMarketOptions{
			InstanceInterruptionBehavior: types.InstanceInterruptionBehaviorTerminate,
			SpotInstanceType:             types.SpotInstanceTypeOneTime,
		}
		if spec.SpotMarketOptions != nil && awssdk.ToString(spec.SpotMarketOptions.MaxPrice) != "" {
			opts.MaxPrice = spec.SpotMarketOptions.MaxPrice
		}
		return &types.InstanceMarketOptionsRequest{MarketType: types.MarketTypeSpot, SpotOptions: opts}
	}
	return nil
}

// needsRootDevice says whether the spec configures the root volume, for
// which Create looks up the AMI's root device name.
func needsRootDevice(spec *machinev1beta1.AWSMachineProviderConfig) bool {
	for _, bd := range spec.BlockDevices {
		if bd.DeviceName == nil {
			return true
		}
	}
	return false
}
