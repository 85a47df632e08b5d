package aws

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"

	"github.com/pitstop-dev/pitstop/internal/machineapi/provider"
)

// visibilityDelay is how long after a launch EC2 may still answer
// InvalidInstanceID.NotFound for the new instance: its API is eventually
// consistent, and a Describe right after Create must not take the
// instance for gone.
const visibilityDelay = 2 * time.Minute

// liveStates are the states of an instance that is not terminated: one a
// machine may still own.
var liveStates = []string{
	string(types.InstanceStateNamePending), string(types.InstanceStateNameRunning),
	string(types.InstanceStateNameShuttingDown), string(types.InstanceStateNameStopping),
	string(types.InstanceStateNameStopped),
}

// find returns the machine's live instances, newest first, or an error
// wrapping provider.ErrNotFound. With an instance ID recorded, that
// instance is the machine's (a terminated one, or one EC2 does not know,
// is not found). Without, it is found by tags: Name=<machine name> and
// kubernetes.io/cluster/<cluster ID>=owned, as OpenShift tags its
// instances; a Machine without a cluster label matches on its UID as
// client token instead, so that it never adopts another cluster's
// instance of the same name.
func (s *session) find(ctx context.Context, m *machinev1beta1.Machine, st *machinev1beta1.AWSMachineProviderStatus) ([]types.Instance, error) {
	if id := knownInstanceID(m, st); id != "" {
		found, err := s.describeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
		if isCode(err, "InvalidInstanceID.NotFound") {
			if age, ok := launchAge(st, s.now); ok && age < visibilityDelay {
				// Not ErrNotFound: that would fail the Machine.
				return nil, fmt.Errorf("instance %s in %s, launched %s ago, is not visible yet (EC2 is eventually consistent)", id, s.region, age.Round(time.Second))
			}
			return nil, fmt.Errorf("instance %s in %s: %w", id, s.region, provider.ErrNotFound)
		}
		if err != nil {
			return nil, fmt.Errorf("describing instance %s in %s: %w", id, s.region, err)
		}
		if found = live(found); len(found) == 0 {
			return nil, fmt.Errorf("instance %s in %s is terminated: %w", id, s.region, provider.ErrNotFound)
		}
		return found, nil
	}
	return s.findByTags(ctx, m)
}

// findByTags returns the machine's live instances by their tags, newest
// first.
func (s *session) findByTags(ctx context.Context, m *machinev1beta1.Machine) ([]types.Instance, error) {
	filters := []types.Filter{
		{Name: awssdk.String("tag:Name"), Values: []string{m.Name}},
		{Name: awssdk.String("instance-state-name"), Values: liveStates},
	}
	switch {
	case clusterID(m) != "":
		filters = append(filters, types.Filter{Name: awssdk.String("tag:" + clusterTagPrefix + clusterID(m)), Values: []string{"owned"}})
	case m.UID != "":
		filters = append(filters, types.Filter{Name: awssdk.String("client-token"), Values: []string{string(m.UID)}})
	default:
		return nil, fmt.Errorf("machine has neither a cluster label nor a UID to find its instance by: %w", provider.ErrNotFound)
	}
	found, err := s.describeInstances(ctx, &ec2.DescribeInstancesInput{Filters: filters})
	if err != nil {
		return nil, fmt.Errorf("describing instances %s in %s: %w", describeFilters(filters), s.region, err)
	}
	if found = live(found); len(found) == 0 {
		return nil, fmt.Errorf("no instance %s in %s: %w", describeFilters(filters), s.region, provider.ErrNotFound)
	}
	slices.SortFunc(found, newest)
	return found, nil
}

// describeInstances returns every instance of every page.
func (s *session) describeInstances(ctx context.Context, in *ec2.DescribeInstancesInput) ([]types.Instance, error) {
	var out []types.Instance
	seen := pageTokens{}
	pages := ec2.NewDescribeInstancesPaginator(s.ec2, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err == nil {
			err = seen.next(page.NextToken)
		}
		if err != nil {
			return nil, err
		}
		for _, r := range page.Reservations {
			out = append(out, r.Instances...)
		}
	}
	return out, nil
}

func live(instances []types.Instance) []types.Instance {
	return slices.DeleteFunc(instances, func(i types.Instance) bool {
		return i.State != nil && i.State.Name == types.InstanceStateNameTerminated
	})
}

// terminate terminates instances; one EC2 does not know is already gone.
func (s *session) terminate(ctx context.Context, ids []string) error {
	_, err := s.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids})
	if err != nil && !isCode(err, "InvalidInstanceID.NotFound") {
		return fmt.Errorf("terminating instances %s in %s: %w", strings.Join(ids, ", "), s.region, err)
	}
	return nil
}

