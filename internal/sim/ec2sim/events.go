package ec2sim

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// ScheduledEvent is an event EC2 has scheduled for an instance: a reboot,
// a retirement, a stop, system maintenance. EC2 keeps a completed or
// canceled event listed for a while, its description starting
// "[Completed]" or "[Canceled]".
type ScheduledEvent struct {
	ID, Code, Description string
	NotBefore, NotAfter   time.Time
	NotBeforeDeadline     time.Time
}

// ScheduleEvent schedules e for the instance id; false if there is no
// such instance.
func (s *Server) ScheduleEvent(id string, e ScheduledEvent) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.instance(id)
	if i == nil {
		return false
	}
	i.Events = append(i.Events, e)
	return true
}

// SetEventDescription changes the description of the instance's event
// eventID, as EC2 does when the event completes or is canceled.
func (s *Server) SetEventDescription(id, eventID, description string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := s.instance(id); i != nil {
		for k := range i.Events {
			if i.Events[k].ID == eventID {
				i.Events[k].Description = description
			}
		}
	}
}

// RemoveEvent drops the instance's event eventID from the listing.
func (s *Server) RemoveEvent(id, eventID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := s.instance(id); i != nil {
		kept := i.Events[:0]
		for _, e := range i.Events {
			if e.ID != eventID {
				kept = append(kept, e)
			}
		}
		i.Events = kept
	}
}

// describeInstanceStatus lists the status of the running instances (all
// with IncludeAllInstances), with their scheduled events, filtered and
// paged as EC2 does; InstanceId.N and MaxResults may not be given
// together.
func (s *Server) describeInstanceStatus(p url.Values) (any, *Fault) {
	ids := list(p, "InstanceId")
	if len(ids) > 0 && p.Get("MaxResults") != "" {
		return nil, invalidParameter("The parameter instancesSet cannot be used with the parameter maxResults")
	}
	selected := s.instances
	if len(ids) > 0 {
		selected = nil
		for _, id := range ids {
			i := s.instance(id)
			if i == nil {
				return nil, notFound("InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", id)
			}
			selected = append(selected, i)
		}
	}
	all := p.Get("IncludeAllInstances") == "true"
	var candidates []*Instance
	for _, i := range selected {
		if all || i.State == StateRunning {
			candidates = append(candidates, i)
		}
	}
	filters, fault := parseFilters(p)
	if fault != nil {
		return nil, fault
	}
	start, end, next, fault := s.page(p, len(candidates))
	if fault != nil {
		return nil, fault
	}
	resp := describeInstanceStatusResponse{RequestID: s.requestID(), NextToken: next}
	for _, i := range candidates[start:end] {
		ok, fault := filters.match(statusAttr(i))
		if fault != nil {
			return nil, fault
		}
		if !ok {
			continue
		}
		item := xmlInstanceStatus{InstanceID: i.ID, Zone: i.Zone, State: xmlState{Code: stateCodes[i.State], Name: i.State}}
		for _, e := range i.Events {
			item.Events = append(item.Events, xmlEvent{
				ID: e.ID, Code: e.Code, Description: e.Description,
				NotBefore: stamp(e.NotBefore), NotAfter: stamp(e.NotAfter), NotBeforeDeadline: stamp(e.NotBeforeDeadline),
			})
		}
		resp.Statuses = append(resp.Statuses, item)
	}
	return resp, nil
}

// statusAttr answers the filters of DescribeInstanceStatus for i; an
// event.* filter matches if any of its events does.
func statusAttr(i *Instance) func(string) ([]string, bool) {
	return func(name string) ([]string, bool) {
		var out []string
		switch name {
		case "instance-id":
			return []string{i.ID}, true
		case "availability-zone":
			return []string{i.Zone}, true
		case "instance-state-name":
			return []string{i.State}, true
		case "event.code":
			for _, e := range i.Events {
				out = append(out, e.Code)
			}
		case "event.description":
			for _, e := range i.Events {
				out = append(out, e.Description)
			}
		case "event.instance-event-id":
			for _, e := range i.Events {
				out = append(out, e.ID)
			}
		default:
			return nil, false
		}
		return out, true
	}
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

type describeInstanceStatusResponse struct {
	XMLName   xml.Name            `xml:"http://ec2.amazonaws.com/doc/2016-11-15/ DescribeInstanceStatusResponse"`
	RequestID string              `xml:"requestId"`
	Statuses  []xmlInstanceStatus `xml:"instanceStatusSet>item"`
	NextToken string              `xml:"nextToken,omitempty"`
}

type xmlInstanceStatus struct {
	InstanceID string     `xml:"instanceId"`
	Zone       string     `xml:"availabilityZone"`
	State      xmlState   `xml:"instanceState"`
	Events     []xmlEvent `xml:"eventsSet>item"`
}

type xmlEvent struct {
	ID                string `xml:"instanceEventId"`
	Code              string `xml:"code"`
	Description       string `xml:"description"`
	NotBefore         string `xml:"notBefore,omitempty"`
	NotAfter          string `xml:"notAfter,omitempty"`
	NotBeforeDeadline string `xml:"notBeforeDeadline,omitempty"`
}

// OnReboot makes RebootInstances call f with each instance it reboots, as
// the instance goes down: a test restarts the instance's node there (a
// new boot ID). f runs on the request's goroutine, outside the fake's lock.
func (s *Server) OnReboot(f func(id string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onReboot = f
}

// Reboots returns how many times the instance was rebooted.
func (s *Server) Reboots(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reboots[id]
}

// rebootInstances reboots running instances. As on EC2, a reboot the
// owner makes completes the instance's instance-reboot events (their
// description gains "[Completed]"); other events stay scheduled.
func (s *Server) rebootInstances(p url.Values) (any, *Fault) {
	targets, fault := s.targets(p)
	if fault != nil {
		return nil, fault
	}
	for _, i := range targets {
		if i.State != StateRunning {
			return nil, &Fault{Code: "IncorrectState", Message: fmt.Sprintf("The instance '%s' is not in a state from which it can be rebooted.", i.ID), Status: http.StatusBadRequest}
		}
	}
	for _, i := range targets {
		s.reboots[i.ID]++
		for k, e := range i.Events {
			if e.Code == "instance-reboot" && !strings.HasPrefix(e.Description, "[") {
				i.Events[k].Description = "[Completed] " + e.Description
			}
		}
		if f := s.onReboot; f != nil {
			id := i.ID
			s.mu.Unlock()
			f(id)
			s.mu.Lock()
		}
	}
	return rebootInstancesResponse{RequestID: s.requestID(), Return: true}, nil
}
