package nodelink_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pitstop-dev/pitstop/internal/machineapi"
	"github.com/pitstop-dev/pitstop/internal/machineapi/nodelink"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// TestLinksByProviderID: a Node and a Machine with the same providerID are
// linked both ways, and the Machine's Event says so.
func TestLinksByProviderID(t *testing.T) {
	startController(t, "pid")
	ns := namespace(t, "pid")
	create(t, newMachine(ns, "pid-1", withProviderID("test://pid-1")))
	create(t, testutil.Node("pid-1", withNodeProviderID("test://pid-1"), withAddresses("10.1.0.1")))

	m, n := awaitLinked(t, ns, "pid-1", "pid-1")
	if want := (corev1.ObjectReference{Kind: "Node", Name: "pid-1", UID: n.UID}); *m.Status.NodeRef != want {
		t.Errorf("nodeRef %+v, want exactly %+v", *m.Status.NodeRef, want)
	}
	if note := awaitEvent(t, "Machine", "pid-1", nodelink.EventLinked); !strings.Contains(note, "pid-1 by providerID") {
		t.Errorf("Linked event note %q, want the node and the evidence", note)
	}
}

// TestLinksByInternalIP: without providerIDs, a Node and a Machine that
// share an InternalIP address are linked.
func TestLinksByInternalIP(t *testing.T) {
	startController(t, "ip")
	ns := namespace(t, "ip")
	m := newMachine(ns, "ip-1")
	create(t, m)
	setAddresses(t, m, "10.2.0.9", "10.2.0.1")
	create(t, testutil.Node("ip-1", withAddresses("10.2.0.1")))

	awaitLinked(t, ns, "ip-1", "ip-1")
	awaitEvent(t, "Machine", "ip-1", nodelink.EventLinked)
}

// TestProviderIDWinsOverInternalIP: when one Machine has the Node's
// providerID and another shares its address, the Node belongs to the
// first. Everything exists before the controller starts, so that its
// first look sees both Machines.
func TestProviderIDWinsOverInternalIP(t *testing.T) {
	ns := namespace(t, "wins")
	byID := newMachine(ns, "wins-id", withProviderID("test://wins-1"))
	byIP := newMachine(ns, "wins-ip")
	create(t, byID, byIP)
	setAddresses(t, byIP, "10.3.0.1")
	create(t, testutil.Node("wins-1", withNodeProviderID("test://wins-1"), withAddresses("10.3.0.1")))
	startController(t, "wins")

	awaitLinked(t, ns, "wins-id", "wins-1")
	assertUnlinked(t, "", byIP)
}

// TestLinksAMachineCreatedAfterItsNode: a Node that had no Machine when it
// was reconciled is linked as soon as its Machine appears, by providerID,
// or gets its addresses, by internal IP.
func TestLinksAMachineCreatedAfterItsNode(t *testing.T) {
	startController(t, "late")
	ns := namespace(t, "late")
	create(t, testutil.Node("late-1", withNodeProviderID("test://late-1")))
	create(t, testutil.Node("late-2", withAddresses("10.4.0.1")))
	settle(t, "late-marker") // both Nodes have been looked at, and found nothing
	assertUnlinked(t, "late-1")
	assertUnlinked(t, "late-2")

	create(t, newMachine(ns, "late-1", withProviderID("test://late-1")))
	awaitLinked(t, ns, "late-1", "late-1")

	m := newMachine(ns, "late-2")
	create(t, m)
	setAddresses(t, m, "10.4.0.1")
	awaitLinked(t, ns, "late-2", "late-2")
}

