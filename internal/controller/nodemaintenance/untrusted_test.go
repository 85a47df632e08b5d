package nodemaintenance_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/drain"
	"github.com/pitstop-dev/pitstop/internal/manager"
	"github.com/pitstop-dev/pitstop/internal/testutil"
	"github.com/pitstop-dev/pitstop/internal/testutil/clustertest"
)

// evictionCounter counts the eviction requests a manager sends, where they
// leave for the API server: how many per pod, how many at once at most,
// and when each started. delay holds each request back before it is sent,
// so that requests sent together overlap.
type evictionCounter struct {
	delay time.Duration

	mu       sync.Mutex
	pods     map[string]int // namespace/name → requests
	inFlight int
	most     int
	starts   []time.Time
}

// unanswered is how many evictions are on their way now.
func (c *evictionCounter) unanswered() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inFlight
}

func (c *evictionCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		pod, ok := evictedPod(req)
		if !ok {
			return rt.RoundTrip(req)
		}
		c.mu.Lock()
		c.pods[pod]++
		c.inFlight++
		c.most = max(c.most, c.inFlight)
		c.starts = append(c.starts, time.Now())
		c.mu.Unlock()
		defer func() {
			c.mu.Lock()
			c.inFlight--
			c.mu.Unlock()
		}()
		time.Sleep(c.delay)
		return rt.RoundTrip(req)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// evictedPod reads namespace/name from POST …/namespaces/NS/pods/NAME/eviction.
func evictedPod(req *http.Request) (string, bool) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	n := len(parts)
	if req.Method != http.MethodPost || n < 5 || parts[n-1] != "eviction" || parts[n-3] != "pods" || parts[n-5] != "namespaces" {
		return "", false
	}
	return parts[n-4] + "/" + parts[n-2], true
}

func (c *evictionCounter) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.pods {
		n += v
	}
	return n
}

func (c *evictionCounter) of(pod string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pods[pod]
}

