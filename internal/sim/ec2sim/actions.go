package ec2sim

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

func notFound(code, format string, args ...any) *Fault {
	return &Fault{Code: code, Message: fmt.Sprintf(format, args...), Status: http.StatusBadRequest}
}

func invalidParameter(format string, args ...any) *Fault {
	return &Fault{Code: "InvalidParameterValue", Message: fmt.Sprintf(format, args...), Status: http.StatusBadRequest}
}

func (s *Server) runInstances(p url.Values) (any, *Fault) {
	if p.Get("MinCount") != "1" || p.Get("MaxCount") != "1" {
		return nil, invalidParameter("the fake launches one instance at a time (MinCount=%q, MaxCount=%q)", p.Get("MinCount"), p.Get("MaxCount"))
	}
	// A repeated client token returns the instance it launched, whatever
	// its state: that is EC2's idempotency.
	if token := p.Get("ClientToken"); token != "" {
		for _, i := range s.instances {
			if i.ClientToken == token {
				return s.runResponse(i), nil
			}
		}
	}
	i, fault := s.launch(p)
	if fault != nil {
		return nil, fault
	}
	s.instances = append(s.instances, i)
	if f := s.onLaunch; f != nil {
		go f(clone(i))
	}
	return s.runResponse(i), nil
}

func (s *Server) launch(p url.Values) (*Instance, *Fault) {
	image := p.Get("ImageId")
	if !s.hasImage(image) {
		return nil, notFound("InvalidAMIID.NotFound", "The image id '[%s]' does not exist", image)
	}
	if p.Get("InstanceType") == "" {
		return nil, &Fault{Code: "MissingParameter", Message: "The request must contain the parameter InstanceType", Status: http.StatusBadRequest}
	}
	subnetID, groups := p.Get("SubnetId"), list(p, "SecurityGroupId")
	public := false
	if p.Has("NetworkInterface.1.DeviceIndex") {
		subnetID, groups = p.Get("NetworkInterface.1.SubnetId"), list(p, "NetworkInterface.1.SecurityGroupId")
		public = p.Get("NetworkInterface.1.AssociatePublicIpAddress") == "true"
	}
	s.seq++
	i := &Instance{
		ID:           fmt.Sprintf("i-%017x", s.seq),
		ImageID:      image,
		InstanceType: p.Get("InstanceType"),
		State:        StatePending,
		Zone:         p.Get("Placement.AvailabilityZone"),
		KeyName:      p.Get("KeyName"),
		ClientToken:  p.Get("ClientToken"),
		UserData:     p.Get("UserData"),
		Tags:         map[string]string{},
		LaunchTime:   fakeEpoch.Add(time.Duration(s.seq) * time.Second),
	}
	i.IAMInstanceProfile = p.Get("IamInstanceProfile.Name") + p.Get("IamInstanceProfile.Arn")
	if subnetID != "" {
		sn, ok := s.subnet(subnetID)
		if !ok {
			return nil, notFound("InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", subnetID)
		}
		if i.Zone != "" && i.Zone != sn.Zone {
			return nil, invalidParameter("Value (%s) for parameter availabilityZone is invalid. Subnet '%s' is in the availability zone %s", i.Zone, sn.ID, sn.Zone)
		}
		i.SubnetID, i.VPCID, i.Zone = sn.ID, sn.VPCID, sn.Zone
	}
	if i.Zone == "" {
		i.Zone = "us-east-1a"
	}
	known := s.groupsByID()
	for _, g := range groups {
		if _, ok := known[g]; !ok {
			return nil, notFound("InvalidGroup.NotFound", "The security group '%s' does not exist", g)
		}
	}
	i.SecurityGroupIDs = groups
	for n := 1; p.Has(fmt.Sprintf("TagSpecification.%d.ResourceType", n)); n++ {
		prefix := fmt.Sprintf("TagSpecification.%d.", n)
		if p.Get(prefix+"ResourceType") != "instance" {
			continue
		}
		for m := 1; p.Has(fmt.Sprintf("%sTag.%d.Key", prefix, m)); m++ {
			i.Tags[p.Get(fmt.Sprintf("%sTag.%d.Key", prefix, m))] = p.Get(fmt.Sprintf("%sTag.%d.Value", prefix, m))
		}
	}
	i.PrivateIP = fmt.Sprintf("10.0.%d.%d", s.seq/256%256, s.seq%256)
	i.PrivateDNS = "ip-" + strings.ReplaceAll(i.PrivateIP, ".", "-") + ".ec2.internal"
	if public {
		i.PublicIP = fmt.Sprintf("203.0.113.%d", s.seq%256)
		i.PublicDNS = "ec2-" + strings.ReplaceAll(i.PublicIP, ".", "-") + ".compute-1.amazonaws.com"
	}
	return i, nil
}