// TestCopiesMachineMetadataKeepingTheNodes: the Machine's labels,
// annotations and taints land on the Node next to the Node's own, which
// stay; a taint the Node has with the same key and effect keeps the Node's
// value; a label added to the Machine later follows.
func TestCopiesMachineMetadataKeepingTheNodes(t *testing.T) {
	startController(t, "meta")
	ns := namespace(t, "meta")
	own := corev1.Taint{Key: "own", Value: "node", Effect: corev1.TaintEffectNoSchedule}
	dedicated := corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}
	dedicatedExecute := corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoExecute}
	create(t, newMachine(ns, "meta-1", withProviderID("test://meta-1"),
		withSpecMetadata(map[string]string{"role": "db"}, map[string]string{"example.com/note": "from-machine"}),
		withTaints(dedicated, corev1.Taint{Key: "own", Value: "machine", Effect: corev1.TaintEffectNoSchedule}, dedicatedExecute)))
	node := testutil.Node("meta-1", withNodeProviderID("test://meta-1"),
		testutil.WithLabels(map[string]string{"team": "a"}), withNodeTaints(own))
	node.Annotations = map[string]string{"example.com/own": "kept"}
	create(t, node)

	_, n := awaitLinked(t, ns, "meta-1", "meta-1")
	wantLabels := map[string]string{corev1.LabelHostname: "meta-1", "team": "a", "role": "db"}
	if !equality.Semantic.DeepEqual(n.Labels, wantLabels) {
		t.Errorf("labels %v, want %v", n.Labels, wantLabels)
	}
	wantAnnotations := map[string]string{"example.com/own": "kept", "example.com/note": "from-machine", machineapi.AnnotationMachine: "meta/meta-1"}
	if !equality.Semantic.DeepEqual(n.Annotations, wantAnnotations) {
		t.Errorf("annotations %v, want %v", n.Annotations, wantAnnotations)
	}
	// The API server adds a not-ready taint to a new Node: the Node's own
	// taints come first, as they were, then the Machine's it lacked.
	if want := append(node.Spec.Taints, dedicated, dedicatedExecute); !equality.Semantic.DeepEqual(n.Spec.Taints, want) {
		t.Errorf("taints %v, want %v", n.Spec.Taints, want)
	}

	m := getMachine(t, ns, "meta-1")
	m.Spec.ObjectMeta.Labels["tier"] = "gold"
	if err := env.Client.Update(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, 20*time.Millisecond, func() error {
		if n := getNode(t, "meta-1"); n.Labels["tier"] != "gold" || n.Labels["team"] != "a" {
			return fmt.Errorf("labels %v, want tier=gold added and team=a kept", n.Labels)
		}
		return nil
	})
}

// TestWritesNothingOnceLinked: events about a linked Node and its Machine
// that change nothing nodelink owns make it write nothing: neither object
// changes, and its client sends no request for them.
func TestWritesNothingOnceLinked(t *testing.T) {
	writes := startController(t, "quiet")
	ns := namespace(t, "quiet")
	create(t, newMachine(ns, "quiet-1", withProviderID("test://quiet-1"),
		withSpecMetadata(map[string]string{"role": "db"}, map[string]string{"example.com/note": "x"}),
		withTaints(corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule})))
	create(t, testutil.Node("quiet-1", withNodeProviderID("test://quiet-1"), withAddresses("10.6.0.1")))
	awaitLinked(t, ns, "quiet-1", "quiet-1")
	settle(t, "quiet-linked") // the reconciles the link's own writes caused are done

	m, n := getMachine(t, ns, "quiet-1"), getNode(t, "quiet-1")
	machineWrites, nodeWrites := writes.of(m), writes.of(n)
	if machineWrites == 0 || nodeWrites == 0 {
		t.Fatalf("writes to machine %d, node %d: the counter missed the link", machineWrites, nodeWrites)
	}
	// The test's own changes: an event for the Node and one for the Machine.
	if err := env.Client.Patch(t.Context(), n, client.RawPatch("application/merge-patch+json",
		[]byte(`{"metadata":{"annotations":{"example.com/poke":"1"}}}`))); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Patch(t.Context(), m, client.RawPatch("application/merge-patch+json",
		[]byte(`{"metadata":{"labels":{"example.com/poke":"1"}}}`))); err != nil {
		t.Fatal(err)
	}
	settle(t, "quiet-poked")

	if got := getNode(t, "quiet-1"); got.ResourceVersion != n.ResourceVersion {
		t.Errorf("node resourceVersion %s, want %s: nodelink wrote it again", got.ResourceVersion, n.ResourceVersion)
	}
	if got := getMachine(t, ns, "quiet-1"); got.ResourceVersion != m.ResourceVersion {
		t.Errorf("machine resourceVersion %s, want %s: nodelink wrote it again", got.ResourceVersion, m.ResourceVersion)
	}
	if w := writes.of(n); w != nodeWrites {
		t.Errorf("%d more requests to write the node, want none", w-nodeWrites)
	}
	if w := writes.of(m); w != machineWrites {
		t.Errorf("%d more requests to write the machine, want none", w-machineWrites)
	}
}

