package aws_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/pitstop-dev/pitstop/internal/cloud"
	"github.com/pitstop-dev/pitstop/internal/cloud/aws"
	"github.com/pitstop-dev/pitstop/internal/sim/ec2sim"
)

// eventsClient is an EC2 client of the fake, retrying throttling three
// times without waiting.
func eventsClient(f *ec2sim.Server) *ec2.Client {
	return ec2.New(ec2.Options{
		Region:       region,
		BaseEndpoint: awssdk.String(f.URL),
		Credentials:  credentials.NewStaticCredentialsProvider(accessKeyID, secretKey, ""),
		Retryer: retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = 3
			o.MaxBackoff = time.Millisecond
		}),
	})
}

// TestScheduledEventsAreListedInAFewCalls: the events of 2,500
// instances, of which the cluster's are 2,000, are read in pages of a
// thousand filtered on the event codes, never one call per instance; only
// the cluster's instances' events come back, each with its state (EC2
// keeps completed and canceled events listed a while), and an instance
// with two events has both.
func TestScheduledEventsAreListedInAFewCalls(t *testing.T) {
	f := ec2sim.New(t)
	f.AddCredentials(accessKeyID, secretKey)
	cluster := map[string]bool{}
	var ids []string
	for i := range 2500 {
		id := f.AddInstance(ec2sim.Instance{Zone: "us-east-1a"})
		ids = append(ids, id)
		if i < 2000 {
			cluster[id] = true
		}
	}
	at := time.Date(2026, 12, 3, 2, 0, 0, 0, time.UTC)
	f.ScheduleEvent(ids[10], ec2sim.ScheduledEvent{ID: "instance-event-0a", Code: "instance-retirement", Description: "The instance is running on degraded hardware", NotBefore: at, NotBeforeDeadline: at.Add(72 * time.Hour)})
	f.ScheduleEvent(ids[10], ec2sim.ScheduledEvent{ID: "instance-event-0b", Code: "system-reboot", Description: "scheduled reboot", NotBefore: at.Add(time.Hour), NotAfter: at.Add(3 * time.Hour)})
	f.ScheduleEvent(ids[1500], ec2sim.ScheduledEvent{ID: "instance-event-0c", Code: "instance-stop", Description: "[Completed] The instance is running on degraded hardware", NotBefore: at})
	f.ScheduleEvent(ids[2200], ec2sim.ScheduledEvent{ID: "instance-event-0d", Code: "system-maintenance", Description: "not the cluster's", NotBefore: at})
	f.SetState(ids[1500], ec2sim.StateStopped) // a stopped instance's events count too

	events, err := aws.ScheduledEvents(context.Background(), eventsClient(f), cluster)
	if err != nil {
		t.Fatal(err)
	}
	want := []cloud.ScheduledEvent{
		{InstanceID: ids[10], ID: "instance-event-0a", Code: "instance-retirement", Description: "The instance is running on degraded hardware", State: cloud.EventScheduled, NotBefore: at, NotBeforeDeadline: at.Add(72 * time.Hour)},
		{InstanceID: ids[10], ID: "instance-event-0b", Code: "system-reboot", Description: "scheduled reboot", State: cloud.EventScheduled, NotBefore: at.Add(time.Hour), NotAfter: at.Add(3 * time.Hour)},
		{InstanceID: ids[1500], ID: "instance-event-0c", Code: "instance-stop", Description: "[Completed] The instance is running on degraded hardware", State: cloud.EventCompleted, NotBefore: at},
	}
	if !slices.EqualFunc(events, want, func(a, b cloud.ScheduledEvent) bool {
		return a.InstanceID == b.InstanceID && a.ID == b.ID && a.Code == b.Code && a.Description == b.Description && a.State == b.State &&
			a.NotBefore.Equal(b.NotBefore) && a.NotAfter.Equal(b.NotAfter) && a.NotBeforeDeadline.Equal(b.NotBeforeDeadline)
	}) {
		t.Errorf("events:\n%+v\nwant:\n%+v", events, want)
	}
	calls := f.Requests("DescribeInstanceStatus")
	if len(calls) != 3 {
		t.Errorf("%d calls for 2,500 instances, want 3 (pages of a thousand)", len(calls))
	}
	for _, c := range calls {
		if c.Params.Get("Filter.1.Name") != "event.code" || c.Params.Get("MaxResults") != "1000" || c.Params.Has("InstanceId.1") {
			t.Errorf("a call not filtered on the event codes, in pages of a thousand: %v", c.Params)
		}
	}
}

