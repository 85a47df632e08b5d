package trigger_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/plugin/trigger"
)

// TestRestored: a node may leave maintenance before its NodeMaintenance is
// gone only once that object is being deleted and the node, read with its
// record in maintenance, no longer carries the cordon's record or taint.
func TestRestored(t *testing.T) {
	deleting := &pitstopv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{
		Name: "profile-n", DeletionTimestamp: &metav1.Time{Time: time.Now()}, Finalizers: []string{pitstopv1alpha1.FinalizerNodeMaintenance},
	}}
	active := &pitstopv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "profile-n"}}
	restored := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	cordoned := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n", Annotations: map[string]string{pitstopv1alpha1.AnnotationCordonedBefore: "false"}},
		Spec: corev1.NodeSpec{Unschedulable: true, Taints: []corev1.Taint{
			{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule},
			{Key: pitstopv1alpha1.TaintDrain, Effect: corev1.TaintEffectNoSchedule},
		}},
	}
	// Cordoned by someone else before the maintenance: the restore leaves
	// the cordon and takes pitstop's record and taint away.
	cordonedBefore := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n"},
		Spec:       corev1.NodeSpec{Unschedulable: true, Taints: []corev1.Taint{{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}}},
	}
	onlyTaint := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n"},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: pitstopv1alpha1.TaintDrain, Effect: corev1.TaintEffectNoSchedule}}},
	}
	in, required := pitstopv1alpha1.StateInMaintenance, pitstopv1alpha1.StateMaintenanceRequired
	for _, tc := range []struct {
		name string
		nm   *pitstopv1alpha1.NodeMaintenance
		node *corev1.Node
		from pitstopv1alpha1.MaintenanceState
		want bool
	}{
		{"the object is gone", nil, cordoned, in, true},
		{"the object is not being deleted", active, restored, in, false},
		{"deleted, the node restored", deleting, restored, in, true},
		{"deleted, the node cordoned before the maintenance and restored", deleting, cordonedBefore, in, true},
		{"deleted, the node not restored yet", deleting, cordoned, in, false},
		{"deleted, the drain taint still on the node", deleting, onlyTaint, in, false},
		{"a drain given up: the node may be read from before its cordon", deleting, restored, required, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := trigger.Restored(tc.nm, tc.node, tc.from); got != tc.want {
				t.Errorf("Restored = %v, want %v", got, tc.want)
			}
		})
	}
}
