//go:build e2e && linux

package e2e

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/cloud/aws"
	"github.com/pitstop-dev/pitstop/internal/demo"
	"github.com/pitstop-dev/pitstop/internal/localcluster"
	"github.com/pitstop-dev/pitstop/internal/maintenance"
	"github.com/pitstop-dev/pitstop/internal/manager"
	"github.com/pitstop-dev/pitstop/internal/sim/ec2sim"
	"github.com/pitstop-dev/pitstop/internal/testutil"
	"github.com/pitstop-dev/pitstop/internal/testutil/clustertest"
)

// TestCloudEventsReplaceAndRebootWithinTheWindow plays the cloud events
// scenario on the local cluster, with pitstop's aws provider against the
// local EC2 endpoint and pitstop running as its ServiceAccount: a
// MachineSet of 5; retirements for 3 machines and a reboot for a 4th
// while the window is shut (Planned, nothing moves); the window opens (the
// retiring machines are replaced one at a time with surge, never fewer
// than 5 Ready schedulable nodes; the 4th rebooted in place). pitstop is
// stopped in the middle of the first surge and started again: it resumes,
// and the set ends at 5. Then an event whose latest safe start comes
// before any window is acted on at that latest safe start.
func TestCloudEventsReplaceAndRebootWithinTheWindow(t *testing.T) {
	ctx := t.Context()
	opts := localcluster.DefaultOptions()
	opts.ControlPlaneNodes, opts.Workers = 0, 1
	cluster, c := startMachineCluster(t, opts)
	ec2 := demo.LocalEC2(c)
	defer ec2.Close()
	start := func() *clustertest.Manager {
		return clustertest.StartManager(t, cluster.Config, c, clustertest.Options{AsServiceAccount: true, Tune: func(o *manager.Options) {
			o.MachineAPI, o.MachineProviders = true, []string{"aws"}
			o.AWSEndpoint, o.AWSRegion = ec2.URL, demo.CloudRegion
			o.CloudEvents, o.CloudEventsInterval = []string{"aws"}, 10*time.Second
		}})
	}
	first := start()

	out := &testWriter{t: t}
	done := make(chan error, 1)
	go func() { done <- demo.CloudEvents(ctx, c, out, ec2, 5) }()

	// Stop pitstop as soon as a surge is under way, and start it again.
	var surging string
	testutil.Eventually(t, 3*time.Minute, 50*time.Millisecond, func() error {
		var list pitstopv1alpha1.MachineMaintenanceList
		if err := c.List(ctx, &list, client.InNamespace(demo.CloudNamespace)); err != nil {
			return err
		}
		for _, mm := range list.Items {
			if a := mm.Status.Action; a != nil && a.Type == pitstopv1alpha1.ActionReplace && (a.Step == pitstopv1alpha1.StepScalingUp || a.Step == pitstopv1alpha1.StepWaitingForReplacement) {
				surging = mm.Name + " at " + string(a.Step)
				return nil
			}
		}
		return errors.New("no surge under way yet")
	})
	first.Stop()
	t.Logf("pitstop stopped with %s; starting it again", surging)
	start()

	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the scenario: %v", err)
		}
	case <-time.After(4 * time.Minute):
		t.Fatal("the scenario did not end in 4 minutes")
	}
	ms := &machinev1beta1.MachineSet{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: demo.CloudNamespace, Name: demo.CloudSet}, ms); err != nil {
		t.Fatal(err)
	}
	for k := range ms.Annotations {
		if strings.HasPrefix(k, pitstopv1alpha1.AnnotationSurgePrefix) {
			t.Errorf("surge record %s left on the set", k)
		}
	}
	if *ms.Spec.Replicas != 5 {
		t.Errorf("the set ends at %d replicas, want 5", *ms.Spec.Replicas)
	}

	// No window before the deadline: shut the window, and schedule a
	// retirement whose latest safe start (its start less the time a
	// replacement took on this cluster and the margin) is 20 seconds away.
	profile := &pitstopv1alpha1.MaintenanceProfile{}
	if err := c.Get(ctx, client.ObjectKey{Name: "cloud-events"}, profile); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(profile.DeepCopy())
	shut := time.Now().UTC().Add(6 * time.Hour)
	demo.MoveWindow(profile, shut, shut.Add(time.Hour))
	if err := c.Patch(ctx, profile, patch); err != nil {
		t.Fatal(err)
	}
	machines := &machinev1beta1.MachineList{}
	if err := c.List(ctx, machines, client.InNamespace(demo.CloudNamespace)); err != nil {
		t.Fatal(err)
	}
	target := machines.Items[0]
	id := aws.InstanceIDOf(ptr.Deref(target.Spec.ProviderID, ""))
	name := maintenance.MachineMaintenanceName(id, "instance-event-late")
	startByOf := func(notBefore time.Time) time.Time {
		var startBy time.Time
		testutil.Eventually(t, time.Minute, 200*time.Millisecond, func() error {
			mm := &pitstopv1alpha1.MachineMaintenance{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: demo.CloudNamespace, Name: name}, mm); err != nil {
				return err
			}
			if mm.Status.Phase != pitstopv1alpha1.EventPlanned || mm.Status.LatestSafeStart == nil || !mm.Spec.NotBefore.Time.Equal(notBefore) {
				return fmt.Errorf("phase %q, not before %v", mm.Status.Phase, mm.Spec.NotBefore)
			}
			startBy = mm.Status.LatestSafeStart.Time
			return nil
		})
		return startBy
	}
	far := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	ec2.ScheduleEvent(id, ec2sim.ScheduledEvent{ID: "instance-event-late", Code: "instance-retirement", NotBefore: far})
	lead := far.Sub(startByOf(far))
	t.Logf("the latest safe start is %s before the event (a replacement's time here, and the margin)", lead)
	if lead < time.Hour || lead > time.Hour+10*time.Minute {
		t.Errorf("lead %s: want the 1h margin and the few seconds a replacement took here", lead)
	}
	// EC2 moves the event: its latest safe start is now 20 seconds away.
	soon := time.Now().Add(lead + 20*time.Second).UTC().Truncate(time.Second)
	ec2.RemoveEvent(id, "instance-event-late")
	ec2.ScheduleEvent(id, ec2sim.ScheduledEvent{ID: "instance-event-late", Code: "instance-retirement", NotBefore: soon})
	startBy := startByOf(soon)
	var began time.Time
	testutil.Eventually(t, 2*time.Minute, 200*time.Millisecond, func() error {
		mm := &pitstopv1alpha1.MachineMaintenance{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: demo.CloudNamespace, Name: name}, mm); err != nil {
			return err
		}
		if a := mm.Status.Action; a != nil && began.IsZero() {
			began = a.StartTime.Time
		}
		if mm.Status.Phase != pitstopv1alpha1.EventCompleted {
			return fmt.Errorf("phase %q: %s", mm.Status.Phase, mm.Status.Plan)
		}
		return nil
	})
	if began.Before(startBy.Add(-time.Second)) {
		t.Errorf("the replacement began at %s, before the latest safe start %s, with the window shut", began, startBy)
	}
	t.Logf("latest safe start %s; the replacement began at %s", startBy.Format(time.RFC3339), began.Format(time.RFC3339))
}

// testWriter logs the scenario's lines to the test.
type testWriter struct{ t *testing.T }

func (w *testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