// TestScheduledEventsRetryThrottlingAndReportErrors: a throttled call is
// retried; one that keeps failing is an error, never an empty list.
func TestScheduledEventsRetryThrottlingAndReportErrors(t *testing.T) {
	f := ec2sim.New(t)
	f.AddCredentials(accessKeyID, secretKey)
	id := f.AddInstance(ec2sim.Instance{Zone: "us-east-1a"})
	f.ScheduleEvent(id, ec2sim.ScheduledEvent{ID: "instance-event-1", Code: "system-reboot", NotBefore: time.Now().Add(time.Hour)})
	c := eventsClient(f)

	f.Fail("DescribeInstanceStatus", 2, ec2sim.Throttled)
	events, err := aws.ScheduledEvents(context.Background(), c, map[string]bool{id: true})
	if err != nil || len(events) != 1 {
		t.Fatalf("after two throttled calls: %v, %v; want the event", events, err)
	}

	f.Fail("DescribeInstanceStatus", -1, ec2sim.Fault{Code: "UnauthorizedOperation", Message: "You are not authorized to perform this operation.", Status: 403})
	events, err = aws.ScheduledEvents(context.Background(), c, map[string]bool{id: true})
	if err == nil || events != nil {
		t.Fatalf("refused: %v, %v; want an error and no list", events, err)
	}
}

