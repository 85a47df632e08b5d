package ec2sim

import (
	"encoding/xml"
	"strings"
	"time"
)

// Namespace is the XML namespace of EC2's responses (API version
// 2016-11-15, the only one EC2 has served since).
const Namespace = "http://ec2.amazonaws.com/doc/2016-11-15/"

// apiVersion is the Version every request must carry.
const apiVersion = "2016-11-15"

// stateCodes are EC2's codes for instance states (the low byte of
// instanceState.code).
var stateCodes = map[string]int{
	StatePending:      0,
	StateRunning:      16,
	StateShuttingDown: 32,
	StateTerminated:   48,
	StateStopping:     64,
	StateStopped:      80,
}

type xmlTag struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

type xmlState struct {
	Code int    `xml:"code"`
	Name string `xml:"name"`
}

type xmlGroup struct {
	GroupID   string `xml:"groupId"`
	GroupName string `xml:"groupName"`
}

type xmlPlacement struct {
	AvailabilityZone string `xml:"availabilityZone"`
	GroupName        string `xml:"groupName"`
	Tenancy          string `xml:"tenancy"`
}

type xmlPrivateIP struct {
	PrivateIPAddress string `xml:"privateIpAddress"`
	PrivateDNSName   string `xml:"privateDnsName"`
	Primary          bool   `xml:"primary"`
}

type xmlNetworkInterface struct {
	NetworkInterfaceID string         `xml:"networkInterfaceId"`
	SubnetID           string         `xml:"subnetId"`
	VpcID              string         `xml:"vpcId"`
	Status             string         `xml:"status"`
	PrivateIPAddress   string         `xml:"privateIpAddress"`
	PrivateDNSName     string         `xml:"privateDnsName"`
	Groups             []xmlGroup     `xml:"groupSet>item"`
	PrivateIPs         []xmlPrivateIP `xml:"privateIpAddressesSet>item"`
}

type xmlInstance struct {
	InstanceID        string                `xml:"instanceId"`
	ImageID           string                `xml:"imageId"`
	State             xmlState              `xml:"instanceState"`
	PrivateDNSName    string                `xml:"privateDnsName"`
	DNSName           string                `xml:"dnsName"`
	KeyName           string                `xml:"keyName,omitempty"`
	AmiLaunchIndex    int                   `xml:"amiLaunchIndex"`
	InstanceType      string                `xml:"instanceType"`
	LaunchTime        string                `xml:"launchTime"`
	Placement         xmlPlacement          `xml:"placement"`
	SubnetID          string                `xml:"subnetId,omitempty"`
	VpcID             string                `xml:"vpcId,omitempty"`
	PrivateIPAddress  string                `xml:"privateIpAddress,omitempty"`
	IPAddress         string                `xml:"ipAddress,omitempty"`
	Groups            []xmlGroup            `xml:"groupSet>item"`
	Architecture      string                `xml:"architecture"`
	RootDeviceType    string                `xml:"rootDeviceType"`
	RootDeviceName    string                `xml:"rootDeviceName"`
	ClientToken       string                `xml:"clientToken,omitempty"`
	Tags              []xmlTag              `xml:"tagSet>item"`
	Hypervisor        string                `xml:"hypervisor"`
	NetworkInterfaces []xmlNetworkInterface `xml:"networkInterfaceSet>item"`
}

type xmlReservation struct {
	ReservationID string        `xml:"reservationId"`
	OwnerID       string        `xml:"ownerId"`
	Groups        []xmlGroup    `xml:"groupSet>item"`
	Instances     []xmlInstance `xml:"instancesSet>item"`
}

type runInstancesResponse struct {
	XMLName   xml.Name `xml:"http://ec2.amazonaws.com/doc/2016-11-15/ RunInstancesResponse"`
	RequestID string   `xml:"requestId"`
	xmlReservation
}

type describeInstancesResponse struct {
	XMLName      xml.Name         `xml:"http://ec2.amazonaws.com/doc/2016-11-15/ DescribeInstancesResponse"`
	RequestID    string           `xml:"requestId"`
	Reservations []xmlReservation `xml:"reservationSet>item"`
	NextToken    string           `xml:"nextToken,omitempty"`
}

type xmlStateChange struct {
	InstanceID    string   `xml:"instanceId"`
	CurrentState  xmlState `xml:"currentState"`
	PreviousState xmlState `xml:"previousState"`
}

type terminateInstancesResponse struct {
	XMLName   xml.Name         `xml:"http://ec2.amazonaws.com/doc/2016-11-15/ TerminateInstancesResponse"`
	RequestID string           `xml:"requestId"`
	Instances []xmlStateChange `xml:"instancesSet>item"`
}

type xmlSubnet struct {
	SubnetID         string   `xml:"subnetId"`
	State            string   `xml:"state"`
	VpcID            string   `xml:"vpcId"`
	CidrBlock        string   `xml:"cidrBlock"`
	AvailabilityZone string   `xml:"availabilityZone"`
	Tags             []xmlTag `xml:"tagSet>item"`
}

