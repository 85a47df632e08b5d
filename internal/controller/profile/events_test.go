package profile_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/client-go/tools/events"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/controller/profile"
	"github.com/pitstop-dev/pitstop/internal/scheme"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// TestUntrustedRepeatedWarningsShowTheirLatestMessage: two ProfileNotRunnable
// Warnings about one node in a row, through client-go's events.k8s.io
// broadcaster as the manager records them, with different messages (the
// profile's error changed): the second message is visible as an Event. The
// first one repeated stays one Event (a series), not one per evaluation.
func TestUntrustedRepeatedWarningsShowTheirLatestMessage(t *testing.T) {
	node := testutil.Node("warned-0")
	testutil.Create(t, env.Client, node)
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: env.Clientset.EventsV1()})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if err := broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		t.Fatal(err)
	}
	defer broadcaster.Shutdown()
	recorder := profile.LatestWarnings(broadcaster.NewRecorder(scheme.New(), "pitstop-profile"))
	warn := func(note string) {
		recorder.Eventf(node, nil, corev1.EventTypeWarning, pitstopv1alpha1.EventProfileNotRunnable, "Evaluate", "%s", note)
	}
	first := "profile broken has no generation that compiles (spec.checks[0]: unknown plugin)"
	second := "profile broken has no generation that compiles (spec.notifications[2]: template too long)"
	notes := func() map[string]int32 {
		t.Helper()
		list := &eventsv1.EventList{}
		if err := env.Client.List(t.Context(), list); err != nil {
			t.Fatal(err)
		}
		out := map[string]int32{}
		for _, e := range list.Items {
			if e.Regarding.Name == node.Name && e.Reason == pitstopv1alpha1.EventProfileNotRunnable {
				count := int32(1)
				if e.Series != nil {
					count = e.Series.Count
				}
				out[e.Note] += count
			}
		}
		return out
	}
	warn(first)
	testutil.Eventually(t, 10*time.Second, 50*time.Millisecond, func() error {
		if notes()[first] == 0 {
			return fmt.Errorf("no Event says %q", first)
		}
		return nil
	})
	warn(first) // repeated: folded into the first Event's series
	warn(second)
	testutil.Eventually(t, 10*time.Second, 50*time.Millisecond, func() error {
		if got := notes(); got[second] == 0 {
			return fmt.Errorf("the second Warning's message is not shown: Events about %s say %v", node.Name, got)
		}
		return nil
	})
	if got := notes(); len(got) != 2 {
		t.Errorf("Events about %s: %v, want one for each message", node.Name, got)
	}
}
