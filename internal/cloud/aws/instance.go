package aws

import (
	"slices"
	"strings"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pitstop-dev/pitstop/internal/machineapi/provider"
)

// PollTransitioning is how soon to look again at an instance that is
// starting or stopping (pending, stopping, shutting-down).
const PollTransitioning = 20 * time.Second

// statusType is the apiVersion and kind of the providerStatus pitstop
// writes, as OpenShift's AWS machines carry it.
var statusType = metav1.TypeMeta{APIVersion: machinev1beta1.GroupVersion.String(), Kind: "AWSMachineProviderStatus"}

// providerID is what the kubelet's AWS integration sets as a Node's
// spec.providerID: aws:///<availability zone>/<instance ID>.
func providerID(zone, id string) string { return "aws:///" + zone + "/" + id }

// instanceIDFrom returns the instance ID of a providerID such as
// aws:///us-east-1a/i-0123 (or aws:///i-0123), or "".
func instanceIDFrom(providerID string) string {
	rest, ok := strings.CutPrefix(providerID, "aws://")
	if !ok {
		return ""
	}
	id := rest[strings.LastIndex(rest, "/")+1:]
	if !strings.HasPrefix(id, "i-") {
		return ""
	}
	return id
}

// knownInstanceID is the machine's instance ID as pitstop (or OpenShift)
// last recorded it: status.providerStatus.instanceId, else the one in
// spec.providerID. "" means the instance is to be found by its tags.
func knownInstanceID(m *machinev1beta1.Machine, st *machinev1beta1.AWSMachineProviderStatus) string {
	if id := awssdk.ToString(st.InstanceID); id != "" {
		return id
	}
	return instanceIDFrom(awssdk.ToString(m.Spec.ProviderID))
}

// isTransitioning says whether the instance is on its way to running,
// stopped or gone, so that it is worth looking again soon.
func isTransitioning(state types.InstanceStateName) bool {
	switch state {
	case types.InstanceStateNamePending, types.InstanceStateNameStopping, types.InstanceStateNameShuttingDown:
		return true
	}
	return false
}

// toInstance says what pitstop needs to know about an EC2 instance. st is
// the machine's previous providerStatus; its conditions are kept.
func toInstance(i types.Instance, region string, st *machinev1beta1.AWSMachineProviderStatus) *provider.Instance {
	var state types.InstanceStateName
	if i.State != nil {
		state = i.State.Name
	}
	zone := ""
	if i.Placement != nil {
		zone = awssdk.ToString(i.Placement.AvailabilityZone)
	}
	id := awssdk.ToString(i.InstanceId)
	out := &provider.Instance{
		ID:           id,
		ProviderID:   providerID(zone, id),
		State:        string(state),
		Running:      state == types.InstanceStateNameRunning,
		Addresses:    addresses(i),
		Region:       region,
		Zone:         zone,
		InstanceType: string(i.InstanceType),
		Status: &machinev1beta1.AWSMachineProviderStatus{
			TypeMeta:      statusType,
			InstanceID:    awssdk.String(id),
			InstanceState: awssdk.String(string(state)),
			Conditions:    slices.Clone(st.Conditions),
		},
	}
	if isTransitioning(state) {
		out.PollAfter = PollTransitioning
	}
	return out
}

// setCreated records on the status that the instance was launched, with
// the condition OpenShift's AWS machines carry.
func setCreated(inst *provider.Instance, now time.Time) {
	st := inst.Status.(*machinev1beta1.AWSMachineProviderStatus)
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type:               string(machinev1beta1.MachineCreation),
		Status:             metav1.ConditionTrue,
		Reason:             machinev1beta1.MachineCreationSucceededConditionReason,
		Message:            "Machine successfully created",
		LastTransitionTime: metav1.NewTime(now),
	})
}

// launchAge is how long ago Create launched the instance, as its
// MachineCreation condition in the providerStatus says; false when the
// status does not say.
func launchAge(st *machinev1beta1.AWSMachineProviderStatus, now time.Time) (time.Duration, bool) {
	c := meta.FindStatusCondition(st.Conditions, string(machinev1beta1.MachineCreation))
	if c == nil || c.Status != metav1.ConditionTrue || c.LastTransitionTime.IsZero() {
		return 0, false
	}
	return now.Sub(c.LastTransitionTime.Time), true
}

// addresses are the instance's addresses: every private IP of its network
// interfaces (the primary one first) as InternalIP, its public IP as
// ExternalIP, its private and public DNS names as InternalDNS and
// ExternalDNS.
func addresses(i types.Instance) []corev1.NodeAddress {
	var out []corev1.NodeAddress
	seen := map[corev1.NodeAddress]bool{}
	add := func(t corev1.NodeAddressType, a *string) {
		addr := corev1.NodeAddress{Type: t, Address: awssdk.ToString(a)}
		if addr.Address != "" && !seen[addr] {
			seen[addr] = true
			out = append(out, addr)
		}
	}
	add(corev1.NodeInternalIP, i.PrivateIpAddress)
	for _, ni := range i.NetworkInterfaces {
		for _, ip := range ni.PrivateIpAddresses {
			add(corev1.NodeInternalIP, ip.PrivateIpAddress)
		}
	}
	add(corev1.NodeExternalIP, i.PublicIpAddress)
	add(corev1.NodeInternalDNS, i.PrivateDnsName)
	add(corev1.NodeExternalDNS, i.PublicDnsName)
	return out
}

// newest orders instances newest launch first, so that when a machine
// has several the one it got last is the one it keeps.
func newest(a, b types.Instance) int {
	if c := awssdk.ToTime(b.LaunchTime).Compare(awssdk.ToTime(a.LaunchTime)); c != 0 {
		return c
	}
	return strings.Compare(awssdk.ToString(a.InstanceId), awssdk.ToString(b.InstanceId))
}
