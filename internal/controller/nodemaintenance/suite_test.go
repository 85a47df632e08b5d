package nodemaintenance_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/manager"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// env is a real API server and etcd; testutil.Kubelet plays the kubelets.
var env *testutil.Env

func TestMain(m *testing.M) { testutil.Main(m, &env) }

const managerNamespace = "pitstop-system"

// running is a manager started by a test.
type running struct {
	stop func()
}

// startManager runs pitstop's manager against the API server until the test
// ends or stop is called. With webhook, it serves the admission webhook on
// 127.0.0.1 with the certificate it manages itself; without, any webhook
// configuration left by an earlier test is removed.
func startManager(t *testing.T, webhook bool) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	opts := manager.DefaultOptions()
	opts.MetricsAddr, opts.HealthAddr = "0", "0"
	opts.LeaderElection = false
	opts.LeaderElectionNamespace = managerNamespace
	if webhook {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: managerNamespace}}
		if err := env.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		opts.Webhook.Host = "127.0.0.1"
		opts.Webhook.Port = freePort(t)
		opts.Webhook.URL = fmt.Sprintf("https://127.0.0.1:%d", opts.Webhook.Port)
		opts.Webhook.CertDir = t.TempDir()
	} else {
		opts.Webhook.Port = 0
		if err := env.Client.DeleteAllOf(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{}); err != nil {
			t.Fatal(err)
		}
	}
	mgr, err := manager.New(ctx, env.Config, opts, testr.New(t))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stopped := false
	r := &running{stop: func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}}
	t.Cleanup(r.stop)
	if webhook {
		// The API server calls the webhook as soon as its configuration
		// exists; wait until the server answers.
		testutil.Eventually(t, 10*time.Second, 50*time.Millisecond, func() error {
			conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", opts.Webhook.Port))
			if err == nil {
				conn.Close()
			}
			return err
		})
	}
	return r
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := env.Client.Create(t.Context(), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

func namespace(t *testing.T, name string) string {
	t.Helper()
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	return name
}

// managedPods creates n pods of a ReplicaSet on node and waits until the
// kubelet has them Running and Ready.
func managedPods(t *testing.T, ns, node, app string, n int) []*corev1.Pod {
	t.Helper()
	var pods []*corev1.Pod
	for i := range n {
		p := testutil.Pod(ns, fmt.Sprintf("%s-%d", app, i), testutil.OnNode(node), testutil.OwnedBy("ReplicaSet", app), testutil.WithPodLabels(map[string]string{"app": app}))
		create(t, p)
		pods = append(pods, p)
	}
	awaitRunning(t, pods...)
	return pods
}

func awaitRunning(t *testing.T, pods ...*corev1.Pod) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, 50*time.Millisecond, func() error {
		for _, p := range pods {
			got := &corev1.Pod{}
			if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(p), got); err != nil {
				return err
			}
			if got.Status.Phase != corev1.PodRunning {
				return fmt.Errorf("pod %s is %s", p.Name, got.Status.Phase)
			}
		}
		return nil
	})
}

// pdb creates a budget over app and sets its status as the disruption
// controller would (envtest runs none): allowed disruptions now.
func pdb(t *testing.T, ns, app string, allowed int32) *policyv1.PodDisruptionBudget {
	t.Helper()
	p := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: app},
		Spec: policyv1.PodDisruptionBudgetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			MaxUnavailable: &intstr.IntOrString{Type: intstr.Int, IntVal: 1},
		},
	}
	create(t, p)
	setAllowed(t, p, allowed)
	return p
}

func setAllowed(t *testing.T, p *policyv1.PodDisruptionBudget, allowed int32) {
	t.Helper()
	testutil.Eventually(t, 5*time.Second, 20*time.Millisecond, func() error {
		got := &policyv1.PodDisruptionBudget{}
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(p), got); err != nil {
			return err
		}
		got.Status = policyv1.PodDisruptionBudgetStatus{
			ObservedGeneration: got.Generation,
			DisruptionsAllowed: allowed,
			CurrentHealthy:     3,
			DesiredHealthy:     max(0, 3-allowed),
			ExpectedPods:       3,
		}
		return env.Client.Status().Update(t.Context(), got)
	})
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
	n := &corev1.Node{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: name}, n); err != nil {
		t.Fatal(err)
	}
	return n
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, taint := range n.Spec.Taints {
		if taint.Key == key {
			return true
		}
	}
	return false
}

func podsOn(t *testing.T, ns, nodeName string) []string {
	t.Helper()
	list := &corev1.PodList{}
	if err := env.Client.List(t.Context(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range list.Items {
		if p.Spec.NodeName == nodeName {
			names = append(names, p.Name)
		}
	}
	return names
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
