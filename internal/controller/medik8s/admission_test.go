package medik8s_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/testutil"
	"github.com/pitstop-dev/pitstop/internal/testutil/clustertest"
)

// TestAdmissionRefusesWhatTheMedik8sOperatorRefuses: with the webhook, a
// medik8s NodeMaintenance of a missing node, a second one for a node, one
// of a control-plane node that would break quorum, and a change of
// spec.nodeName are refused by the API server with the medik8s operator's
// messages; a refused object gets no Event.
func TestAdmissionRefusesWhatTheMedik8sOperatorRefuses(t *testing.T) {
	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{Medik8sCompat: true, Webhook: true, AsServiceAccount: true})
	testutil.Kubelet(t, env.Clientset)
	create(t, testutil.Node("admit-worker"),
		testutil.Node("admit-cp-0", testutil.ControlPlane()), testutil.Node("admit-cp-1", testutil.ControlPlane()), testutil.Node("admit-cp-2", testutil.ControlPlane()))

	refused := func(obj *unstructured.Unstructured, want string) {
		t.Helper()
		err := env.Client.Create(t.Context(), obj)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("creating %s for %s: %v, want a refusal saying %q", obj.GetName(), str(obj, "spec", "nodeName"), err, want)
		}
	}
	refused(medik8sNM("admit-ghost", "admit-nowhere", ""), "invalid nodeName, no node with name admit-nowhere found")

	create(t, medik8sNM("admit-first", "admit-worker", "upgrade"))
	refused(medik8sNM("admit-second", "admit-worker", ""), "invalid nodeName, a NodeMaintenance for node admit-worker already exists")

	// Renaming the node of an existing one.
	testutil.Eventually(t, 10*time.Second, 50*time.Millisecond, func() error {
		obj := getMedik8s(t, "admit-first")
		if err := unstructured.SetNestedField(obj.Object, "admit-cp-2", "spec", "nodeName"); err != nil {
			return err
		}
		err := env.Client.Update(t.Context(), obj)
		if err == nil || !strings.Contains(err.Error(), "updating spec.NodeName isn't allowed") {
			return fmt.Errorf("changing spec.nodeName: %v, want the medik8s refusal", err)
		}
		return nil
	})

	// One control-plane node of three may go; with it held, a second may
	// not.
	create(t, medik8sNM("admit-cp-first", "admit-cp-0", ""))
	testutil.Eventually(t, 10*time.Second, 50*time.Millisecond, func() error {
		return env.Client.Get(t.Context(), client.ObjectKey{Name: "medik8s-admit-cp-first"}, &pitstopv1alpha1.NodeMaintenance{})
	})
	refused(medik8sNM("admit-cp-second", "admit-cp-1", ""),
		"can not put master/control-plane node into maintenance at this moment, disrupting node admit-cp-1 will violate etcd quorum")

	// No Event about an object that never existed.
	time.Sleep(time.Second)
	events := &eventsv1.EventList{}
	if err := env.Client.List(t.Context(), events); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if n := e.Regarding.Name; n == "admit-ghost" || n == "admit-second" || n == "admit-cp-second" {
			t.Errorf("Event %s about refused %s: %s", e.Reason, n, e.Note)
		}
	}
}
