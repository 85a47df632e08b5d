package healthcheck

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/machineapi"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// env is a real API server and etcd with the Machine API's CRDs. Nothing
// runs Machines or kubelets: the tests create Machines, link them to Nodes
// and set the Nodes' conditions themselves.
var env *testutil.Env

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard()) // each manager logs to its test instead
	testutil.Main(m, &env)
}

// startManager runs a manager with only the MachineHealthCheck controller
// until the test ends, and returns its cache.
func startManager(t *testing.T) client.Reader {
	t.Helper()
	return testutil.StartControllers(t, env.Config, ctrl.Options{}, func(mgr ctrl.Manager) error {
		return Setup(mgr, Options{})
	}).GetCache()
}

// Test timings: waitLong bounds what the controller does on its own,
// poll is how often the tests look.
const (
	waitLong = 15 * time.Second
	poll     = 50 * time.Millisecond
)

// pool labels the Machines the tests' health checks select.
var pool = map[string]string{"pool": "workers"}

// fixture is one test's namespace, with a MachineSet to own its Machines.
type fixture struct {
	t          *testing.T
	ns         string
	machineSet *machinev1beta1.MachineSet
	// cache is the manager's.
	cache client.Reader
}

// setup starts the controller and creates the test's namespace and
// MachineSet. Nothing runs the MachineSet: it only has to exist to be a
// Machine's controller.
func setup(t *testing.T, ns string) *fixture {
	t.Helper()
	cache := startManager(t)
	f := &fixture{t: t, ns: namespace(t, ns), cache: cache}
	f.machineSet = &machinev1beta1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "workers"},
		Spec: machinev1beta1.MachineSetSpec{
			Replicas: ptr.To[int32](0),
			Selector: metav1.LabelSelector{MatchLabels: pool},
			Template: machinev1beta1.MachineTemplateSpec{ObjectMeta: machinev1beta1.ObjectMeta{Labels: pool}},
		},
	}
	testutil.Create(t, env.Client, f.machineSet)
	return f
}

// namespaces numbers the tests' namespaces, so that -count=N runs in one
// API server.
var namespaces atomic.Int32

// namespace creates a namespace named for base and returns its name.
func namespace(t *testing.T, base string) string {
	t.Helper()
	return testutil.Namespace(t, env.Client, fmt.Sprintf("%s-%d", base, namespaces.Add(1)))
}

// mhcOption changes a MachineHealthCheck built by healthCheck.
type mhcOption func(*machinev1beta1.MachineHealthCheck)

// healthCheck creates a health check selecting the pool that finds a node
// unhealthy after timeout NotReady (False or Unknown), and deletes it when
// the test ends so that later tests' managers leave it be. It is created
// once the manager's cache has seen what the test set up, so that its first
// reconcile judges all of it.
func (f *fixture) healthCheck(timeout time.Duration, opts ...mhcOption) *machinev1beta1.MachineHealthCheck {
	f.t.Helper()
	f.awaitCache()
	mhc := &machinev1beta1.MachineHealthCheck{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "workers"},
		Spec: machinev1beta1.MachineHealthCheckSpec{
			Selector: metav1.LabelSelector{MatchLabels: pool},
			UnhealthyConditions: []machinev1beta1.UnhealthyCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Timeout: metav1.Duration{Duration: timeout}},
				{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Timeout: metav1.Duration{Duration: timeout}},
			},
		},
	}
	for _, o := range opts {
		o(mhc)
	}
	testutil.Create(f.t, env.Client, mhc)
	f.t.Cleanup(func() {
		if err := env.Client.Delete(context.Background(), mhc); client.IgnoreNotFound(err) != nil {
			f.t.Error(err)
		}
	})
	return mhc
}

func withMaxUnhealthy(v intstr.IntOrString) mhcOption {
	return func(m *machinev1beta1.MachineHealthCheck) { m.Spec.MaxUnhealthy = &v }
}

func withNodeStartupTimeout(d time.Duration) mhcOption {
	return func(m *machinev1beta1.MachineHealthCheck) { m.Spec.NodeStartupTimeout = &metav1.Duration{Duration: d} }
}

func paused() mhcOption {
	return func(m *machinev1beta1.MachineHealthCheck) {
		m.Annotations = map[string]string{machineapi.AnnotationPaused: ""}
	}
}