// TestLinksNoneOfTwoCandidates: a Node that two Machines match equally
// well is linked to neither, and a Warning Event names both; once one goes
// away the other is linked. Everything exists before the controller
// starts, so that its first look sees both Machines.
func TestLinksNoneOfTwoCandidates(t *testing.T) {
	ns := namespace(t, "two")
	a, b := newMachine(ns, "two-a"), newMachine(ns, "two-b")
	create(t, a, b)
	setAddresses(t, a, "10.7.0.1")
	setAddresses(t, b, "10.7.0.1")
	create(t, testutil.Node("two-1", withAddresses("10.7.0.1")))
	startController(t, "two")

	note := awaitEvent(t, "Node", "two-1", nodelink.EventAmbiguousMachine)
	for _, want := range []string{"two/two-a", "two/two-b", "internal IP"} {
		if !strings.Contains(note, want) {
			t.Errorf("event note %q does not name %s", note, want)
		}
	}
	settle(t, "two-marker")
	assertUnlinked(t, "two-1", a, b)

	if err := env.Client.Delete(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	awaitLinked(t, ns, "two-a", "two-1")
}

// TestLeavesANodeBeingDeletedUnlinked: a Node on its way out is not linked,
// even when a Machine matching it appears and the Node changes after.
func TestLeavesANodeBeingDeletedUnlinked(t *testing.T) {
	startController(t, "gone")
	ns := namespace(t, "gone")
	const hold = "test.pitstop.dev/hold"
	node := testutil.Node("gone-1", withAddresses("10.9.0.1"))
	node.Finalizers = []string{hold}
	create(t, node)
	t.Cleanup(func() {
		patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`))
		if err := env.Client.Patch(context.Background(), node, patch); client.IgnoreNotFound(err) != nil {
			t.Error(err)
		}
	})
	if err := env.Client.Delete(t.Context(), node); err != nil {
		t.Fatal(err)
	}
	m := newMachine(ns, "gone-1")
	create(t, m)
	setAddresses(t, m, "10.9.0.1")
	if err := env.Client.Patch(t.Context(), node, client.RawPatch("application/merge-patch+json",
		[]byte(`{"metadata":{"labels":{"example.com/poke":"1"}}}`))); err != nil {
		t.Fatal(err)
	}
	settle(t, "gone-marker")
	assertUnlinked(t, "gone-1", m)
}

// TestKeepsTaintsAddedWhileLinking: while nodelink copies a growing list
// of Machine taints onto the Node, the test adds taints of its own to the
// Node, each time reading the Node and writing it back (retrying its own
// conflicts). No taint of either is lost: nodelink's taint patches carry an
// optimistic lock, so one computed from an outdated Node is refused instead
// of replacing the list.
func TestKeepsTaintsAddedWhileLinking(t *testing.T) {
	startController(t, "race")
	ns := namespace(t, "race")
	create(t, newMachine(ns, "race-1", withProviderID("test://race-1"), withTaints(taint("machine", 0))))
	create(t, testutil.Node("race-1", withNodeProviderID("test://race-1")))

	const rounds = 25
	errs := make(chan error, 2)
	var wg sync.WaitGroup
	wg.Go(func() {
		errs <- addTaints(rounds, func(i int) error {
			n := &corev1.Node{}
			if err := env.Client.Get(t.Context(), client.ObjectKey{Name: "race-1"}, n); err != nil {
				return err
			}
			n.Spec.Taints = append(n.Spec.Taints, taint("node", i))
			return env.Client.Update(t.Context(), n)
		})
	})
	wg.Go(func() {
		errs <- addTaints(rounds, func(i int) error {
			m := &machinev1beta1.Machine{}
			if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "race-1"}, m); err != nil {
				return err
			}
			m.Spec.Taints = append(m.Spec.Taints, taint("machine", i+1))
			return env.Client.Update(t.Context(), m)
		})
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}

	want := sets.New[string]()
	for i := range rounds {
		want.Insert(taint("node", i).Key, taint("machine", i).Key, taint("machine", i+1).Key)
	}
	testutil.Eventually(t, 15*time.Second, 50*time.Millisecond, func() error {
		have := sets.New[string]()
		for _, tt := range getNode(t, "race-1").Spec.Taints {
			have.Insert(tt.Key)
		}
		if missing := want.Difference(have); missing.Len() > 0 {
			return fmt.Errorf("node lacks taints %v", sets.List(missing))
		}
		return nil
	})
	awaitLinked(t, ns, "race-1", "race-1")
}

func taint(owner string, i int) corev1.Taint {
	return corev1.Taint{Key: fmt.Sprintf("test.pitstop.dev/%s-%d", owner, i), Effect: corev1.TaintEffectNoSchedule}
}

// addTaints runs add for 0..rounds-1, retrying each on conflict.
func addTaints(rounds int, add func(i int) error) error {
	for i := range rounds {
		for attempt := 0; ; attempt++ {
			err := add(i)
			if err == nil {
				break
			}
			if !apierrors.IsConflict(err) || attempt == 100 {
				return fmt.Errorf("adding taint %d: %w", i, err)
			}
		}
	}
	return nil
}
