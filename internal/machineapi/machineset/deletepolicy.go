package machineset

import (
	"cmp"
	"hash/fnv"
	"slices"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"

	"github.com/pitstop-dev/pitstop/internal/machineapi"
)

// Values of spec.deletePolicy. An empty policy is Random, the CRD's
// documented default.
const (
	DeletePolicyRandom = "Random"
	DeletePolicyOldest = "Oldest"
	DeletePolicyNewest = "Newest"
)

// deletionTier says why a Machine should leave first when its MachineSet
// scales down; a lower tier leaves first. The tiers are the priorities of
// OpenShift's machine-api-operator, made strict: a Machine already being
// deleted outranks one a user marked, which outranks a broken one, which
// outranks one that never got a Node.
type deletionTier int

const (
	// tierDeleting Machines are already going away: removing them costs
	// nothing, and they are not deleted again.
	tierDeleting deletionTier = iota
	// tierMarked Machines carry the delete-machine annotation (or its legacy
	// key): a user or an autoscaler chose them.
	tierMarked
	// tierFailed Machines have an errorReason or are in phase Failed.
	tierFailed
	// tierNodeless Machines have no nodeRef: they run no workload yet.
	tierNodeless
	// tierServing is everything else.
	tierServing
)

// tierOf places a Machine in its deletion tier.
func tierOf(m *machinev1beta1.Machine) deletionTier {
	_, marked := m.Annotations[machineapi.AnnotationDeleteMachine]
	_, markedLegacy := m.Annotations[machineapi.AnnotationDeleteMachineLegacy]
	switch {
	case !m.DeletionTimestamp.IsZero():
		return tierDeleting
	case marked || markedLegacy:
		return tierMarked
	case isFailed(m):
		return tierFailed
	case m.Status.NodeRef == nil:
		return tierNodeless
	}
	return tierServing
}

// isFailed says whether the Machine controller gave up on a Machine.
func isFailed(m *machinev1beta1.Machine) bool {
	return m.Status.ErrorReason != nil && *m.Status.ErrorReason != "" ||
		m.Status.Phase != nil && *m.Status.Phase == machinev1beta1.PhaseFailed
}

// machinesToDelete returns the n Machines a MachineSet with n Machines too
// many removes, in the order it removes them. Within a tier, Oldest takes
// the earliest creationTimestamp first, Newest the latest, and Random an
// order given by a hash of the UID: unrelated to age or name, yet the same
// on every reconcile, so a retry picks the same Machines. The result may
// hold Machines already being deleted; the caller counts them without
// deleting them again.
func machinesToDelete(machines []*machinev1beta1.Machine, n int, policy string) []*machinev1beta1.Machine {
	if n <= 0 {
		return nil
	}
	ordered := slices.Clone(machines)
	slices.SortStableFunc(ordered, func(a, b *machinev1beta1.Machine) int {
		if c := cmp.Compare(tierOf(a), tierOf(b)); c != 0 {
			return c
		}
		if c := compareWithinTier(a, b, policy); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return ordered[:min(n, len(ordered))]
}

// compareWithinTier orders two Machines of the same tier by policy.
func compareWithinTier(a, b *machinev1beta1.Machine, policy string) int {
	switch policy {
	case DeletePolicyOldest:
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	case DeletePolicyNewest:
		return b.CreationTimestamp.Compare(a.CreationTimestamp.Time)
	}
	return cmp.Compare(uidHash(a), uidHash(b))
}

func uidHash(m *machinev1beta1.Machine) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(m.UID))
	return h.Sum64()
}