func (s *Server) runResponse(i *Instance) runInstancesResponse {
	groups := s.groupsByID()
	return runInstancesResponse{
		RequestID: s.requestID(),
		xmlReservation: xmlReservation{
			ReservationID: "r-" + strings.TrimPrefix(i.ID, "i-"),
			OwnerID:       "123456789012",
			Instances:     []xmlInstance{i.xml(groups)},
		},
	}
}

func (s *Server) describeInstances(p url.Values) (any, *Fault) {
	selected := s.instances
	if ids := list(p, "InstanceId"); len(ids) > 0 {
		selected = nil
		for _, id := range ids {
			i := s.instance(id)
			if i == nil {
				return nil, notFound("InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", id)
			}
			selected = append(selected, i)
		}
	}
	filters, fault := parseFilters(p)
	if fault != nil {
		return nil, fault
	}
	start, end, next, fault := s.page(p, len(selected))
	if fault != nil {
		return nil, fault
	}
	groups := s.groupsByID()
	resp := describeInstancesResponse{RequestID: s.requestID(), NextToken: next}
	for _, i := range selected[start:end] {
		ok, fault := filters.match(instanceAttr(i))
		if fault != nil {
			return nil, fault
		}
		if ok {
			resp.Reservations = append(resp.Reservations, xmlReservation{
				ReservationID: "r-" + strings.TrimPrefix(i.ID, "i-"),
				OwnerID:       "123456789012",
				Instances:     []xmlInstance{i.xml(groups)},
			})
		}
	}
	return resp, nil
}

func instanceAttr(i *Instance) func(string) ([]string, bool) {
	return func(name string) ([]string, bool) {
		switch name {
		case "instance-id":
			return []string{i.ID}, true
		case "instance-state-name":
			return []string{i.State}, true
		case "client-token":
			return []string{i.ClientToken}, true
		case "subnet-id":
			return []string{i.SubnetID}, true
		case "vpc-id":
			return []string{i.VPCID}, true
		case "availability-zone":
			return []string{i.Zone}, true
		case "image-id":
			return []string{i.ImageID}, true
		case "instance-type":
			return []string{i.InstanceType}, true
		case "private-ip-address":
			return []string{i.PrivateIP}, true
		}
		return tagAttr(i.Tags, name)
	}
}

// targets are the instances an action's InstanceId.N parameters name: a
// fault when there are none or one does not exist.
func (s *Server) targets(p url.Values) ([]*Instance, *Fault) {
	ids := list(p, "InstanceId")
	if len(ids) == 0 {
		return nil, &Fault{Code: "MissingParameter", Message: "The request must contain the parameter InstanceId", Status: http.StatusBadRequest}
	}
	var targets []*Instance
	for _, id := range ids {
		i := s.instance(id)
		if i == nil {
			return nil, notFound("InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", id)
		}
		targets = append(targets, i)
	}
	return targets, nil
}

