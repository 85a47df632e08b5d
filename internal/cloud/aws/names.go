package aws

import (
	"context"
	"fmt"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/pitstop-dev/pitstop/internal/cloud"
)

// filterValues is how many instance IDs go in one DescribeInstances
// filter (EC2 takes up to 200 values per filter).
const filterValues = 200

// PrivateDNSNames reads EC2's own record of each target's instance: its
// private DNS name, which is the name the kubelet registers its Node
// under on EC2 (the default hostname, and the name the AWS cloud provider
// gives nodes). An instance EC2 does not know, or that has no private DNS
// name (terminated), gets "". One paged DescribeInstances per region and
// credentials, filtered on the instance IDs, so that an ID EC2 does not
// know fails nothing else. Targets whose record could not be read are in
// the second map, with the error.
func (p *Provider) PrivateDNSNames(ctx context.Context, targets []cloud.Target) (map[string]string, map[string]error) {
	type groupKey struct{ region, namespace, secret string }
	groups := map[groupKey][]string{}
	var order []groupKey
	for _, t := range targets {
		k := groupKey{t.Region, t.Namespace, t.CredentialsSecret}
		if t.CredentialsSecret == "" {
			k.namespace = ""
		}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], t.InstanceID)
	}
	names, failed := map[string]string{}, map[string]error{}
	for _, k := range order {
		ids := groups[k]
		for _, id := range ids {
			names[id] = ""
		}
		err := func() error {
			s, err := p.sessionFor(ctx, k.region, k.namespace, k.secret)
			if err != nil {
				return err
			}
			for start := 0; start < len(ids); start += filterValues {
				chunk := ids[start:min(start+filterValues, len(ids))]
				found, err := s.describeInstances(ctx, &ec2.DescribeInstancesInput{
					Filters: []ec2types.Filter{{Name: awssdk.String("instance-id"), Values: chunk}},
				})
				if err != nil {
					return fmt.Errorf("describing EC2 instances in %s: %w", s.region, err)
				}
				for _, i := range found {
					if id := awssdk.ToString(i.InstanceId); id != "" {
						names[id] = awssdk.ToString(i.PrivateDnsName)
					}
				}
			}
			return nil
		}()
		if err != nil {
			for _, id := range ids {
				delete(names, id)
				failed[id] = err
			}
		}
	}
	return names, failed
}