// prepare looks up what RunInstances needs beyond the spec: the subnet
// and security groups its filters name, the user data, the AMI's root
// device name.
func (s *session) prepare(ctx context.Context, m *machinev1beta1.Machine, spec *machinev1beta1.AWSMachineProviderConfig) (launch, error) {
	l := launch{zone: spec.Placement.AvailabilityZone, subnetID: awssdk.ToString(spec.Subnet.ID)}
	var err error
	if l.subnetID == "" && len(spec.Subnet.Filters) > 0 {
		if l.subnetID, l.zone, err = s.subnet(ctx, spec.Subnet.Filters, l.zone); err != nil {
			return launch{}, err
		}
	}
	if l.securityGroupIDs, err = s.securityGroups(ctx, spec.SecurityGroups); err != nil {
		return launch{}, err
	}
	if ref := spec.UserDataSecret; ref != nil {
		if l.userData, err = s.userData(ctx, m.Namespace, ref.Name); err != nil {
			return launch{}, err
		}
	}
	if needsRootDevice(spec) {
		if l.rootDeviceName, err = s.rootDeviceName(ctx, awssdk.ToString(spec.AMI.ID)); err != nil {
			return launch{}, err
		}
	}
	return l, nil
}

// subnet returns the first subnet, by ID, that the filters match (in the
// zone, when one is given), and its zone.
func (s *session) subnet(ctx context.Context, filters []machinev1beta1.Filter, zone string) (id, subnetZone string, err error) {
	in := &ec2.DescribeSubnetsInput{Filters: ec2Filters(filters)}
	if zone != "" {
		in.Filters = append(in.Filters, types.Filter{Name: awssdk.String("availability-zone"), Values: []string{zone}})
	}
	var subnets []types.Subnet
	seen := pageTokens{}
	pages := ec2.NewDescribeSubnetsPaginator(s.ec2, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err == nil {
			err = seen.next(page.NextToken)
		}
		if err != nil {
			return "", "", fmt.Errorf("describing subnets %s in %s: %w", describeFilters(in.Filters), s.region, err)
		}
		subnets = append(subnets, page.Subnets...)
	}
	if len(subnets) == 0 {
		return "", "", provider.InvalidConfig("subnet.filters", "match no subnet in %s (%s)", s.region, describeFilters(in.Filters))
	}
	first := slices.MinFunc(subnets, func(a, b types.Subnet) int {
		return strings.Compare(awssdk.ToString(a.SubnetId), awssdk.ToString(b.SubnetId))
	})
	return awssdk.ToString(first.SubnetId), awssdk.ToString(first.AvailabilityZone), nil
}

// securityGroups returns the IDs the references name, in order, without
// repeats: their IDs, and every group their filters match.
func (s *session) securityGroups(ctx context.Context, refs []machinev1beta1.AWSResourceReference) ([]string, error) {
	var ids []string
	add := func(id string) {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	for i, ref := range refs {
		if id := awssdk.ToString(ref.ID); id != "" {
			add(id)
			continue
		}
		in := &ec2.DescribeSecurityGroupsInput{Filters: ec2Filters(ref.Filters)}
		matched := 0
		seen := pageTokens{}
		pages := ec2.NewDescribeSecurityGroupsPaginator(s.ec2, in)
		for pages.HasMorePages() {
			page, err := pages.NextPage(ctx)
			if err == nil {
				err = seen.next(page.NextToken)
			}
			if err != nil {
				return nil, fmt.Errorf("describing security groups %s in %s: %w", describeFilters(in.Filters), s.region, err)
			}
			for _, g := range page.SecurityGroups {
				add(awssdk.ToString(g.GroupId))
				matched++
			}
		}
		if matched == 0 {
			return nil, provider.InvalidConfig(fmt.Sprintf("securityGroups[%d].filters", i), "match no security group in %s (%s)", s.region, describeFilters(in.Filters))
		}
	}
	return ids, nil
}

// rootDeviceName is the AMI's root device, which a root volume spec
// without a device name stands for.
func (s *session) rootDeviceName(ctx context.Context, ami string) (string, error) {
	out, err := s.ec2.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{ami}})
	if isCode(err, "InvalidAMIID.NotFound") || err == nil && len(out.Images) == 0 {
		return "", provider.InvalidConfig("ami.id", "%s does not exist in %s", ami, s.region)
	}
	if err != nil {
		return "", fmt.Errorf("describing image %s in %s: %w", ami, s.region, err)
	}
	name := awssdk.ToString(out.Images[0].RootDeviceName)
	if name == "" {
		return "", fmt.Errorf("image %s in %s has no root device name", ami, s.region)
	}
	return name, nil
}

func ec2Filters(filters []machinev1beta1.Filter) []types.Filter {
	out := make([]types.Filter, 0, len(filters))
	for _, f := range filters {
		out = append(out, types.Filter{Name: awssdk.String(f.Name), Values: f.Values})
	}
	return out
}

// describeFilters renders filters for a message: "with tag:Name=a,
// instance-state-name=pending|running".
func describeFilters(filters []types.Filter) string {
	parts := make([]string, 0, len(filters))
	for _, f := range filters {
		parts = append(parts, awssdk.ToString(f.Name)+"="+strings.Join(f.Values, "|"))
	}
	return "with " + strings.Join(parts, ", ")
}

// isCode says whether err is an EC2 error with that code.
func isCode(err error, code string) bool {
	var apiErr smithy.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode() == code
}
