package maintenance_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/maintenance"
)

// TestNamesFitAnObjectName: every requester's NodeMaintenance name is its
// prefix and the name while that fits, and otherwise a valid name that
// keeps two long names apart. Node names may be as long as any object's,
// so a profile's or a Machine's drain of a node with a long name gets a
// name the API server accepts.
func TestNamesFitAnObjectName(t *testing.T) {
	long := strings.Repeat("a", 240) + ".b-" + strings.Repeat("c", 20)
	for name, tc := range map[string]struct {
		got  string
		want string // empty: only check it is a valid, bounded name
	}{
		"a profile's, for a node whose name fits":  {got: maintenance.ForProfile("worker-1"), want: "profile-worker-1"},
		"a Machine's, for a node whose name fits":  {got: maintenance.ForMachine("worker-1"), want: "machine-worker-1"},
		"a medik8s object's, for a name that fits": {got: maintenance.Name(maintenance.PrefixMedik8s, "worker-1"), want: "medik8s-worker-1"},
		"a profile's, for a long node name":        {got: maintenance.ForProfile(long)},
		"a Machine's, for a long node name":        {got: maintenance.ForMachine(long)},
		"a cut that ends with a letter or digit":   {got: maintenance.Name(maintenance.PrefixMedik8s, strings.Repeat("a", 244)+".-"+strings.Repeat("c", 20))},
	} {
		t.Run(name, func(t *testing.T) {
			if tc.want != "" && tc.got != tc.want {
				t.Errorf("name = %q, want %q", tc.got, tc.want)
			}
			if errs := validation.IsDNS1123Subdomain(tc.got); len(errs) > 0 {
				t.Errorf("name = %q: %v", tc.got, errs)
			}
		})
	}
	if maintenance.ForProfile(long) == maintenance.ForProfile(long+"x") {
		t.Error("two long names that differ after the cut got the same name")
	}
}

// TestProgress: a NodeMaintenance is done once Ready, a failed one is an
// error naming it, and one under way says what it waits for.
func TestProgress(t *testing.T) {
	nm := func(cs ...metav1.Condition) *pitstopv1alpha1.NodeMaintenance {
		return &pitstopv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "profile-n"}, Status: pitstopv1alpha1.NodeMaintenanceStatus{Conditions: cs}}
	}
	ready := func(status metav1.ConditionStatus, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: pitstopv1alpha1.ConditionReady, Status: status, Reason: reason, Message: msg}
	}
	for _, tc := range []struct {
		name    string
		nm      *pitstopv1alpha1.NodeMaintenance
		done    bool
		status  string
		errText string
	}{
		{"no status yet", nm(), false, "waiting for the drain (NodeMaintenance profile-n)", ""},
		{"under way", nm(ready(metav1.ConditionFalse, pitstopv1alpha1.ReasonInProgress, "2 pods left")), false, "waiting for the drain (NodeMaintenance profile-n): 2 pods left", ""},
		{"ready", nm(ready(metav1.ConditionTrue, pitstopv1alpha1.ReasonReady, "drained")), true, "", ""},
		{"failed", nm(ready(metav1.ConditionFalse, pitstopv1alpha1.ReasonFailed, "drain timed out")), false, "", "NodeMaintenance profile-n failed: drain timed out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done, status, err := maintenance.Progress(tc.nm)
			if done != tc.done || status != tc.status {
				t.Errorf("Progress = %v, %q; want %v, %q", done, status, tc.done, tc.status)
			}
			if (err == nil) != (tc.errText == "") || (err != nil && err.Error() != tc.errText) {
				t.Errorf("Progress error = %v, want %q", err, tc.errText)
			}
		})
	}
}

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
			if got := maintenance.Restored(tc.nm, tc.node, tc.from); got != tc.want {
				t.Errorf("Restored = %v, want %v", got, tc.want)
			}
		})
	}
}
