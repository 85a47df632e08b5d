package machinemaintenance_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/plugin/trigger"
)

// TestControlPlaneMachinesOneAtATimeWithSurgeOnly: two control-plane
// machines of a set retire at once; their replacements never overlap (the
// second waits until the first is done), each surges, and the set ends at
// 3. A control-plane machine outside any set is never deleted: its
// replacement waits, saying why.
func TestControlPlaneMachinesOneAtATimeWithSurgeOnly(t *testing.T) {
	c := newCluster(t, "controlplane")
	ms := c.newSet("masters", 3)
	patchSetRole(t, ms)
	machines := c.machinesOf(ms)
	a, b := machines[0], machines[1]
	for _, m := range []machinev1beta1.Machine{a, b} {
		patchMachine(t, &m, func(m *machinev1beta1.Machine) { m.Labels["machine.openshift.io/cluster-api-machine-role"] = "master" })
	}
	nameA, nameB := c.retire(&a, "instance-event-ca"), c.retire(&b, "instance-event-cb")
	for _, m := range []machinev1beta1.Machine{a, b} {
		node := &corev1.Node{}
		if err := env.Client.Get(t.Context(), client.ObjectKey{Name: c.ns + "-" + m.Name}, node); err != nil {
			t.Fatal(err)
		}
		tr, _ := trigger.New(pitstopv1alpha1.TriggerInstance{Name: "replace", ReplaceMachine: &pitstopv1alpha1.ReplaceMachineTrigger{ControlPlane: pitstopv1alpha1.ControlPlaneReplace}})
		eventually(t, func() error {
			_, _, err := tr.Run(t.Context(), trigger.Context{Node: node, Profile: "cloud", Since: time.Now().Add(-time.Minute), Now: time.Now(), Namespace: c.ns, Client: env.Client})
			return err
		})
	}
	// Watch the two actions: never both past Requested and not done.
	overlap := ""
	done := false
	for deadline := time.Now().Add(2 * timeout); !done && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		busy, finished := 0, 0
		for _, n := range []string{nameA, nameB} {
			mm, err := mmOf(t, c.ns, n)
			if err != nil || mm.Status.Action == nil {
				continue
			}
			if !mm.Status.Action.ControlPlane {
				t.Fatalf("%s: the action does not know its machine runs the control plane", n)
			}
			switch mm.Status.Action.Step {
			case pitstopv1alpha1.StepRequested:
			case pitstopv1alpha1.StepDone:
				finished++
			default:
				busy++
			}
		}
		if busy > 1 {
			overlap = "both replacements ran at once"
		}
		done = finished == 2
	}
	if overlap != "" {
		t.Error(overlap)
	}
	if !done {
		for _, n := range []string{nameA, nameB} {
			mm, _ := mmOf(t, c.ns, n)
			t.Logf("%s: %s %+v", n, mm.Status.Phase, mm.Status.Action)
		}
		t.Fatal("the two control-plane replacements did not both complete")
	}
	for _, n := range []string{nameA, nameB} {
		if mm := phaseIs(t, c.ns, n, pitstopv1alpha1.EventCompleted); !mm.Status.Action.Surge {
			t.Errorf("%s was replaced without surge", n)
		}
	}
	got := &machinev1beta1.MachineSet{}
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(ms), got); err != nil {
		t.Fatal(err)
	}
	if *got.Spec.Replicas != 3 {
		t.Errorf("the set ends at %d, want 3", *got.Spec.Replicas)
	}

	// Outside a set: asked for, never deleted.
	lone, id := c.machine("master-lone", nil)
	patchMachine(t, lone, func(m *machinev1beta1.Machine) { m.Labels["machine.openshift.io/cluster-api-machine-role"] = "master" })
	name := c.retireID(id, "instance-event-cl")
	node := &corev1.Node{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: c.ns + "-master-lone"}, node); err != nil {
		t.Fatal(err)
	}
	tr, _ := trigger.New(pitstopv1alpha1.TriggerInstance{Name: "replace", ReplaceMachine: &pitstopv1alpha1.ReplaceMachineTrigger{}})
	eventually(t, func() error {
		_, _, err := tr.Run(t.Context(), trigger.Context{Node: node, Profile: "cloud", Since: time.Now().Add(-time.Minute), Now: time.Now(), Namespace: c.ns, Client: env.Client})
		return err
	})
	eventually(t, func() error {
		mm, err := mmOf(t, c.ns, name)
		if err != nil {
			return err
		}
		if a := mm.Status.Action; a == nil || a.Step != pitstopv1alpha1.StepRequested || !strings.Contains(a.Message, "only replaced with surge") {
			return fmt.Errorf("action %+v", mm.Status.Action)
		}
		return nil
	})
	time.Sleep(time.Second)
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(lone), lone); err != nil || !lone.DeletionTimestamp.IsZero() {
		t.Errorf("the lone control-plane machine was deleted: %v", err)
	}
}

func patchMachine(t *testing.T, m *machinev1beta1.Machine, edit func(*machinev1beta1.Machine)) {
	t.Helper()
	eventually(t, func() error {
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(m), m); err != nil {
			return err
		}
		base := m.DeepCopy()
		if m.Labels == nil {
			m.Labels = map[string]string{}
		}
		edit(m)
		return env.Client.Patch(t.Context(), m, client.MergeFrom(base))
	})
}

// patchSetRole labels the set's future machines as control-plane ones.
func patchSetRole(t *testing.T, ms *machinev1beta1.MachineSet) {
	t.Helper()
	eventually(t, func() error {
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(ms), ms); err != nil {
			return err
		}
		base := ms.DeepCopy()
		ms.Spec.Template.Labels["machine.openshift.io/cluster-api-machine-role"] = "master"
		return env.Client.Patch(t.Context(), ms, client.MergeFrom(base))
	})
}
