package aws

import (
	"context"
	"fmt"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"

	"github.com/pitstop-dev/pitstop/internal/cloud"
	"github.com/pitstop-dev/pitstop/internal/machineapi/provider"
)

// EventCodes are the codes of the events EC2 schedules for instances:
// what pitstop notices and acts on.
var EventCodes = []string{"instance-reboot", "system-reboot", "system-maintenance", "instance-retirement", "instance-stop"}

// StatusAPI is the EC2 call ScheduledEvents makes.
type StatusAPI interface {
	DescribeInstanceStatus(context.Context, *ec2.DescribeInstanceStatusInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceStatusOutput, error)
}

// statusPage is as many statuses as EC2 returns in one call.
const statusPage = 1000

// ScheduledEvents lists the scheduled events of the instances in
// instances (instance IDs) in as few calls as EC2 allows: the account's
// instances with an event of EventCodes, filtered by EC2, a thousand a
// page, rather than one call per instance; events of other instances are
// left out. Throttling is retried by the client's retryer. An error is
// returned as one, never as "no events": an instance whose events could
// not be read must not look free of them.
func ScheduledEvents(ctx context.Context, api StatusAPI, instances map[string]bool) ([]cloud.ScheduledEvent, error) {
	in := &ec2.DescribeInstanceStatusInput{
		Filters:             []ec2types.Filter{{Name: awssdk.String("event.code"), Values: EventCodes}},
		IncludeAllInstances: awssdk.Bool(true),
		MaxResults:          awssdk.Int32(statusPage),
	}
	var out []cloud.ScheduledEvent
	seen := pageTokens{}
	pages := ec2.NewDescribeInstanceStatusPaginator(api, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing EC2's scheduled events: %w", err)
		}
		if err := seen.next(page.NextToken); err != nil {
			return nil, fmt.Errorf("listing EC2's scheduled events: %w", err)
		}
		for _, st := range page.InstanceStatuses {
			id := awssdk.ToString(st.InstanceId)
			if !instances[id] {
				continue
			}
			for _, e := range st.Events {
				out = append(out, scheduledEvent(id, e))
			}
		}
	}
	return out, nil
}

func scheduledEvent(instance string, e ec2types.InstanceStatusEvent) cloud.ScheduledEvent {
	desc := awssdk.ToString(e.Description)
	state := cloud.EventScheduled
	switch {
	case strings.HasPrefix(desc, "[Completed]"):
		state = cloud.EventCompleted
	case strings.HasPrefix(desc, "[Canceled]"):
		state = cloud.EventCanceled
	}
	return cloud.ScheduledEvent{
		InstanceID: instance, ID: awssdk.ToString(e.InstanceEventId), Code: string(e.Code), Description: desc, State: state,
		NotBefore: awssdk.ToTime(e.NotBefore), NotAfter: awssdk.ToTime(e.NotAfter), NotBeforeDeadline: awssdk.ToTime(e.NotBeforeDeadline),
	}
}

// InstanceIDOf returns the EC2 instance ID of a Node's or Machine's
// spec.providerID (aws:///us-east-1a/i-0123), or "" when it names none.
func InstanceIDOf(providerID string) string { return instanceIDFrom(providerID) }

// MachineTarget returns the target of a Machine's instance; false when the
// Machine is not an aws one or has no instance yet.
func MachineTarget(m *machinev1beta1.Machine) (cloud.Target, bool) {
	if kind, err := provider.SpecKind(m); err != nil || kind != Kind {
		return cloud.Target{}, false
	}
	spec, st, err := decode(m)
	if err != nil {
		return cloud.Target{}, false
	}
	id := knownInstanceID(m, st)
	if id == "" {
		return cloud.Target{}, false
	}
	t := cloud.Target{InstanceID: id, Region: spec.Placement.Region, Namespace: m.Namespace}
	if t.Region == "" {
		t.Region = RegionOfZone(spec.Placement.AvailabilityZone)
	}
	if ref := spec.CredentialsSecret; ref != nil {
		t.CredentialsSecret = ref.Name
	}
	return t, true
}

