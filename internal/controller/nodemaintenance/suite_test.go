package nodemaintenance_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/testutil"
	"github.com/pitstop-dev/pitstop/internal/testutil/clustertest"
)

// env is a real API server and etcd; testutil.Kubelet plays the kubelets.
var env *testutil.Env

func TestMain(m *testing.M) { testutil.Main(m, &env) }

// startManager runs pitstop's manager against the API server until the
// test ends; with webhook, the API server calls its admission webhook.
func startManager(t *testing.T, webhook bool) *clustertest.Manager {
	t.Helper()
	return clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{Webhook: webhook})
}

func create(t *testing.T, objs ...client.Object) { t.Helper(); testutil.Create(t, env.Client, objs...) }

func namespace(t *testing.T, name string) string { return testutil.Namespace(t, env.Client, name) }

func managedPods(t *testing.T, ns, node, app string, n int) []*corev1.Pod {
	t.Helper()
	return testutil.ManagedPods(t, env.Client, ns, node, app, n)
}

func awaitRunning(t *testing.T, pods ...*corev1.Pod) {
	t.Helper()
	testutil.AwaitRunning(t, env.Client, pods...)
}

// pdb creates a budget over three pods of app that allows allowed
// disruptions now.
func pdb(t *testing.T, ns, app string, allowed int32) *policyv1.PodDisruptionBudget {
	t.Helper()
	return testutil.PDB(t, env.Client, ns, app, 3, allowed)
}

func setAllowed(t *testing.T, p *policyv1.PodDisruptionBudget, allowed int32) {
	t.Helper()
	testutil.SetAllowed(t, env.Client, p, 3, allowed)
}

func nodeMaintenance(name, node string, edit ...func(*pitstopv1alpha1.NodeMaintenance)) *pitstopv1alpha1.NodeMaintenance {
	nm := &pitstopv1alpha1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       pitstopv1alpha1.NodeMaintenanceSpec{NodeName: node, Reason: "test"},
	}
	for _, e := range edit {
		e(nm)
	}
	return nm
}

func get(t *testing.T, nm *pitstopv1alpha1.NodeMaintenance) *pitstopv1alpha1.NodeMaintenance {
	t.Helper()
	got := &pitstopv1alpha1.NodeMaintenance{}
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(nm), got); err != nil {
		t.Fatal(err)
	}
	return got
}

// awaitCondition waits until the condition has the status and reason and
// returns the object as it was then.
func awaitCondition(t *testing.T, nm *pitstopv1alpha1.NodeMaintenance, condType string, status metav1.ConditionStatus, reason string, timeout time.Duration) *pitstopv1alpha1.NodeMaintenance {
	t.Helper()
	var got *pitstopv1alpha1.NodeMaintenance
	testutil.Eventually(t, timeout, 50*time.Millisecond, func() error {
		got = &pitstopv1alpha1.NodeMaintenance{}
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(nm), got); err != nil {
			return err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, condType)
		if c == nil || c.Status != status || c.Reason != reason {
			return fmt.Errorf("NodeMaintenance %s condition %s = %+v, want %s/%s", nm.Name, condType, c, status, reason)
		}
		return nil
	})
	return got
}

func node(t *testing.T, name string) *corev1.Node {
	t.Helper()
	return testutil.GetNode(t, env.Client, name)
}

func podsOn(t *testing.T, ns, nodeName string) []string {
	return testutil.PodsOn(t, env.Client, ns, nodeName)
}

// events returns the reasons of the Events about a NodeMaintenance.
func eventReasons(t *testing.T, nm *pitstopv1alpha1.NodeMaintenance) []string {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := env.Client.List(t.Context(), list); err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, e := range list.Items {
		if e.Regarding.Kind == "NodeMaintenance" && e.Regarding.Name == nm.Name {
			reasons = append(reasons, e.Reason)
		}
	}
	return reasons
}

func awaitEvents(t *testing.T, nm *pitstopv1alpha1.NodeMaintenance, want ...string) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, 100*time.Millisecond, func() error {
		got := strings.Join(eventReasons(t, nm), ",")
		for _, w := range want {
			if !strings.Contains(got, w) {
				return fmt.Errorf("events of %s are [%s], want %s", nm.Name, got, w)
			}
		}
		return nil
	})
}
