package trigger_test

import (
	"strings"
	"testing"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/plugin/trigger"
)

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
