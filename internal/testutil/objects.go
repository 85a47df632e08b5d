package testutil

import (
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Create creates each object and fails the test on the first error.
func Create(t testing.TB, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := c.Create(t.Context(), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

// Namespace creates a namespace and returns its name.
func Namespace(t testing.TB, c client.Client, name string) string {
	t.Helper()
	Create(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	return name
}

// ManagedPods creates n pods of a ReplicaSet named app (labelled app=app) on
// node and waits until a kubelet (see Kubelet) has them Running.
func ManagedPods(t testing.TB, c client.Client, ns, node, app string, n int) []*corev1.Pod {
	t.Helper()
	var pods []*corev1.Pod
	for i := range n {
		p := Pod(ns, fmt.Sprintf("%s-%d", app, i), OnNode(node), OwnedBy("ReplicaSet", app), WithPodLabels(map[string]string{"app": app}))
		Create(t, c, p)
		pods = append(pods, p)
	}
	AwaitRunning(t, c, pods...)
	return pods
}

// AwaitRunning waits until every pod is Running.
func AwaitRunning(t testing.TB, c client.Client, pods ...*corev1.Pod) {
	t.Helper()
	Eventually(t, 10*time.Second, 50*time.Millisecond, func() error {
		for _, p := range pods {
			got := &corev1.Pod{}
			if err := c.Get(t.Context(), client.ObjectKeyFromObject(p), got); err != nil {
				return err
			}
			if got.Status.Phase != corev1.PodRunning {
				return fmt.Errorf("pod %s is %s", p.Name, got.Status.Phase)
			}
		}
		return nil
	})
}

// PDB creates a budget over the pods labelled app=app, of which there are
// expected, and sets its status as the disruption controller would (an
// envtest API server runs none) to allow allowed disruptions.
func PDB(t testing.TB, c client.Client, ns, app string, expected, allowed int32) *policyv1.PodDisruptionBudget {
	t.Helper()
	p := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: app},
		Spec: policyv1.PodDisruptionBudgetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			MaxUnavailable: &intstr.IntOrString{Type: intstr.Int, IntVal: 1},
		},
	}
	Create(t, c, p)
	SetAllowed(t, c, p, expected, allowed)
	return p
}

// SetAllowed sets a budget's status: expected healthy pods, allowed
// disruptions.
func SetAllowed(t testing.TB, c client.Client, p *policyv1.PodDisruptionBudget, expected, allowed int32) {
	t.Helper()
	Eventually(t, 5*time.Second, 20*time.Millisecond, func() error {
		got := &policyv1.PodDisruptionBudget{}
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(p), got); err != nil {
			return err
		}
		got.Status = policyv1.PodDisruptionBudgetStatus{
			ObservedGeneration: got.Generation,
			DisruptionsAllowed: allowed,
			CurrentHealthy:     expected,
			DesiredHealthy:     max(0, expected-allowed),
			ExpectedPods:       expected,
		}
		return c.Status().Update(t.Context(), got)
	})
}

// GetNode reads a node and fails the test if it cannot.
func GetNode(t testing.TB, c client.Client, name string) *corev1.Node {
	t.Helper()
	n := &corev1.Node{}
	if err := c.Get(t.Context(), client.ObjectKey{Name: name}, n); err != nil {
		t.Fatal(err)
	}
	return n
}

// PodsOn lists the names of the pods of a namespace bound to a node.
func PodsOn(t testing.TB, c client.Client, ns, node string) []string {
	t.Helper()
	list := &corev1.PodList{}
	if err := c.List(t.Context(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range list.Items {
		if p.Spec.NodeName == node {
			names = append(names, p.Name)
		}
	}
	return names
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago and
// that no earlier call in this test binary returned: the kernel may give
// the same ephemeral port to two listeners opened and closed one after the
// other, and two servers of one test (a dashboard and a webhook) then
// collide.
func FreePort(t testing.TB) int {
	t.Helper()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		portsMu.Lock()
		taken := portsGiven[port]
		portsGiven[port] = true
		portsMu.Unlock()
		if !taken {
			return port
		}
	}
}

// portsGiven are the ports FreePort returned.
var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)