func (s *Server) terminateInstances(p url.Values) (any, *Fault) {
	targets, fault := s.targets(p)
	if fault != nil {
		return nil, fault
	}
	resp := terminateInstancesResponse{RequestID: s.requestID()}
	for _, i := range targets {
		prev := i.State
		// The fake skips shutting-down: the instance is gone at once.
		i.State = StateTerminated
		if f := s.onTerminate; f != nil && prev != StateTerminated {
			go f(clone(i))
		}
		i.PublicIP, i.PublicDNS = "", ""
		resp.Instances = append(resp.Instances, xmlStateChange{
			InstanceID:    i.ID,
			CurrentState:  xmlState{Code: stateCodes[i.State], Name: i.State},
			PreviousState: xmlState{Code: stateCodes[prev], Name: prev},
		})
	}
	return resp, nil
}

func (s *Server) describeSubnets(p url.Values) (any, *Fault) {
	selected := s.subnets
	if ids := list(p, "SubnetId"); len(ids) > 0 {
		selected = nil
		for _, id := range ids {
			sn, ok := s.subnet(id)
			if !ok {
				return nil, notFound("InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", id)
			}
			selected = append(selected, sn)
		}
	}
	filters, fault := parseFilters(p)
	if fault != nil {
		return nil, fault
	}
	start, end, next, fault := s.page(p, len(selected))
	if fault != nil {
		return nil, fault
	}
	resp := describeSubnetsResponse{RequestID: s.requestID(), NextToken: next}
	for _, sn := range selected[start:end] {
		ok, fault := filters.match(func(name string) ([]string, bool) {
			switch name {
			case "subnet-id":
				return []string{sn.ID}, true
			case "vpc-id":
				return []string{sn.VPCID}, true
			case "availability-zone", "availabilityZone":
				return []string{sn.Zone}, true
			case "cidr-block", "cidrBlock", "cidr":
				return []string{sn.CIDR}, true
			case "state":
				return []string{"available"}, true
			}
			return tagAttr(sn.Tags, name)
		})
		if fault != nil {
			return nil, fault
		}
		if ok {
			resp.Subnets = append(resp.Subnets, xmlSubnet{
				SubnetID: sn.ID, State: "available", VpcID: sn.VPCID, CidrBlock: sn.CIDR,
				AvailabilityZone: sn.Zone, Tags: xmlTags(sn.Tags),
			})
		}
	}
	return resp, nil
}

func (s *Server) describeSecurityGroups(p url.Values) (any, *Fault) {
	selected := s.groups
	if ids := list(p, "GroupId"); len(ids) > 0 {
		known := s.groupsByID()
		selected = nil
		for _, id := range ids {
			g, ok := known[id]
			if !ok {
				return nil, notFound("InvalidGroup.NotFound", "The security group '%s' does not exist", id)
			}
			selected = append(selected, g)
		}
	}
	filters, fault := parseFilters(p)
	if fault != nil {
		return nil, fault
	}
	start, end, next, fault := s.page(p, len(selected))
	if fault != nil {
		return nil, fault
	}
	resp := describeSecurityGroupsResponse{RequestID: s.requestID(), NextToken: next}
	for _, g := range selected[start:end] {
		ok, fault := filters.match(func(name string) ([]string, bool) {
			switch name {
			case "group-id":
				return []string{g.ID}, true
			case "group-name":
				return []string{g.Name}, true
			case "vpc-id":
				return []string{g.VPCID}, true
			}
			return tagAttr(g.Tags, name)
		})
		if fault != nil {
			return nil, fault
		}
		if ok {
			resp.Groups = append(resp.Groups, xmlSecurityGroup{
				OwnerID: "123456789012", GroupID: g.ID, GroupName: g.Name,
				GroupDescription: g.Name, VpcID: g.VPCID, Tags: xmlTags(g.Tags),
			})
		}
	}
	return resp, nil
}

func (s *Server) describeImages(p url.Values) (any, *Fault) {
	resp := describeImagesResponse{RequestID: s.requestID()}
	for _, id := range list(p, "ImageId") {
		if !s.hasImage(id) {
			return nil, notFound("InvalidAMIID.NotFound", "The image id '[%s]' does not exist", id)
		}
		for _, img := range s.images {
			if img.ID == id {
				resp.Images = append(resp.Images, xmlImage{
					ImageID: img.ID, ImageState: "available", Name: img.Name,
					RootDeviceType: "ebs", RootDeviceName: img.RootDeviceName,
				})
			}
		}
	}
	return resp, nil
}

