package medik8s_test

import (
	"testing"
	"time"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// TestAMedik8sMaintenanceExcludesTheNodeFromRemediation: as the medik8s
// operator does, the node of a medik8s NodeMaintenance carries
// remediation.medik8s.io/exclude-from-remediation=true while it is in
// maintenance, so that Node Health Check and the remediators it drives
// leave it alone, and loses it once the maintenance is deleted.
func TestAMedik8sMaintenanceExcludesTheNodeFromRemediation(t *testing.T) {
	startManager(t)
	testutil.Kubelet(t, env.Clientset)
	create(t, testutil.Node("excluded-1"))
	obj := medik8sNM("excluded", "excluded-1", "")
	create(t, obj)
	awaitPhase(t, "excluded", "Succeeded", 20*time.Second)
	if got := node(t, "excluded-1").Labels[pitstopv1alpha1.LabelExcludeFromRemediation]; got != "true" {
		t.Errorf("%s = %q during the maintenance, want \"true\"", pitstopv1alpha1.LabelExcludeFromRemediation, got)
	}

	if err := env.Client.Delete(t.Context(), obj); err != nil {
		t.Fatal(err)
	}
	awaitGone(t, obj, 20*time.Second)
	if got, ok := node(t, "excluded-1").Labels[pitstopv1alpha1.LabelExcludeFromRemediation]; ok {
		t.Errorf("%s = %q after the maintenance, want it removed", pitstopv1alpha1.LabelExcludeFromRemediation, got)
	}
}
