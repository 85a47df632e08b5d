package machineset_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pitstop-dev/pitstop/internal/machineapi"
	"github.com/pitstop-dev/pitstop/internal/machineapi/machineset"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// env is a real API server and etcd with the Machine API's CRDs. Nothing
// runs Machines: the tests play the Machine controller and nodelink by
// setting nodeRefs and creating Nodes.
var env *testutil.Env

func TestMain(m *testing.M) { testutil.Main(m, &env) }

const (
	timeout  = 20 * time.Second
	interval = 50 * time.Millisecond
	// labelSet is the label the test MachineSets select on, as OpenShift's
	// installer labels its MachineSets' Machines.
	labelSet = "machine.openshift.io/cluster-api-machineset"
)

// namespaces numbers the namespaces of a run: envtest has no namespace
// controller, so a namespace never goes away, and -count reruns tests.
var namespaces atomic.Int32

// newNamespace creates a namespace for one test, named after name.
func newNamespace(t *testing.T, name string) string {
	t.Helper()
	return testutil.Namespace(t, env.Client, fmt.Sprintf("%s-%d", name, namespaces.Add(1)))
}

// startController runs a manager with only the MachineSet controller, its
// cache limited to namespace ns (Nodes are cluster-wide) so that tests do
// not see each other's Machines, until stop is called or the test ends. A
// manager starts with a synced cache: tests that must be sure what the
// controller saw first set objects up, then start it. Its logs are shown
// when the test fails.
func startController(t *testing.T, ns string) (stop func()) {
	t.Helper()
	return startControllerWith(t, ns, env.Config)
}

func startControllerWith(t *testing.T, ns string, cfg *rest.Config) (stop func()) {
	t.Helper()
	opts := ctrl.Options{Cache: cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}}}
	return testutil.StartControllers(t, cfg, opts, func(mgr ctrl.Manager) error {
		return machineset.Setup(mgr, machineset.Options{})
	}).Stop
}

// newSet returns a MachineSet whose template labels its Machines
// labelSet=name and role=worker, selecting on labelSet.
func newSet(ns, name string, replicas int32) *machinev1beta1.MachineSet {
	return &machinev1beta1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: machinev1beta1.MachineSetSpec{
			Replicas: ptr.To(replicas),
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{labelSet: name}},
			Template: machinev1beta1.MachineTemplateSpec{
				ObjectMeta: machinev1beta1.ObjectMeta{
					Labels:      map[string]string{labelSet: name, "role": "worker"},
					Annotations: map[string]string{"example.com/note": "from the template"},
				},
				Spec: machinev1beta1.MachineSpec{
					ObjectMeta:   machinev1beta1.ObjectMeta{Labels: map[string]string{"node-role.kubernetes.io/worker": ""}},
					ProviderSpec: machinev1beta1.ProviderSpec{Value: &runtime.RawExtension{Raw: []byte(`{"kind":"KwokMachineProviderConfig","size":"small"}`)}},
				},
			},
		},
	}
}

func create(t *testing.T, objs ...client.Object) { t.Helper(); testutil.Create(t, env.Client, objs...) }

// get rereads obj from the API server.
func get(t *testing.T, obj client.Object) {
	t.Helper()
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatal(err)
	}
}

// patch applies change to obj as a merge patch (of its status when status
// is true), retrying on conflicts with the controller.
func patch[T client.Object](t *testing.T, obj T, status bool, change func(T)) {
	t.Helper()
	testutil.Eventually(t, timeout, interval, func() error {
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		base := obj.DeepCopyObject().(T)
		change(obj)
		p := client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
		if status {
			return env.Client.Status().Patch(t.Context(), obj, p)
		}
		return env.Client.Patch(t.Context(), obj, p)
	})
}

// scale sets spec.replicas.
func scale(t *testing.T, ms *machinev1beta1.MachineSet, replicas int32) {
	t.Helper()
	patch(t, ms, false, func(ms *machinev1beta1.MachineSet) { ms.Spec.Replicas = ptr.To(replicas) })
}

