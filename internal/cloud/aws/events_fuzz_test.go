package aws

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/pitstop-dev/pitstop/internal/cloud"
)

// fuzzPages is an EC2 that answers DescribeInstanceStatus with pages read
// from text: one page a line, its fields separated by tabs, the first the
// page's NextToken ("pN" asks for line N next; empty: the last page), each
// other one status with one event, "instance,code,id,notBefore,description"
// (notBefore in Unix seconds, or empty). Any other token is refused, as
// EC2 refuses a token it did not give.
type fuzzPages struct {
	pages [][]ec2types.InstanceStatus
	next  []string
	calls int
}

// maxFuzzCalls is more pages than any answer holds: a listing that asks
// for more goes round in circles.
const maxFuzzCalls = 100

func parseFuzzPages(text string) *fuzzPages {
	p := &fuzzPages{}
	for i, line := range strings.Split(text, "\n") {
		if i >= 16 {
			break
		}
		fields := strings.Split(line, "\t")
		p.next = append(p.next, fields[0])
		var page []ec2types.InstanceStatus
		for _, f := range fields[1:] {
			parts := strings.SplitN(f, ",", 5)
			for len(parts) < 5 {
				parts = append(parts, "")
			}
			e := ec2types.InstanceStatusEvent{Code: ec2types.EventCode(parts[1]), InstanceEventId: awssdk.String(parts[2]), Description: awssdk.String(parts[4])}
			if s, err := strconv.ParseInt(parts[3], 10, 32); err == nil {
				e.NotBefore = awssdk.Time(time.Unix(s, 0).UTC())
			}
			page = append(page, ec2types.InstanceStatus{InstanceId: awssdk.String(parts[0]), Events: []ec2types.InstanceStatusEvent{e}})
		}
		p.pages = append(p.pages, page)
	}
	return p
}

func (p *fuzzPages) DescribeInstanceStatus(_ context.Context, in *ec2.DescribeInstanceStatusInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstanceStatusOutput, error) {
	p.calls++
	if p.calls > maxFuzzCalls {
		return nil, fmt.Errorf("fuzz: %d calls", p.calls)
	}
	page := 0
	if tok := awssdk.ToString(in.NextToken); tok != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(tok, "p"))
		if !strings.HasPrefix(tok, "p") || err != nil || n < 0 || n >= len(p.pages) {
			return nil, fmt.Errorf("InvalidParameterValue: the token %q is not valid", tok)
		}
		page = n
	}
	out := &ec2.DescribeInstanceStatusOutput{InstanceStatuses: p.pages[page]}
	if p.next[page] != "" {
		out.NextToken = awssdk.String(p.next[page])
	}
	return out, nil
}

// FuzzScheduledEvents maps what EC2 answers about scheduled events (the
// SDK parses its XML; random statuses, events, event fields and page
// tokens here) to pitstop's events. The listing ends, even when EC2's
// tokens go round in circles; an answer is either an error or every event
// of the instances asked about on the pages EC2 gave, once each and as
// EC2 gave it, never an event of another instance; an event is completed
// or canceled only as its description says.
func FuzzScheduledEvents(f *testing.F) {
	f.Add("i-1 i-2", "\ti-1,instance-reboot,instance-event-1,1790000000,The instance is scheduled for a reboot\ti-3,system-reboot,e-3,,x")
	f.Add("i-1", "p1\ti-1,instance-stop,e-1,,[Completed] The instance is running\np2\ti-2,instance-retirement,e-2,,\n\ti-1,system-maintenance,e-9,1790000000,[Canceled] x")
	f.Add("i-1", "p0\ti-1,instance-reboot,e-1,,")
	f.Add("i-1", "p1\ti-1,instance-reboot,e-1,,\np0\ti-1,instance-reboot,e-2,,")
	f.Add("i-1", "p7")
	f.Add("", "\t,,,,")
	f.Fuzz(func(t *testing.T, instances, text string) {
		asked := map[string]bool{}
		for _, id := range strings.Fields(instances) {
			asked[id] = true
		}
		api := parseFuzzPages(text)
		got, err := ScheduledEvents(t.Context(), api, asked)
		if api.calls > maxFuzzCalls {
			t.Fatalf("the listing did not end: %d calls for %d pages (tokens %q)", api.calls, len(api.pages), api.next)
		}
		if err != nil {
			if got != nil || !strings.Contains(err.Error(), "EC2") {
				t.Fatalf("an error (%v) with events %+v, or one that does not say EC2", err, got)
			}
			return
		}
		// The pages EC2 gave, in order.
		var want []cloud.ScheduledEvent
		page := 0
		for range api.calls {
			for _, st := range api.pages[page] {
				e := st.Events[0]
				if !asked[*st.InstanceId] {
					continue
				}
				want = append(want, cloud.ScheduledEvent{InstanceID: *st.InstanceId, ID: *e.InstanceEventId, Code: string(e.Code), Description: *e.Description, NotBefore: awssdk.ToTime(e.NotBefore)})
			}
			page, _ = strconv.Atoi(strings.TrimPrefix(api.next[page], "p"))
		}
		if len(got) != len(want) {
			t.Fatalf("%d events read, EC2 answered %d of the instances asked about:\n%+v\n%+v", len(got), len(want), got, want)
		}
		for i, e := range got {
			state := cloud.EventScheduled
			switch {
			case strings.HasPrefix(e.Description, "[Completed]"):
				state = cloud.EventCompleted
			case strings.HasPrefix(e.Description, "[Canceled]"):
				state = cloud.EventCanceled
			}
			w := want[i]
			if !asked[e.InstanceID] || e.InstanceID != w.InstanceID || e.ID != w.ID || e.Code != w.Code || e.Description != w.Description ||
				!e.NotBefore.Equal(w.NotBefore) || e.State != state || !e.NotAfter.IsZero() || !e.NotBeforeDeadline.IsZero() {
				t.Fatalf("event %d read as %+v; EC2 answered %+v (state %s)", i, e, w, state)
			}
		}
		if slices.ContainsFunc(got, func(e cloud.ScheduledEvent) bool { return !asked[e.InstanceID] }) {
			t.Fatal("an event of an instance not asked about was read")
		}
	})
}

// TestUntrustedEC2PagesInCirclesEndTheListing: FuzzScheduledEvents found
// that an EC2 (or whatever answers as it) that gives back a page token it
// gave before had pitstop list the same pages for ever, its events
// growing in memory. The listing now ends with an error at the first
// token that comes back, so those instances' events count as unread.
func TestUntrustedEC2PagesInCirclesEndTheListing(t *testing.T) {
	for name, text := range map[string]string{
		"a page that names itself next":  "p0\ti-1,instance-reboot,e-1,,",
		"two pages that name each other": "p1\ti-1,instance-reboot,e-1,,\np0\ti-1,instance-reboot,e-2,,",
		"a cycle after a first page":     "p1\ti-1,instance-reboot,e-1,,\np2\t\np1\t",
	} {
		t.Run(name, func(t *testing.T) {
			api := parseFuzzPages(text)
			got, err := ScheduledEvents(t.Context(), api, map[string]bool{"i-1": true})
			if err == nil || !strings.Contains(err.Error(), "go round in circles") || got != nil || api.calls > len(api.pages)+1 {
				t.Fatalf("after %d calls for %d pages: events %+v, error %v; want an error that the pages go round in circles", api.calls, len(api.pages), got, err)
			}
		})
	}
}