type describeSubnetsResponse struct {
	XMLName   xml.Name    `xml:"http://ec2.amazonaws.com/doc/2016-11-15/ DescribeSubnetsResponse"`
	RequestID string      `xml:"requestId"`
	Subnets   []xmlSubnet `xml:"subnetSet>item"`
	NextToken string      `xml:"nextToken,omitempty"`
}

type xmlSecurityGroup struct {
	OwnerID          string   `xml:"ownerId"`
	GroupID          string   `xml:"groupId"`
	GroupName        string   `xml:"groupName"`
	GroupDescription string   `xml:"groupDescription"`
	VpcID            string   `xml:"vpcId"`
	Tags             []xmlTag `xml:"tagSet>item"`
}

type describeSecurityGroupsResponse struct {
	XMLName   xml.Name           `xml:"http://ec2.amazonaws.com/doc/2016-11-15/ DescribeSecurityGroupsResponse"`
	RequestID string             `xml:"requestId"`
	Groups    []xmlSecurityGroup `xml:"securityGroupInfo>item"`
	NextToken string             `xml:"nextToken,omitempty"`
}

type xmlImage struct {
	ImageID        string `xml:"imageId"`
	ImageState     string `xml:"imageState"`
	Name           string `xml:"name"`
	RootDeviceType string `xml:"rootDeviceType"`
	RootDeviceName string `xml:"rootDeviceName"`
}

type describeImagesResponse struct {
	XMLName   xml.Name   `xml:"http://ec2.amazonaws.com/doc/2016-11-15/ DescribeImagesResponse"`
	RequestID string     `xml:"requestId"`
	Images    []xmlImage `xml:"imagesSet>item"`
}

// errorResponse is EC2's error document. Unlike the results it has no
// namespace, and RequestID is spelt in capitals.
type errorResponse struct {
	XMLName   xml.Name   `xml:"Response"`
	Errors    []xmlError `xml:"Errors>Error"`
	RequestID string     `xml:"RequestID"`
}

type xmlError struct {
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

func xmlTags(tags map[string]string) []xmlTag {
	out := make([]xmlTag, 0, len(tags))
	for _, k := range sortedKeys(tags) {
		out = append(out, xmlTag{Key: k, Value: tags[k]})
	}
	return out
}

func (i *Instance) xml(groups map[string]SecurityGroup) xmlInstance {
	var xg []xmlGroup
	for _, id := range i.SecurityGroupIDs {
		xg = append(xg, xmlGroup{GroupID: id, GroupName: groups[id].Name})
	}
	x := xmlInstance{
		InstanceID:       i.ID,
		ImageID:          i.ImageID,
		State:            xmlState{Code: stateCodes[i.State], Name: i.State},
		PrivateDNSName:   i.PrivateDNS,
		DNSName:          i.PublicDNS,
		KeyName:          i.KeyName,
		InstanceType:     i.InstanceType,
		LaunchTime:       i.LaunchTime.UTC().Format("2006-01-02T15:04:05.000Z"),
		Placement:        xmlPlacement{AvailabilityZone: i.Zone, Tenancy: "default"},
		SubnetID:         i.SubnetID,
		VpcID:            i.VPCID,
		PrivateIPAddress: i.PrivateIP,
		IPAddress:        i.PublicIP,
		Groups:           xg,
		Architecture:     "x86_64",
		RootDeviceType:   "ebs",
		RootDeviceName:   "/dev/xvda",
		ClientToken:      i.ClientToken,
		Tags:             xmlTags(i.Tags),
		Hypervisor:       "xen",
	}
	if i.State != StateTerminated && i.PrivateIP != "" {
		x.NetworkInterfaces = []xmlNetworkInterface{{
			NetworkInterfaceID: "eni-" + strings.TrimPrefix(i.ID, "i-"),
			SubnetID:           i.SubnetID,
			VpcID:              i.VPCID,
			Status:             "in-use",
			PrivateIPAddress:   i.PrivateIP,
			PrivateDNSName:     i.PrivateDNS,
			Groups:             xg,
			PrivateIPs:         []xmlPrivateIP{{PrivateIPAddress: i.PrivateIP, PrivateDNSName: i.PrivateDNS, Primary: true}},
		}}
		for _, ip := range i.SecondaryPrivateIPs {
			x.NetworkInterfaces[0].PrivateIPs = append(x.NetworkInterfaces[0].PrivateIPs, xmlPrivateIP{PrivateIPAddress: ip})
		}
	}
	return x
}

// fakeEpoch is when the fake's first instance launches; each later one
// launches a second after the one before, so that launch order is
// deterministic.
var fakeEpoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

type rebootInstancesResponse struct {
	XMLName   xml.Name `xml:"http://ec2.amazonaws.com/doc/2016-11-15/ RebootInstancesResponse"`
	RequestID string   `xml:"requestId"`
	Return    bool     `xml:"return"`
}