// NodeTarget returns the target of a Node's instance, from its
// spec.providerID (aws:///us-east-1a/i-0123); false when it names none.
func NodeTarget(providerID string) (cloud.Target, bool) {
	id := instanceIDFrom(providerID)
	if id == "" {
		return cloud.Target{}, false
	}
	rest := strings.TrimPrefix(providerID, "aws://")
	parts := strings.Split(strings.Trim(rest, "/"), "/")
	var region string
	if len(parts) == 2 {
		region = RegionOfZone(parts[0])
	}
	return cloud.Target{InstanceID: id, Region: region}, true
}

// RegionOfZone returns the region of an availability zone (us-east-1a →
// us-east-1), or "" when the zone's name does not say (a Local Zone).
func RegionOfZone(zone string) string {
	region := strings.TrimRightFunc(zone, func(r rune) bool { return r >= 'a' && r <= 'z' })
	if region == zone || !regionPattern.MatchString(region) {
		return ""
	}
	return region
}

// ScheduledEventsOf lists the scheduled events of the targets: one paged
// listing per region and credentials, never a call per instance.
func (p *Provider) ScheduledEventsOf(ctx context.Context, targets []cloud.Target) cloud.PollResult {
	type groupKey struct{ region, namespace, secret string }
	groups := map[groupKey]map[string]bool{}
	var order []groupKey
	for _, t := range targets {
		k := groupKey{t.Region, t.Namespace, t.CredentialsSecret}
		if t.CredentialsSecret == "" {
			k.namespace = ""
		}
		if groups[k] == nil {
			groups[k] = map[string]bool{}
			order = append(order, k)
		}
		groups[k][t.InstanceID] = true
	}
	res := cloud.PollResult{Failed: map[string]error{}}
	for _, k := range order {
		err := func() error {
			s, err := p.sessionFor(ctx, k.region, k.namespace, k.secret)
			if err != nil {
				return err
			}
			counted := countingStatusAPI{api: s.ec2, calls: &res.Calls}
			events, err := ScheduledEvents(ctx, counted, groups[k])
			if err != nil {
				return fmt.Errorf("%s: %w", s.region, err)
			}
			res.Events = append(res.Events, events...)
			return nil
		}()
		if err != nil {
			for id := range groups[k] {
				res.Failed[id] = err
			}
		}
	}
	return res
}

type countingStatusAPI struct {
	api   StatusAPI
	calls *int
}

func (c countingStatusAPI) DescribeInstanceStatus(ctx context.Context, in *ec2.DescribeInstanceStatusInput, opts ...func(*ec2.Options)) (*ec2.DescribeInstanceStatusOutput, error) {
	out, err := c.api.DescribeInstanceStatus(ctx, in, opts...)
	if err == nil {
		*c.calls++
	}
	return out, err
}

// RebootInstance reboots the target's instance (EC2 RebootInstances): a
// reboot the owner makes, which completes an instance-reboot event early.
func (p *Provider) RebootInstance(ctx context.Context, t cloud.Target) error {
	s, err := p.sessionFor(ctx, t.Region, t.Namespace, t.CredentialsSecret)
	if err != nil {
		return err
	}
	if _, err := s.ec2.RebootInstances(ctx, &ec2.RebootInstancesInput{InstanceIds: []string{t.InstanceID}}); err != nil {
		return fmt.Errorf("rebooting EC2 instance %s in %s: %w", t.InstanceID, s.region, err)
	}
	return nil
}

// pageTokens are the page tokens a listing has been given. An EC2
// paginator follows whatever token comes back: one that came back before
// would list the same pages for ever, what they hold growing.
type pageTokens map[string]bool

// next records the token of the page to come, and refuses one given
// before.
func (t pageTokens) next(token *string) error {
	next := awssdk.ToString(token)
	if next == "" {
		return nil
	}
	if t[next] {
		return fmt.Errorf("EC2 gave the page token %q twice, its pages go round in circles", next)
	}
	t[next] = true
	return nil
}