// startCountedManager runs the manager with its requests counted by c.
func startCountedManager(t *testing.T, c *evictionCounter, tune func(*manager.Options)) {
	t.Helper()
	c.pods = map[string]int{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WrapTransport = c.wrap
	clustertest.StartManager(t, cfg, env.Client, clustertest.Options{Tune: tune})
}

// TestUntrustedStalePodDisruptionBudgetHoldsEvictions: a budget whose
// status.observedGeneration lags its generation (the disruption controller
// has not judged it as written, as after an API server restart or a spec
// change) must not have the pods it covers evicted on its stale
// disruptionsAllowed. No eviction leaves pitstop; the wait shows as the
// Drained reason, a blocker naming the budget and an Event; once the status
// is current the drain goes on.
func TestUntrustedStalePodDisruptionBudgetHoldsEvictions(t *testing.T) {
	c := &evictionCounter{}
	startCountedManager(t, c, nil)
	testutil.Kubelet(t, env.Clientset)
	ns := namespace(t, "stale-pdb")
	create(t, testutil.Node("stale-pdb-1"))
	managedPods(t, ns, "stale-pdb-1", "web", 3)
	budget := pdb(t, ns, "web", 3) // allows every disruption, as last computed
	// The budget's owner tightens it; no disruption controller has seen it.
	testutil.Eventually(t, 5*time.Second, 20*time.Millisecond, func() error {
		got := &policyv1.PodDisruptionBudget{}
		if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(budget), got); err != nil {
			return err
		}
		got.Spec.MaxUnavailable = &intstr.IntOrString{Type: intstr.Int, IntVal: 0}
		return env.Client.Update(t.Context(), got)
	})
	stale := &policyv1.PodDisruptionBudget{}
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(budget), stale); err != nil {
		t.Fatal(err)
	}
	if stale.Status.ObservedGeneration >= stale.Generation || stale.Status.DisruptionsAllowed != 3 {
		t.Fatalf("budget not stale as the test needs: generation %d, observedGeneration %d, disruptionsAllowed %d",
			stale.Generation, stale.Status.ObservedGeneration, stale.Status.DisruptionsAllowed)
	}

	nm := nodeMaintenance("stale-pdb", "stale-pdb-1")
	create(t, nm)
	var got *pitstopv1alpha1.NodeMaintenance
	testutil.Eventually(t, 20*time.Second, 50*time.Millisecond, func() error {
		if n := c.total(); n != 0 {
			t.Fatalf("%d eviction requests sent while the budget's status was stale, want none", n)
		}
		got = get(t, nm)
		cond := meta.FindStatusCondition(got.Status.Conditions, condDrained)
		if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != pitstopv1alpha1.ReasonWaitingForPodDisruptionBudgetStatus {
			return fmt.Errorf("Drained = %+v, want False/%s", cond, pitstopv1alpha1.ReasonWaitingForPodDisruptionBudgetStatus)
		}
		return nil
	})
	want := fmt.Sprintf("waiting for PodDisruptionBudget %s/web status to be current", ns)
	if c := meta.FindStatusCondition(got.Status.Conditions, condDrained); !strings.Contains(c.Message, want) {
		t.Errorf("Drained message %q, want it to say %q", c.Message, want)
	}
	if len(got.Status.Blockers) != 3 || got.Status.Blockers[0].PodDisruptionBudget != ns+"/web" ||
		got.Status.Blockers[0].Reason != pitstopv1alpha1.ReasonWaitingForPodDisruptionBudgetStatus {
		t.Errorf("blockers %+v, want the 3 pods held by %s/web", got.Status.Blockers, ns)
	}
	awaitEvents(t, nm, pitstopv1alpha1.EventEvictionHeld)
	// Long enough for the retry interval to pass a few times.
	time.Sleep(3 * time.Second)
	if n := c.total(); n != 0 {
		t.Fatalf("%d eviction requests sent while the budget's status was stale, want none", n)
	}
	if left := podsOn(t, ns, "stale-pdb-1"); len(left) != 3 {
		t.Fatalf("pods on the node: %v, want all 3", left)
	}

	// The disruption controller catches up.
	setAllowed(t, budget, 3)
	awaitCondition(t, nm, condDrained, metav1.ConditionTrue, pitstopv1alpha1.ReasonDrained, 20*time.Second)
	if n := c.total(); n < 3 {
		t.Errorf("%d eviction requests once the budget was current, want at least 3", n)
	}
}

// TestUntrustedEvictionBurstStaysWithinTheManagersBound: four drains at
// once, each with room for 100 evictions in flight, together never have
// more in flight than the manager-wide bound, nor start more than its rate
// allows, counted where the requests leave for the API server.
func TestUntrustedEvictionBurstStaysWithinTheManagersBound(t *testing.T) {
	const inFlight, rate, burst = 4, 40.0, 4
	c := &evictionCounter{delay: 30 * time.Millisecond}
	startCountedManager(t, c, func(o *manager.Options) {
		o.NodeMaintenance.Evictions = drain.LimiterOptions{InFlight: inFlight, Rate: rate, Burst: burst}
	})
	testutil.Kubelet(t, env.Clientset)
	ns := namespace(t, "burst")
	var nms []*pitstopv1alpha1.NodeMaintenance
	for i := range 4 {
		node := fmt.Sprintf("burst-%d", i)
		create(t, testutil.Node(node))
		managedPods(t, ns, node, fmt.Sprintf("web%d", i), 10)
		nms = append(nms, nodeMaintenance(node, node))
	}
	for _, nm := range nms {
		create(t, nm)
	}
	for _, nm := range nms {
		awaitCondition(t, nm, condDrained, metav1.ConditionTrue, pitstopv1alpha1.ReasonDrained, 30*time.Second)
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.starts) < 40 {
		t.Fatalf("%d eviction requests for 40 pods", len(c.starts))
	}
	if c.most > inFlight {
		t.Errorf("%d evictions in flight at once across the manager, want at most %d", c.most, inFlight)
	}
	// In any window, no more may start than the bucket holds plus what the
	// rate refills in it (one more for the clock's grain).
	const window = 250 * time.Millisecond
	allowed := burst + int(rate*window.Seconds()) + 1
	slices.SortFunc(c.starts, func(a, b time.Time) int { return a.Compare(b) })
	for i, start := range c.starts {
		n := 0
		for _, s := range c.starts[i:] {
			if s.Sub(start) >= window {
				break
			}
			n++
		}
		if n > allowed {
			t.Fatalf("%d evictions started within %s of %s, want at most %d (burst %d, %g a second)", n, window, start.Format("15:04:05.000"), allowed, burst, rate)
		}
	}
}

