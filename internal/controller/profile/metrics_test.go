package profile

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/engine"
	"github.com/pitstop-dev/pitstop/internal/fleet"
	"github.com/pitstop-dev/pitstop/internal/plugin/check"
)

func TestWaitingFor(t *testing.T) {
	c, err := fleet.Compile(&pitstopv1alpha1.MaintenanceProfile{
		ObjectMeta: metav1.ObjectMeta{Name: "os"},
		Spec: pitstopv1alpha1.MaintenanceProfileSpec{
			Checks: []pitstopv1alpha1.CheckInstance{
				{Name: "needed", HasAnnotation: &pitstopv1alpha1.KeyValueCheck{Key: "reboot-needed"}},
				{Name: "budget", MaxMaintenance: &pitstopv1alpha1.MaxMaintenanceCheck{Max: 1}},
			},
			States: pitstopv1alpha1.StatesSpec{
				Operational:         pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "needed", Next: pitstopv1alpha1.StateMaintenanceRequired}}},
				MaintenanceRequired: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "budget", Next: pitstopv1alpha1.StateInMaintenance}}},
				InMaintenance:       pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "!needed", Next: pitstopv1alpha1.StateOperational}}},
			},
		},
	}, check.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	record := func(state pitstopv1alpha1.MaintenanceState, since time.Duration, checks map[string]bool) engine.ProfileRecord {
		return engine.ProfileRecord{Current: state, Since: engine.Stamp{Time: now.Add(-since)}, Checks: checks}
	}
	for _, tc := range []struct {
		name     string
		c        *fleet.Compiled
		pr       engine.ProfileRecord
		waits    bool
		duration time.Duration
	}{
		{"an operational node whose check fails is not waiting", c, record(pitstopv1alpha1.StateOperational, time.Hour, map[string]bool{"needed": false}), false, 0},
		{"a node waiting for a budget slot waits since it entered its state", c, record(pitstopv1alpha1.StateMaintenanceRequired, time.Hour, map[string]bool{"budget": false}), true, time.Hour},
		{"a node whose check passed is moving on, not waiting", c, record(pitstopv1alpha1.StateMaintenanceRequired, time.Hour, map[string]bool{"budget": true}), false, 0},
		{"a node in maintenance whose way out fails waits", c, record(pitstopv1alpha1.StateInMaintenance, 10*time.Minute, map[string]bool{"needed": true}), true, 10 * time.Minute},
		{"a node without recorded checks waits", c, record(pitstopv1alpha1.StateMaintenanceRequired, time.Minute, nil), true, time.Minute},
		{"a state entered after now (another clock) waits for 0", c, record(pitstopv1alpha1.StateInMaintenance, -time.Minute, map[string]bool{"needed": true}), true, 0},
		{"a profile never compiled says nothing", nil, record(pitstopv1alpha1.StateMaintenanceRequired, time.Hour, nil), false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, waits := waitingFor(tc.c, tc.pr, now)
			if waits != tc.waits || d != tc.duration {
				t.Errorf("waitingFor = %s, %v; want %s, %v", d, waits, tc.duration, tc.waits)
			}
		})
	}
}
