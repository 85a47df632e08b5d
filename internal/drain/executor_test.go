package drain

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pitstop-dev/pitstop/internal/scheme"
	"github.com/pitstop-dev/pitstop/internal/testutil"
	"github.com/pitstop-dev/pitstop/internal/testutil/faultproxy"
)

var env *testutil.Env

func TestMain(m *testing.M) { testutil.Main(m, &env) }

// TestEvictionInFlightFinishesAfterItsCallerGoes: the manager stops
// gracefully (or a drain is cut short) while an eviction request is on its
// way. The request is let finish, so that the API server does not abandon
// an eviction it may have counted against the pod's PodDisruptionBudget
// (docs/safety.md: such a count holds one of the budget's disruptions for
// two minutes); a pod whose request was not sent yet is not evicted.
func TestEvictionInFlightFinishesAfterItsCallerGoes(t *testing.T) {
	ctx := t.Context()
	const ns = "default"
	pods := createPods(t, ns, "in-flight", "not-sent")
	// Every byte to and from the API server is made to take 1.5 s once the
	// client knows the pods' resource and holds a connection.
	c := slowClient(t, pods[0], 1500*time.Millisecond)
	e := &Executor{Client: c, Concurrency: 1}
	callCtx, cancel := context.WithCancel(ctx)
	time.AfterFunc(500*time.Millisecond, cancel) // the first request is in flight
	res := e.Evict(callCtx, pods, nil)

	if got := res.Pods[0]; got.Outcome != Evicted {
		t.Errorf("pod %s, whose eviction was on its way when its caller went: outcome %v (%v), want evicted", got.Pod.Name, got.Outcome, got.Err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pods[0]), &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Errorf("pod %s: want it evicted (gone, never having been scheduled), got %v", pods[0].Name, err)
	}
	if got := res.Pods[1]; got.Outcome != Failed || !errors.Is(got.Err, context.Canceled) {
		t.Errorf("pod %s, not yet sent when its caller went: outcome %v (%v), want failed for the canceled context", got.Pod.Name, got.Outcome, got.Err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pods[1]), &corev1.Pod{}); err != nil {
		t.Errorf("pod %s, not yet sent when its caller went, is gone: %v", pods[1].Name, err)
	}
}

// slowClient is a client whose every byte to and from the API server takes
// delay, through a proxy, once it has read known (so that it knows the
// object's resource and holds a connection).
func slowClient(t *testing.T, known client.Object, delay time.Duration) client.Client {
	t.Helper()
	host, err := url.Parse(env.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := faultproxy.Start(host.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	cfg := rest.CopyConfig(env.Config)
	cfg.Host = "https://" + proxy.Addr()
	cfg.TLSClientConfig.ServerName = host.Hostname()
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(known), known.DeepCopyObject().(client.Object)); err != nil {
		t.Fatal(err)
	}
	proxy.SetDelay(delay)
	return c
}

// createPods creates unscheduled pods of the given names in ns.
func createPods(t *testing.T, ns string, names ...string) []*corev1.Pod {
	t.Helper()
	var pods []*corev1.Pod
	for _, name := range names {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "pause"}}},
		}
		if err := env.Client.Create(t.Context(), pod); err != nil {
			t.Fatal(err)
		}
		pods = append(pods, pod)
	}
	return pods
}
