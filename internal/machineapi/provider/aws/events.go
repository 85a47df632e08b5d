package aws

import (
	"context"
	"fmt"
	"strings"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// EventCodes are the codes of the events EC2 schedules for instances:
// what pitstop notices and acts on.
var EventCodes = []string{"instance-reboot", "system-reboot", "system-maintenance", "instance-retirement", "instance-stop"}

// EventState is where EC2 says a scheduled event stands.
type EventState string

const (
	EventScheduled EventState = "Scheduled"
	// EventCompleted and EventCanceled: EC2 still lists the event for a
	// while, its description starting "[Completed]" or "[Canceled]".
	EventCompleted EventState = "Completed"
	EventCanceled  EventState = "Canceled"
)

// ScheduledEvent is an event EC2 has scheduled for an instance.
type ScheduledEvent struct {
	InstanceID, ID, Code, Description string
	State                             EventState
	// NotBefore is the earliest the event starts, NotAfter the latest it
	// ends (zero when EC2 does not say); NotBeforeDeadline the latest
	// NotBefore may be moved to, where the event can be rescheduled.
	NotBefore, NotAfter, NotBeforeDeadline time.Time
}

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
func ScheduledEvents(ctx context.Context, api StatusAPI, instances map[string]bool) ([]ScheduledEvent, error) {
	in := &ec2.DescribeInstanceStatusInput{
		Filters:             []ec2types.Filter{{Name: awssdk.String("event.code"), Values: EventCodes}},
		IncludeAllInstances: awssdk.Bool(true),
		MaxResults:          awssdk.Int32(statusPage),
	}
	var out []ScheduledEvent
	pages := ec2.NewDescribeInstanceStatusPaginator(api, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
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

func scheduledEvent(instance string, e ec2types.InstanceStatusEvent) ScheduledEvent {
	desc := awssdk.ToString(e.Description)
	state := EventScheduled
	switch {
	case strings.HasPrefix(desc, "[Completed]"):
		state = EventCompleted
	case strings.HasPrefix(desc, "[Canceled]"):
		state = EventCanceled
	}
	return ScheduledEvent{
		InstanceID: instance, ID: awssdk.ToString(e.InstanceEventId), Code: string(e.Code), Description: desc, State: state,
		NotBefore: awssdk.ToTime(e.NotBefore), NotAfter: awssdk.ToTime(e.NotAfter), NotBeforeDeadline: awssdk.ToTime(e.NotBeforeDeadline),
	}
}

// InstanceIDOf returns the EC2 instance ID of a Node's or Machine's
// spec.providerID (aws:///us-east-1a/i-0123), or "" when it names none.
func InstanceIDOf(providerID string) string { return instanceIDFrom(providerID) }
