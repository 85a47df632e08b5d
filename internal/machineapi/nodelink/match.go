package nodelink

import (
	"slices"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// evidence is what ties a Node to a Machine.
type evidence string

const (
	// byProviderID: the Node's spec.providerID is the Machine's.
	byProviderID evidence = "providerID"
	// byInternalIP: the Node and the Machine share an InternalIP address.
	byInternalIP evidence = "internal IP"
)

// pick chooses, among the objects on the other side that the indexes
// returned for one Node or Machine, those its strongest evidence points to:
// the ones with its providerID when there are any (OpenShift's order), else
// the ones sharing one of its internal IPs. An IP match whose providerID
// contradicts self's is left out: both providerIDs are known and name
// different instances, so the address was reused by another instance
// (pitstop's providers report the providerID the Node will carry). Each
// object is returned once, however many addresses it shares.
func pick[T client.Object](selfProviderID string, sameProviderID, sameIP []T, providerIDOf func(T) string) ([]T, evidence) {
	if found := unique(sameProviderID); selfProviderID != "" && len(found) > 0 {
		return found, byProviderID
	}
	var found []T
	for _, o := range unique(sameIP) {
		if id := providerIDOf(o); id != "" && selfProviderID != "" && id != selfProviderID {
			continue
		}
		found = append(found, o)
	}
	return found, byInternalIP
}

// unique drops repeated objects, keeping the first of each.
func unique[T client.Object](objs []T) []T {
	seen := make(map[client.ObjectKey]bool, len(objs))
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		if key := client.ObjectKeyFromObject(o); !seen[key] {
			seen[key] = true
			out = append(out, o)
		}
	}
	return out
}

// machineProviderID is the Machine's spec.providerID, "" when unset.
func machineProviderID(m *machinev1beta1.Machine) string { return ptr.Deref(m.Spec.ProviderID, "") }

// nodeProviderID is the Node's spec.providerID.
func nodeProviderID(n *corev1.Node) string { return n.Spec.ProviderID }

// internalIPs returns the InternalIP addresses among addrs, each once.
func internalIPs(addrs []corev1.NodeAddress) []string {
	var ips []string
	for _, a := range addrs {
		if a.Type == corev1.NodeInternalIP && a.Address != "" && !slices.Contains(ips, a.Address) {
			ips = append(ips, a.Address)
		}
	}
	return ips
}
