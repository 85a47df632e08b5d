package trigger_test

import (
	"strings"
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

func TestNewRefusesKeysTheNodeOrPitstopCannotTake(t *testing.T) {
	value := func(v string) *string { return &v }
	for _, tc := range []struct {
		name string
		inst pitstopv1alpha1.TriggerInstance
		want string // "" when accepted
	}{
		{"accepts a label with a domain", pitstopv1alpha1.TriggerInstance{AlterLabel: &pitstopv1alpha1.AlterTrigger{Key: "example.com/rebooted", Value: value("yes")}}, ""},
		{"accepts removing a label whatever its value", pitstopv1alpha1.TriggerInstance{AlterLabel: &pitstopv1alpha1.AlterTrigger{Key: "rebooted", Remove: true}}, ""},
		{"accepts an annotation value no label could hold", pitstopv1alpha1.TriggerInstance{AlterAnnotation: &pitstopv1alpha1.AlterTrigger{Key: "note", Value: value("rebooted at 02:00, see ticket #42")}}, ""},
		{"refuses a label value the node cannot hold", pitstopv1alpha1.TriggerInstance{AlterLabel: &pitstopv1alpha1.AlterTrigger{Key: "rebooted", Value: value("at 02:00")}}, `alterLabel.value "at 02:00"`},
		{"refuses a key that is not a qualified name", pitstopv1alpha1.TriggerInstance{AlterAnnotation: &pitstopv1alpha1.AlterTrigger{Key: "two words", Value: value("x")}}, `alterAnnotation.key "two words"`},
		{"refuses the cordon record", pitstopv1alpha1.TriggerInstance{AlterAnnotation: &pitstopv1alpha1.AlterTrigger{Key: "pitstop.dev/cordoned-before", Remove: true}}, "pitstop's own records"},
		{"refuses the state label", pitstopv1alpha1.TriggerInstance{AlterLabel: &pitstopv1alpha1.AlterTrigger{Key: "pitstop.dev/state", Value: value("operational")}}, "pitstop's own records"},
		{"refuses a subdomain of pitstop's", pitstopv1alpha1.TriggerInstance{AlterLabel: &pitstopv1alpha1.AlterTrigger{Key: "x.pitstop.dev/y", Value: value("z")}}, "pitstop's own records"},
		{"refuses pitstop's NodeMaintenance finalizer on the node", pitstopv1alpha1.TriggerInstance{AlterFinalizer: &pitstopv1alpha1.AlterFinalizerTrigger{Key: "pitstop.dev/node-maintenance"}}, "alterFinalizer.key"},
		{"refuses a finalizer that is not a qualified name", pitstopv1alpha1.TriggerInstance{AlterFinalizer: &pitstopv1alpha1.AlterFinalizerTrigger{Key: "a/b/c"}}, `alterFinalizer.key "a/b/c"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.inst.Name = "t"
			_, err := trigger.New(tc.inst)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: got %v, want an error with %q", err, tc.want)
			}
		})
	}
}
