package profile_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

var env *testutil.Env

func TestMain(m *testing.M) { testutil.Main(m, &env) }

// rollingProfile: nodes labelled pool=<pool> with annotation reboot-needed
// need maintenance; at most budget at a time enter it; a node leaves
// maintenance once the annotation is gone (the "reboot" is done).
func rollingProfile(name, pool string, budget int32) *pitstopv1alpha1.MaintenanceProfile {
	return &pitstopv1alpha1.MaintenanceProfile{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: pitstopv1alpha1.MaintenanceProfileSpec{
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": pool}},
			Checks: []pitstopv1alpha1.CheckInstance{
				{Name: "reboot_needed", HasAnnotation: &pitstopv1alpha1.KeyValueCheck{Key: "reboot-needed"}},
				{Name: "budget", MaxMaintenance: &pitstopv1alpha1.MaxMaintenanceCheck{Max: budget, ProfileScoped: true}},
			},
			Triggers: []pitstopv1alpha1.TriggerInstance{
				{Name: "mark", AlterLabel: &pitstopv1alpha1.AlterTrigger{Key: "maintained-by", Value: ptr.To(name)}},
			},
			States: pitstopv1alpha1.StatesSpec{
				Operational:         pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "reboot_needed", Next: pitstopv1alpha1.StateMaintenanceRequired}}},
				MaintenanceRequired: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "budget", Triggers: []string{"mark"}, Next: pitstopv1alpha1.StateInMaintenance}}},
				InMaintenance:       pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "!reboot_needed", Next: pitstopv1alpha1.StateOperational}}},
			},
		},
	}
}

// finishReboot removes the reboot-needed annotation a little later.
func finishReboot(ctx context.Context, node string) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(30 * time.Millisecond):
	}
	patch := []byte(`{"metadata":{"annotations":{"reboot-needed":null}}}`)
	_, _ = env.Clientset.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{})
}

func awaitProfileCondition(t *testing.T, name, condType string, status metav1.ConditionStatus) *pitstopv1alpha1.MaintenanceProfile {
	t.Helper()
	got := &pitstopv1alpha1.MaintenanceProfile{}
	testutil.Eventually(t, 15*time.Second, 50*time.Millisecond, func() error {
		if err := env.Client.Get(t.Context(), client.ObjectKey{Name: name}, got); err != nil {
			return err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, condType)
		if c == nil || c.Status != status || c.ObservedGeneration != got.Generation {
			return fmt.Errorf("condition %s = %+v (generation %d), want %s", condType, c, got.Generation, status)
		}
		return nil
	})
	return got
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// counterValue reads a counter or gauge (or a histogram's sample count)
// from the manager's metrics registry.
func counterValue(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if want, ok := labels[l.GetName()]; ok && want != l.GetValue() {
					continue next
				}
			}
			switch {
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}
