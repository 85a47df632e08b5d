package nodelink_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/pitstop-dev/pitstop/internal/machineapi"
	"github.com/pitstop-dev/pitstop/internal/machineapi/nodelink"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// env is a real API server and etcd with the Machine API's CRDs. Nodes are
// cluster-scoped and outlive a test, so every test names its nodes,
// providerIDs and addresses apart from the others'.
var env *testutil.Env

func TestMain(m *testing.M) { testutil.Main(m, &env) }

// writes counts the writes the controller's client makes, per object.
type writes struct {
	mu    sync.Mutex
	count map[string]int
}

func writeKey(obj client.Object) string {
	return fmt.Sprintf("%T %s", obj, client.ObjectKeyFromObject(obj))
}

func (w *writes) add(obj client.Object) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.count[writeKey(obj)]++
}

// of returns how many writes obj received.
func (w *writes) of(obj client.Object) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.count[writeKey(obj)]
}

func (w *writes) funcs() interceptor.Funcs {
	return interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			w.add(obj)
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			w.add(obj)
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			w.add(obj)
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			w.add(obj)
			return c.Delete(ctx, obj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			w.add(obj)
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			w.add(obj)
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	}
}

// startController runs a manager with the nodelink controller alone until
// the test ends, and returns the count of its writes. It returns once the
// controller has linked a probe Node of the test's (named after prefix), so
// that it is known to watch.
func startController(t *testing.T, prefix string) *writes {
	t.Helper()
	w := &writes{count: map[string]int{}}
	opts := ctrl.Options{NewClient: func(cfg *rest.Config, opts client.Options) (client.Client, error) {
		c, err := client.NewWithWatch(cfg, opts)
		if err != nil {
			return nil, err
		}
		return interceptor.NewClient(c, w.funcs()), nil
	}}
	testutil.StartControllers(t, env.Config, opts, nodelink.Setup)
	settle(t, prefix+"-probe")
	return w
}

// settle links a fresh Node and Machine named name and waits for it. The
// controller runs one reconcile at a time and takes queued Nodes first in,
// first out (events after its start all have the same priority), so once
// the fresh Node is linked every Node event before its creation has been
// handled.
func settle(t *testing.T, name string) {
	t.Helper()
	ns := namespace(t, name)
	id := "settle://" + name
	create(t, newMachine(ns, name, withProviderID(id)))
	create(t, testutil.Node(name, withNodeProviderID(id)))
	awaitLinked(t, ns, name, name)
}

func namespace(t *testing.T, name string) string { return testutil.Namespace(t, env.Client, name) }

func create(t *testing.T, objs ...client.Object) { t.Helper(); testutil.Create(t, env.Client, objs...) }

// newMachine builds a Machine with no providerSpec: nodelink reads none.
func newMachine(ns, name string, opts ...func(*machinev1beta1.Machine)) *machinev1beta1.Machine {
	m := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	for _, o := range opts {
		o(m)
	}
	return m
}

func withProviderID(id string) func(*machinev1beta1.Machine) {
	return func(m *machinev1beta1.Machine) { m.Spec.ProviderID = ptr.To(id) }
}

func withSpecMetadata(labels, annotations map[string]string) func(*machinev1beta1.Machine) {
	return func(m *machinev1beta1.Machine) {
		m.Spec.ObjectMeta.Labels, m.Spec.ObjectMeta.Annotations = labels, annotations
	}
}

func withTaints(taints ...corev1.Taint) func(*machinev1beta1.Machine) {
	return func(m *machinev1beta1.Machine) { m.Spec.Taints = taints }
}

// setAddresses writes a Machine's status.addresses, as the Machine
// controller does once its instance runs: InternalIP each of ips.
func setAddresses(t *testing.T, m *machinev1beta1.Machine, ips ...string) {
	t.Helper()
	m.Status.Addresses = nil
	for _, ip := range ips {
		m.Status.Addresses = append(m.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	if err := env.Client.Status().Update(t.Context(), m); err != nil {
		t.Fatalf("setting addresses of Machine %s: %v", m.Name, err)
	}
}

func withNodeProviderID(id string) testutil.NodeOption {
	return func(n *corev1.Node) { n.Spec.ProviderID = id }
}

// withAddresses gives a Node a hostname and InternalIP each of ips, as its
// kubelet reports them.
func withAddresses(ips ...string) testutil.NodeOption {
	return func(n *corev1.Node) {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: n.Name})
		for _, ip := range ips {
			n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
		}
	}
}

func withNodeTaints(taints ...corev1.Taint) testutil.NodeOption {
	return func(n *corev1.Node) { n.Spec.Taints = taints }
}

func getMachine(t *testing.T, ns, name string) *machinev1beta1.Machine {
	t.Helper()
	m := &machinev1beta1.Machine{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, m); err != nil {
		t.Fatal(err)
	}
	return m
}

func getNode(t *testing.T, name string) *corev1.Node {
	t.Helper()
	return testutil.GetNode(t, env.Client, name)
}

// awaitLinked waits until Machine ns/machine and Node node point at each
// other, and returns both as they are then.
func awaitLinked(t *testing.T, ns, machine, node string) (*machinev1beta1.Machine, *corev1.Node) {
	t.Helper()
	m, n := &machinev1beta1.Machine{}, &corev1.Node{}
	testutil.Eventually(t, 10*time.Second, 20*time.Millisecond, func() error {
		if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: machine}, m); err != nil {
			return err
		}
		if err := env.Client.Get(t.Context(), client.ObjectKey{Name: node}, n); err != nil {
			return err
		}
		if ref := m.Status.NodeRef; ref == nil || ref.Kind != "Node" || ref.Name != n.Name || ref.UID != n.UID {
			return fmt.Errorf("Machine %s/%s nodeRef %+v, want node %s (uid %s)", ns, machine, ref, n.Name, n.UID)
		}
		if got, want := n.Annotations[machineapi.AnnotationMachine], ns+"/"+machine; got != want {
			return fmt.Errorf("node %s annotation %s=%q, want %q", node, machineapi.AnnotationMachine, got, want)
		}
		return nil
	})
	return m, n
}

// assertUnlinked fails the test if the Node (unless "") carries a machine
// annotation or one of the Machines a nodeRef.
func assertUnlinked(t *testing.T, node string, machines ...*machinev1beta1.Machine) {
	t.Helper()
	if node != "" {
		if v, ok := getNode(t, node).Annotations[machineapi.AnnotationMachine]; ok {
			t.Errorf("node %s is annotated with machine %q, want no link", node, v)
		}
	}
	for _, m := range machines {
		if ref := getMachine(t, m.Namespace, m.Name).Status.NodeRef; ref != nil {
			t.Errorf("Machine %s/%s has nodeRef %+v, want none", m.Namespace, m.Name, ref)
		}
	}
}

// awaitEvent waits for an Event about the object of kind called name
// with reason, and returns its note.
func awaitEvent(t *testing.T, kind, name, reason string) string {
	t.Helper()
	var note string
	testutil.Eventually(t, 10*time.Second, 50*time.Millisecond, func() error {
		list := &eventsv1.EventList{}
		if err := env.Client.List(t.Context(), list); err != nil {
			return err
		}
		var seen []string
		for _, e := range list.Items {
			if e.Regarding.Kind != kind || e.Regarding.Name != name {
				continue
			}
			if e.Reason == reason {
				note = e.Note
				return nil
			}
			seen = append(seen, e.Reason)
		}
		return fmt.Errorf("events of %s %s: %v, want %s", kind, name, seen, reason)
	})
	return note
}