// TestUntrustedPodsThatComeStraightBackAreLeft: a Deployment's pod that
// tolerates every taint (operator Exists) would be scheduled right back
// onto the cordoned node after an eviction, to be evicted again: a loop
// against the scheduler, with Drained flipping between True and False.
// Such a pod stays, like a DaemonSet pod, and is listed in status.leftPods
// with its reason; a replica its controller adds there later stays too,
// and Drained, once True, stays True.
func TestUntrustedPodsThatComeStraightBackAreLeft(t *testing.T) {
	c := &evictionCounter{}
	startCountedManager(t, c, nil)
	testutil.Kubelet(t, env.Clientset)
	ns := namespace(t, "comeback")
	const node = "comeback-1"
	create(t, testutil.Node(node))
	managedPods(t, ns, node, "web", 2)
	everyTaint := func(p *corev1.Pod) { p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}} }
	agent := func(name string) *corev1.Pod {
		return testutil.Pod(ns, name, testutil.OnNode(node), testutil.OwnedBy("ReplicaSet", "agent-5d8f"),
			testutil.WithPodLabels(map[string]string{"app": "agent"}), everyTaint)
	}
	first := agent("agent-5d8f-a")
	logs := testutil.Pod(ns, "logs-x1", testutil.OnNode(node), testutil.OwnedBy("DaemonSet", "logs"))
	create(t, first, logs)
	awaitRunning(t, first, logs)

	nm := nodeMaintenance("comeback", node)
	create(t, nm)
	awaitCondition(t, nm, condDrained, metav1.ConditionTrue, pitstopv1alpha1.ReasonDrained, 20*time.Second)

	// The agent's controller keeps its replicas: one more lands on the
	// node, as the scheduler may put it there (or the first one's
	// replacement, if it was evicted).
	second := agent("agent-5d8f-b")
	create(t, second)
	awaitRunning(t, second)
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		got := get(t, nm)
		if cond := meta.FindStatusCondition(got.Status.Conditions, condDrained); cond == nil || cond.Status != metav1.ConditionTrue {
			t.Fatalf("Drained went back to %+v after a pod that tolerates the cordon came to the node", cond)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, p := range []*corev1.Pod{first, second} {
		if n := c.of(ns + "/" + p.Name); n != 0 {
			t.Errorf("%d eviction requests for %s, which tolerates every taint, want none", n, p.Name)
		}
	}
	if n := c.of(ns + "/web-0"); n == 0 {
		t.Errorf("web-0 was never evicted: the drain did not run")
	}
	testutil.Eventually(t, 10*time.Second, 50*time.Millisecond, func() error {
		got := get(t, nm)
		left := map[string]string{}
		for _, l := range got.Status.LeftPods {
			left[l.Pod.Namespace+"/"+l.Pod.Name] = l.Reason
		}
		want := map[string]string{
			ns + "/" + first.Name:  string(drain.SkipToleratesCordon),
			ns + "/" + second.Name: string(drain.SkipToleratesCordon),
			ns + "/" + logs.Name:   string(drain.SkipDaemonSet),
		}
		if len(left) != len(want) {
			return fmt.Errorf("leftPods %v, want %v", left, want)
		}
		for k, v := range want {
			if left[k] != v {
				return fmt.Errorf("leftPods %v, want %v", left, want)
			}
		}
		cond := meta.FindStatusCondition(got.Status.Conditions, condDrained)
		if !strings.Contains(cond.Message, "2 ToleratesCordon") {
			return fmt.Errorf("Drained message %q, want it to count the pods left for tolerating the cordon", cond.Message)
		}
		return nil
	})
}