// TestInstanceIDOf reads the instance ID of a providerID.
func TestInstanceIDOf(t *testing.T) {
	for in, want := range map[string]string{
		"aws:///us-east-1a/i-0123456789abcdef0": "i-0123456789abcdef0",
		"aws:///i-0123":                         "i-0123",
		"gce://project/zone/name":               "",
		"aws:///us-east-1a/":                    "",
	} {
		if got := aws.InstanceIDOf(in); got != want {
			t.Errorf("InstanceIDOf(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestScheduledEventsOfAsksOncePerRegionAndCredentials: the instances of
// three Machines (credentials from their Secret) are read in one call;
// two Nodes without a Machine use the default credentials, which this
// test does not have, so their events cannot be read: they are reported
// failed, with the error, and never as free of events.
func TestScheduledEventsOfAsksOncePerRegionAndCredentials(t *testing.T) {
	a := newAccount(t)
	var targets []cloud.Target
	for i := range 3 {
		id := a.ec2.AddInstance(ec2sim.Instance{Zone: "us-east-1a"})
		m := machine(t, "worker-"+strconv.Itoa(i), workerSpec(), withStatus(id))
		target, ok := aws.MachineTarget(m)
		if !ok || target.InstanceID != id || target.Region != region || target.CredentialsSecret != credsSecret {
			t.Fatalf("MachineTarget(%s) = %+v, %v", m.Name, target, ok)
		}
		targets = append(targets, target)
		a.ec2.ScheduleEvent(id, ec2sim.ScheduledEvent{ID: "instance-event-" + strconv.Itoa(i), Code: "system-reboot", NotBefore: now.Add(time.Duration(i) * time.Hour)})
	}
	for range 2 {
		id := a.ec2.AddInstance(ec2sim.Instance{Zone: "us-east-1b"})
		target, ok := aws.NodeTarget("aws:///us-east-1b/" + id)
		if !ok || target.InstanceID != id || target.Region != region {
			t.Fatalf("NodeTarget = %+v, %v", target, ok)
		}
		targets = append(targets, target)
	}
	res := a.provider.ScheduledEventsOf(context.Background(), targets)
	if len(res.Events) != 3 {
		t.Errorf("events = %+v, want the 3 Machines' events", res.Events)
	}
	if res.Calls != 1 || len(a.ec2.Requests("DescribeInstanceStatus")) != 1 {
		t.Errorf("%d calls counted, %d received; want 1", res.Calls, len(a.ec2.Requests("DescribeInstanceStatus")))
	}
	if len(res.Failed) != 2 {
		t.Fatalf("failed = %v, want the 2 Nodes' instances", res.Failed)
	}
	for _, target := range targets[3:] {
		if res.Failed[target.InstanceID] == nil {
			t.Errorf("%s is not reported failed", target.InstanceID)
		}
	}

	// EC2 refusing every attempt fails every target of the group.
	a.ec2.Fail("DescribeInstanceStatus", -1, ec2sim.Throttled)
	res = a.provider.ScheduledEventsOf(context.Background(), targets[:3])
	if len(res.Events) != 0 || len(res.Failed) != 3 {
		t.Errorf("throttled: %d events, failed %v; want none and all 3", len(res.Events), res.Failed)
	}
	if !strings.Contains(fmt.Sprint(res.Failed[targets[0].InstanceID]), "RequestLimitExceeded") {
		t.Errorf("error %v does not say EC2 throttled", res.Failed[targets[0].InstanceID])
	}
}

// TestRegionOfZone: the region is the zone without its letter; a name
// that does not end so names no region.
func TestRegionOfZone(t *testing.T) {
	for zone, want := range map[string]string{"us-east-1a": "us-east-1", "eu-central-1c": "eu-central-1", "us-gov-west-1b": "us-gov-west-1", "": "", "us-west-2-lax-1a": "", "zone": ""} {
		if got := aws.RegionOfZone(zone); got != want {
			t.Errorf("RegionOfZone(%q) = %q, want %q", zone, got, want)
		}
	}
	if _, ok := aws.NodeTarget("kwok://node-1"); ok {
		t.Error("a kwok node has an aws target")
	}
}

// TestRebootInstanceCompletesItsRebootEvent: RebootInstances reboots the
// instance once; its instance-reboot event completes, its retirement
// stays scheduled; an instance that is not running cannot be rebooted.
func TestRebootInstanceCompletesItsRebootEvent(t *testing.T) {
	a := newAccount(t)
	id := a.ec2.AddInstance(ec2sim.Instance{Zone: "us-east-1a"})
	a.ec2.ScheduleEvent(id, ec2sim.ScheduledEvent{ID: "instance-event-r", Code: "instance-reboot", Description: "scheduled reboot", NotBefore: now.Add(time.Hour)})
	a.ec2.ScheduleEvent(id, ec2sim.ScheduledEvent{ID: "instance-event-x", Code: "instance-retirement", Description: "degraded hardware", NotBefore: now.Add(time.Hour)})
	var rebooted []string
	a.ec2.OnReboot(func(id string) { rebooted = append(rebooted, id) })
	m := machine(t, "worker-0", workerSpec(), withStatus(id))
	target, _ := aws.MachineTarget(m)
	if err := a.provider.RebootInstance(context.Background(), target); err != nil {
		t.Fatal(err)
	}
	if a.ec2.Reboots(id) != 1 || !slices.Equal(rebooted, []string{id}) {
		t.Errorf("reboots = %d, hook saw %v", a.ec2.Reboots(id), rebooted)
	}
	res := a.provider.ScheduledEventsOf(context.Background(), []cloud.Target{target})
	states := map[string]cloud.EventState{}
	for _, e := range res.Events {
		states[e.Code] = e.State
	}
	if states["instance-reboot"] != cloud.EventCompleted || states["instance-retirement"] != cloud.EventScheduled {
		t.Errorf("after the reboot: %v", states)
	}
	a.ec2.SetState(id, ec2sim.StateStopped)
	if err := a.provider.RebootInstance(context.Background(), target); err == nil || !strings.Contains(err.Error(), "IncorrectState") {
		t.Errorf("rebooting a stopped instance: %v", err)
	}
}

// TestPrivateDNSNamesReadsEC2sNameForEachInstance: EC2's private DNS name
// of each Machine's instance is read in one filtered DescribeInstances;
// an instance ID EC2 does not know gets "" and fails nothing else.
func TestPrivateDNSNamesReadsEC2sNameForEachInstance(t *testing.T) {
	a := newAccount(t)
	var targets []cloud.Target
	for i := range 2 {
		id := a.ec2.AddInstance(ec2sim.Instance{Zone: "us-east-1a", PrivateDNS: "ip-10-0-0-" + strconv.Itoa(i) + ".ec2.internal"})
		target, _ := aws.MachineTarget(machine(t, "named-"+strconv.Itoa(i), workerSpec(), withStatus(id)))
		targets = append(targets, target)
	}
	unknown := targets[0]
	unknown.InstanceID = "i-0000000000000dead"
	names, failed := a.provider.PrivateDNSNames(context.Background(), append(targets, unknown))
	if len(failed) != 0 {
		t.Fatalf("failed = %v", failed)
	}
	for i, target := range targets {
		if want := "ip-10-0-0-" + strconv.Itoa(i) + ".ec2.internal"; names[target.InstanceID] != want {
			t.Errorf("name of %s = %q, want %q", target.InstanceID, names[target.InstanceID], want)
		}
	}
	if name, ok := names[unknown.InstanceID]; !ok || name != "" {
		t.Errorf("name of an instance EC2 does not know = %q, %v; want \"\"", name, ok)
	}
	if n := len(a.ec2.Requests("DescribeInstances")); n != 1 {
		t.Errorf("%d DescribeInstances calls, want 1", n)
	}
}