// machinesOf lists, from the API server, the Machines ms controls and that
// are not being deleted, sorted by name.
func machinesOf(t *testing.T, ms *machinev1beta1.MachineSet) []machinev1beta1.Machine {
	t.Helper()
	list := &machinev1beta1.MachineList{}
	if err := env.Client.List(t.Context(), list, client.InNamespace(ms.Namespace)); err != nil {
		t.Fatal(err)
	}
	var out []machinev1beta1.Machine
	for _, m := range list.Items {
		if ref := metav1.GetControllerOf(&m); ref != nil && ref.UID == ms.UID && m.DeletionTimestamp.IsZero() {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b machinev1beta1.Machine) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// awaitSettled waits until ms has exactly n live Machines and its status
// reports them for its current generation, and returns the Machines.
func awaitSettled(t *testing.T, ms *machinev1beta1.MachineSet, n int) []machinev1beta1.Machine {
	t.Helper()
	var machines []machinev1beta1.Machine
	testutil.Eventually(t, timeout, interval, func() error {
		get(t, ms)
		machines = machinesOf(t, ms)
		if len(machines) != n || ms.Status.Replicas != int32(n) || ms.Status.ObservedGeneration != ms.Generation {
			return fmt.Errorf("MachineSet %s has %d machines, status.replicas %d, observedGeneration %d of %d; want %d",
				ms.Name, len(machines), ms.Status.Replicas, ms.Status.ObservedGeneration, ms.Generation, n)
		}
		return nil
	})
	return machines
}

// awaitStatus waits until check accepts the status of ms.
func awaitStatus(t *testing.T, ms *machinev1beta1.MachineSet, check func(machinev1beta1.MachineSetStatus) error) {
	t.Helper()
	testutil.Eventually(t, timeout, interval, func() error {
		get(t, ms)
		if ms.Status.ObservedGeneration != ms.Generation {
			return fmt.Errorf("observedGeneration %d, generation %d", ms.Status.ObservedGeneration, ms.Generation)
		}
		return check(ms.Status)
	})
}

// counts checks the replica counts of a status.
func counts(replicas, labelled, ready, available int32) func(machinev1beta1.MachineSetStatus) error {
	return func(st machinev1beta1.MachineSetStatus) error {
		got := [4]int32{st.Replicas, st.FullyLabeledReplicas, st.ReadyReplicas, st.AvailableReplicas}
		if want := [4]int32{replicas, labelled, ready, available}; got != want {
			return fmt.Errorf("replicas, fullyLabeled, ready, available = %v, want %v", got, want)
		}
		return nil
	}
}

// setNodeRef plays nodelink: it links the Machine to the Node.
func setNodeRef(t *testing.T, m *machinev1beta1.Machine, node string) {
	t.Helper()
	patch(t, m, true, func(m *machinev1beta1.Machine) {
		m.Status.NodeRef = &corev1.ObjectReference{Kind: "Node", Name: node}
	})
}

// machineNode creates the Node of a Machine, annotated as nodelink does,
// Ready (or not) since since.
func machineNode(t *testing.T, m *machinev1beta1.Machine, name string, ready bool, since time.Time) *corev1.Node {
	t.Helper()
	node := testutil.Node(name)
	node.Annotations = map[string]string{machineapi.AnnotationMachine: m.Namespace + "/" + m.Name}
	node.Status.Conditions = []corev1.NodeCondition{readyCondition(ready, since)}
	create(t, node)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), node) })
	return node
}

func readyCondition(ready bool, since time.Time) corev1.NodeCondition {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return corev1.NodeCondition{Type: corev1.NodeReady, Status: status, LastTransitionTime: metav1.NewTime(since), LastHeartbeatTime: metav1.NewTime(since)}
}

// setReady plays the kubelet: it sets the Node's Ready condition.
func setReady(t *testing.T, node *corev1.Node, ready bool) {
	t.Helper()
	patch(t, node, true, func(n *corev1.Node) { n.Status.Conditions = []corev1.NodeCondition{readyCondition(ready, time.Now())} })
}

// eventReasons returns the reasons of the Events about the MachineSet, in
// the order the API server lists them.
func eventReasons(t *testing.T, ms *machinev1beta1.MachineSet) []string {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := env.Client.List(t.Context(), list, client.InNamespace(ms.Namespace)); err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, e := range list.Items {
		if e.Regarding.Kind == "MachineSet" && e.Regarding.Name == ms.Name {
			reasons = append(reasons, e.Reason)
		}
	}
	return reasons
}

// awaitEvent waits until an Event about ms has reason and a note
// containing note, and returns the Event.
func awaitEvent(t *testing.T, ms *machinev1beta1.MachineSet, reason, note string) eventsv1.Event {
	t.Helper()
	var found eventsv1.Event
	testutil.Eventually(t, timeout, interval, func() error {
		list := &eventsv1.EventList{}
		if err := env.Client.List(t.Context(), list, client.InNamespace(ms.Namespace)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Regarding.Name == ms.Name && e.Reason == reason && strings.Contains(e.Note, note) {
				found = e
				return nil
			}
		}
		return fmt.Errorf("no %s Event about MachineSet %s with %q; reasons: %v", reason, ms.Name, note, eventReasons(t, ms))
	})
	return found
}

// names returns the names of machines.
func names(machines []machinev1beta1.Machine) []string {
	out := make([]string, len(machines))
	for i, m := range machines {
		out[i] = m.Name
	}
	return out
}

// awaitCreatedAfter waits until the API server's clock, which stamps
// creationTimestamp to the second, has moved past m's creation, so that
// the next Machine is strictly younger.
func awaitCreatedAfter(t *testing.T, m *machinev1beta1.Machine) {
	t.Helper()
	testutil.Eventually(t, 3*time.Second, interval, func() error {
		if next := m.CreationTimestamp.Add(time.Second); time.Now().Before(next) {
			return fmt.Errorf("the clock has not reached %s yet", next)
		}
		return nil
	})
}
