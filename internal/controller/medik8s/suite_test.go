package medik8s_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pitstop-dev/pitstop/config"
	"github.com/pitstop-dev/pitstop/internal/controller/medik8s"
	"github.com/pitstop-dev/pitstop/internal/install"
	"github.com/pitstop-dev/pitstop/internal/nodeview"
	"github.com/pitstop-dev/pitstop/internal/testutil"
	"github.com/pitstop-dev/pitstop/internal/testutil/clustertest"
)

// env is a real API server and etcd with pitstop's CRDs and the medik8s
// fixture CRD; testutil.Kubelet plays the kubelets.
var env *testutil.Env

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	e, err := testutil.StartEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := e.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	env = e
	crds, err := config.Medik8sCRDs() // as pitstop ships it
	if err == nil {
		err = install.CRDs(context.Background(), env.Client, crds)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// startManager runs pitstop's manager, with --medik8s-compat and without the
// webhook, against the API server until the test ends.
func startManager(t *testing.T) {
	t.Helper()
	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{Medik8sCompat: true, AsServiceAccount: true})
}

func create(t *testing.T, objs ...client.Object) { t.Helper(); testutil.Create(t, env.Client, objs...) }

func awaitRunning(t *testing.T, pods ...*corev1.Pod) {
	t.Helper()
	testutil.AwaitRunning(t, env.Client, pods...)
}

func namespace(t *testing.T, name string) string { return testutil.Namespace(t, env.Client, name) }

func managedPods(t *testing.T, ns, node, app string, n int) {
	t.Helper()
	testutil.ManagedPods(t, env.Client, ns, node, app, n)
}

// pdb creates a budget over two pods of app that allows allowed
// disruptions now.
func pdb(t *testing.T, ns, app string, allowed int32) *policyv1.PodDisruptionBudget {
	t.Helper()
	return testutil.PDB(t, env.Client, ns, app, 2, allowed)
}

func setAllowed(t *testing.T, p *policyv1.PodDisruptionBudget, allowed int32) {
	t.Helper()
	testutil.SetAllowed(t, env.Client, p, 2, allowed)
}

// medik8sNM builds a medik8s NodeMaintenance as its users write it.
func medik8sNM(name, node, reason string) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{"nodeName": node, "reason": reason},
	}}
	obj.SetGroupVersionKind(medik8s.GroupVersionKind)
	obj.SetName(name)
	return obj
}

func getMedik8s(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	obj := medik8sNM(name, "", "")
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: name}, obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

// awaitPhase waits until the medik8s NodeMaintenance reports phase and
// returns it as it was then.
func awaitPhase(t *testing.T, name, phase string, timeout time.Duration) *unstructured.Unstructured {
	t.Helper()
	var obj *unstructured.Unstructured
	testutil.Eventually(t, timeout, 50*time.Millisecond, func() error {
		obj = medik8sNM(name, "", "")
		if err := env.Client.Get(t.Context(), client.ObjectKey{Name: name}, obj); err != nil {
			return err
		}
		if got := str(obj, "status", "phase"); got != phase {
			return fmt.Errorf("medik8s NodeMaintenance %s status %v, want phase %s", name, obj.Object["status"], phase)
		}
		return nil
	})
	return obj
}

// awaitGone waits until obj no longer exists.
func awaitGone(t *testing.T, obj client.Object, timeout time.Duration) {
	t.Helper()
	testutil.Eventually(t, timeout, 50*time.Millisecond, func() error {
		err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(obj), obj)
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err == nil:
			return fmt.Errorf("%s %s still exists (finalizers %v)", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), obj.GetFinalizers())
		}
		return err
	})
}

func str(obj *unstructured.Unstructured, fields ...string) string {
	s, _, _ := unstructured.NestedString(obj.Object, fields...)
	return s
}

func num(obj *unstructured.Unstructured, fields ...string) int64 {
	n, _, _ := unstructured.NestedInt64(obj.Object, fields...)
	return n
}

func node(t *testing.T, name string) *corev1.Node {
	t.Helper()
	return testutil.GetNode(t, env.Client, name)
}

func hasTaint(n *corev1.Node, key string) bool { return nodeview.HasTaint(n, key) }

func podsOn(t *testing.T, ns, nodeName string) []string {
	return testutil.PodsOn(t, env.Client, ns, nodeName)
}

// awaitEvents waits until Events about the medik8s NodeMaintenance name
// carry every reason in want.
func awaitEvents(t *testing.T, name string, want ...string) {
	t.Helper()
	awaitEventsOf(t, medik8s.GroupVersionKind.GroupVersion().String(), name, want...)
}

// awaitEventsOf waits until Events about the object of apiVersion called
// name carry every reason in want.
func awaitEventsOf(t *testing.T, apiVersion, name string, want ...string) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, 100*time.Millisecond, func() error {
		list := &eventsv1.EventList{}
		if err := env.Client.List(t.Context(), list); err != nil {
			return err
		}
		var reasons []string
		for _, e := range list.Items {
			if e.Regarding.APIVersion == apiVersion && e.Regarding.Name == name {
				reasons = append(reasons, e.Reason)
			}
		}
		got := strings.Join(reasons, ",")
		for _, w := range want {
			if !strings.Contains(got, w) {
				return fmt.Errorf("events of %s are [%s], want %s", name, got, w)
			}
		}
		return nil
	})
}

// eventReasons are the reasons of the Events about the object of
// apiVersion called name, as the API server has them now.
func eventReasons(t *testing.T, apiVersion, name string) []string {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := env.Client.List(t.Context(), list); err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, e := range list.Items {
		if e.Regarding.APIVersion == apiVersion && e.Regarding.Name == name {
			reasons = append(reasons, e.Reason)
		}
	}
	return reasons
}