// machine creates a Machine of the pool that the fixture's MachineSet
// controls, or none when controlled is false.
func (f *fixture) machine(name string, controlled bool) *machinev1beta1.Machine {
	f.t.Helper()
	m := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name, Labels: pool}}
	if controlled {
		m.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(f.machineSet, machinev1beta1.GroupVersion.WithKind("MachineSet"))}
	}
	testutil.Create(f.t, env.Client, m)
	return m
}

// machineOnNode creates a Machine the MachineSet controls and its Node,
// linked both ways as nodelink links them, with the node's Ready condition
// at ready since the given time.
func (f *fixture) machineOnNode(name string, ready corev1.ConditionStatus, since time.Time) (*machinev1beta1.Machine, *corev1.Node) {
	f.t.Helper()
	return f.linkedMachine(name, true, ready, since)
}

// linkedMachine is machineOnNode with or without a controller.
func (f *fixture) linkedMachine(name string, controlled bool, ready corev1.ConditionStatus, since time.Time) (*machinev1beta1.Machine, *corev1.Node) {
	f.t.Helper()
	m := f.machine(name, controlled)
	n := f.node(f.ns+"-"+name, m, ready, since)
	f.updateMachineStatus(m, func(s *machinev1beta1.MachineStatus) {
		s.NodeRef = &corev1.ObjectReference{Kind: "Node", Name: n.Name, UID: n.UID}
		s.Phase = ptr.To(machinev1beta1.PhaseRunning)
	})
	return m, n
}

// node creates a Node annotated with its Machine (if any) and sets its
// Ready condition.
func (f *fixture) node(name string, m *machinev1beta1.Machine, ready corev1.ConditionStatus, since time.Time) *corev1.Node {
	f.t.Helper()
	n := testutil.Node(name)
	if m != nil {
		n.Annotations = map[string]string{machineapi.AnnotationMachine: m.Namespace + "/" + m.Name}
	}
	testutil.Create(f.t, env.Client, n)
	f.t.Cleanup(func() { _ = env.Client.Delete(context.Background(), n) })
	f.setReady(n, ready, since)
	return n
}

// setReady sets the node's Ready condition, as a kubelet or the node
// lifecycle controller would, and returns the transition time as stored
// (to the second).
func (f *fixture) setReady(n *corev1.Node, status corev1.ConditionStatus, since time.Time) time.Time {
	f.t.Helper()
	testutil.Eventually(f.t, 5*time.Second, poll, func() error {
		if err := env.Client.Get(f.t.Context(), client.ObjectKeyFromObject(n), n); err != nil {
			return err
		}
		n.Status.Conditions = []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: status, Reason: "Test",
			LastHeartbeatTime: metav1.NewTime(since), LastTransitionTime: metav1.NewTime(since),
		}}
		return env.Client.Status().Update(f.t.Context(), n)
	})
	return n.Status.Conditions[0].LastTransitionTime.Time
}

func (f *fixture) updateMachineStatus(m *machinev1beta1.Machine, change func(*machinev1beta1.MachineStatus)) {
	f.t.Helper()
	testutil.Eventually(f.t, 5*time.Second, poll, func() error {
		if err := env.Client.Get(f.t.Context(), client.ObjectKeyFromObject(m), m); err != nil {
			return err
		}
		change(&m.Status)
		return env.Client.Status().Update(f.t.Context(), m)
	})
}

// update changes an object, retrying on conflicts.
func update[T client.Object](t *testing.T, obj T, change func(T)) {
	t.Helper()
	testutil.Eventually(t, 5*time.Second, poll, func() error {
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		change(obj)
		return env.Client.Update(t.Context(), obj)
	})
}

// awaitStatus waits until the health check reports expected machines of
// which healthy are healthy, and returns it as it was then.
func awaitStatus(t *testing.T, mhc *machinev1beta1.MachineHealthCheck, expected, healthy int) *machinev1beta1.MachineHealthCheck {
	t.Helper()
	got := &machinev1beta1.MachineHealthCheck{}
	testutil.Eventually(t, waitLong, poll, func() error {
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(mhc), got); err != nil {
			return err
		}
		s := got.Status
		if s.ExpectedMachines == nil || s.CurrentHealthy == nil || *s.ExpectedMachines != expected || *s.CurrentHealthy != healthy {
			return fmt.Errorf("status expectedMachines %v currentHealthy %v, want %d and %d", ptr.Deref(s.ExpectedMachines, -1), ptr.Deref(s.CurrentHealthy, -1), expected, healthy)
		}
		return nil
	})
	return got
}