func (s *Server) hasImage(id string) bool {
	for _, img := range s.images {
		if img.ID == id {
			return true
		}
	}
	return false
}

func (s *Server) subnet(id string) (Subnet, bool) {
	for _, sn := range s.subnets {
		if sn.ID == id {
			return sn, true
		}
	}
	return Subnet{}, false
}

// page picks the page a request asks for out of n items: NextToken says
// where it starts, the page size (or a smaller MaxResults) how long it is.
func (s *Server) page(p url.Values, n int) (start, end int, next string, fault *Fault) {
	size := s.pageSize
	if v := p.Get("MaxResults"); v != "" {
		m, err := strconv.Atoi(v)
		if err != nil || m < 5 || m > 1000 {
			return 0, 0, "", invalidParameter("Value ( %s ) for parameter maxResults is invalid. Expecting a value between 5 and 1000.", v)
		}
		size = min(size, m)
	}
	if tok := p.Get("NextToken"); tok != "" {
		offset, ok := strings.CutPrefix(tok, "fake-page-")
		var err error
		start, err = strconv.Atoi(offset)
		if !ok || err != nil || start < 0 || start > n {
			return 0, 0, "", invalidParameter("Invalid value '%s' for nextToken", tok)
		}
	}
	end = min(start+size, n)
	if end < n {
		next = fmt.Sprintf("fake-page-%d", end)
	}
	return start, end, next, nil
}

// filter is one Filter.N of a Describe request.
type filter struct {
	name   string
	values []string
}

type filters []filter

func parseFilters(p url.Values) (filters, *Fault) {
	var out filters
	for n := 1; p.Has(fmt.Sprintf("Filter.%d.Name", n)); n++ {
		f := filter{name: p.Get(fmt.Sprintf("Filter.%d.Name", n)), values: list(p, fmt.Sprintf("Filter.%d.Value", n))}
		if len(f.values) == 0 {
			return nil, invalidParameter("The filter '%s' has no values", f.name)
		}
		out = append(out, f)
	}
	return out, nil
}

// match says whether an object passes every filter: one of its values
// for the filter's name matches one of the filter's values (which may
// hold EC2's wildcards * and ?).
func (fs filters) match(attr func(name string) ([]string, bool)) (bool, *Fault) {
	for _, f := range fs {
		have, known := attr(f.name)
		if !known {
			return false, invalidParameter("The filter '%s' is invalid", f.name)
		}
		if !anyMatch(f.values, have) {
			return false, nil
		}
	}
	return true, nil
}

func anyMatch(patterns, values []string) bool {
	for _, p := range patterns {
		for _, v := range values {
			if glob(p, v) {
				return true
			}
		}
	}
	return false
}

// glob matches s against a pattern where * is any run of characters and
// ? any one character.
func glob(pattern, s string) bool {
	for len(pattern) > 0 {
		switch pattern[0] {
		case '*':
			for i := len(s); i >= 0; i-- {
				if glob(pattern[1:], s[i:]) {
					return true
				}
			}
			return false
		case '?':
			if len(s) == 0 {
				return false
			}
		default:
			if len(s) == 0 || s[0] != pattern[0] {
				return false
			}
		}
		pattern, s = pattern[1:], s[1:]
	}
	return len(s) == 0
}

// tagAttr answers the tag filters: tag:<key> (the tag's value; an object
// without the tag has none) and tag-key.
func tagAttr(tags map[string]string, name string) ([]string, bool) {
	if key, ok := strings.CutPrefix(name, "tag:"); ok {
		if v, has := tags[key]; has {
			return []string{v}, true
		}
		return nil, true
	}
	if name == "tag-key" {
		return sortedKeys(tags), true
	}
	return nil, false
}