// awaitCondition waits until the health check's RemediationAllowed
// condition has the reason, and returns it.
func awaitCondition(t *testing.T, mhc *machinev1beta1.MachineHealthCheck, reason string) (*machinev1beta1.MachineHealthCheck, machinev1beta1.Condition) {
	t.Helper()
	got := &machinev1beta1.MachineHealthCheck{}
	var c *machinev1beta1.Condition
	testutil.Eventually(t, waitLong, poll, func() error {
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(mhc), got); err != nil {
			return err
		}
		if c = machineapi.Condition(got.Status.Conditions, machinev1beta1.RemediationAllowedCondition); c == nil || c.Reason != reason {
			return fmt.Errorf("conditions %+v, want RemediationAllowed with reason %s", got.Status.Conditions, reason)
		}
		return nil
	})
	return got, *c
}

// awaitDeleted waits until the Machine is gone, and returns when that was
// first seen.
func awaitDeleted(t *testing.T, m *machinev1beta1.Machine) time.Time {
	t.Helper()
	testutil.Eventually(t, waitLong, 20*time.Millisecond, func() error {
		err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(m), &machinev1beta1.Machine{})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err == nil:
			return fmt.Errorf("machine %s still exists", m.Name)
		}
		return err
	})
	return time.Now()
}

// assertExists fails the test unless every Machine exists and is not being
// deleted.
func assertExists(t *testing.T, machines ...*machinev1beta1.Machine) {
	t.Helper()
	for _, m := range machines {
		got := &machinev1beta1.Machine{}
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(m), got); err != nil {
			t.Errorf("machine %s: %v, want it kept", m.Name, err)
		} else if !got.DeletionTimestamp.IsZero() {
			t.Errorf("machine %s is being deleted, want it kept", m.Name)
		}
	}
}

// awaitEvent waits for an Event with the reason about the object named
// regarding in the namespace, and returns its note.
func awaitEvent(t *testing.T, ns, regarding, reason string) string {
	t.Helper()
	var note string
	testutil.Eventually(t, waitLong, 100*time.Millisecond, func() error {
		list := &eventsv1.EventList{}
		if err := env.Client.List(t.Context(), list, client.InNamespace(ns)); err != nil {
			return err
		}
		var seen []string
		for _, e := range list.Items {
			if e.Regarding.Name == regarding && e.Reason == reason {
				note = e.Note
				return nil
			}
			seen = append(seen, e.Regarding.Name+":"+e.Reason)
		}
		return fmt.Errorf("events in %s are [%s], want %s about %s", ns, strings.Join(seen, ", "), reason, regarding)
	})
	return note
}

// counted returns how many remediations with the result were counted
// since it was called.
func counted(result string) func() float64 {
	before := promtestutil.ToFloat64(remediations.WithLabelValues(result))
	return func() float64 { return promtestutil.ToFloat64(remediations.WithLabelValues(result)) - before }
}

// awaitCache waits until the manager's cache holds the Machines of the
// namespace, the Nodes and the NodeMaintenances as the API server has them.
func (f *fixture) awaitCache() {
	f.t.Helper()
	testutil.Eventually(f.t, 10*time.Second, 20*time.Millisecond, func() error {
		for _, l := range []struct {
			list func() client.ObjectList
			opts []client.ListOption
		}{
			{func() client.ObjectList { return &machinev1beta1.MachineList{} }, []client.ListOption{client.InNamespace(f.ns)}},
			{func() client.ObjectList { return &corev1.NodeList{} }, nil},
			{func() client.ObjectList { return &pitstopv1alpha1.NodeMaintenanceList{} }, nil},
		} {
			want, got := l.list(), l.list()
			if err := env.Client.List(f.t.Context(), want, l.opts...); err != nil {
				return err
			}
			if err := f.cache.List(f.t.Context(), got, l.opts...); err != nil {
				return err
			}
			if w, g := versions(want), versions(got); !maps.Equal(w, g) {
				return fmt.Errorf("the cache has %T %v, the API server %v", got, g, w)
			}
		}
		return nil
	})
}

// versions maps each listed object's name to its resourceVersion.
func versions(list client.ObjectList) map[string]string {
	out := map[string]string{}
	_ = meta.EachListItem(list, func(o runtime.Object) error {
		obj := o.(client.Object)
		out[obj.GetName()] = obj.GetResourceVersion()
		return nil
	})
	return out
}
