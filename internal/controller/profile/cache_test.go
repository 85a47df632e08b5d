package profile_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/controller/profile"
	"github.com/pitstop-dev/pitstop/internal/engine"
	"github.com/pitstop-dev/pitstop/internal/scheme"
	"github.com/pitstop-dev/pitstop/internal/testutil"
	"github.com/pitstop-dev/pitstop/internal/testutil/clustertest"
)

// TestRestartMidTransitionResumes stops the manager while a transition
// waits for its drain (a PodDisruptionBudget in the way) and starts a new
// one: it resumes from the node's record and the cluster, holds one budget
// slot, and moves the node into maintenance exactly once.
func TestRestartMidTransitionResumes(t *testing.T) {
	first := clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{})
	testutil.Kubelet(t, env.Clientset)
	p := restoringProfile("restarter")
	testutil.Create(t, env.Client, p)
	ns := testutil.Namespace(t, env.Client, "restarter")
	testutil.Create(t, env.Client, testutil.Node("restarter-0", testutil.WithLabels(map[string]string{"pool": "restarter"})))
	testutil.ManagedPods(t, env.Client, ns, "restarter-0", "web", 2)
	budget := testutil.PDB(t, env.Client, ns, "web", 2, 0)
	// Wanted only once its pods and their budget exist: a drain that
	// started before would evict them unhindered.
	annotateNode(t, "restarter-0", "reboot-needed", `"true"`)

	// The drain has started and waits on the budget.
	testutil.Eventually(t, 20*time.Second, 100*time.Millisecond, func() error {
		nm := &pitstopv1alpha1.NodeMaintenance{}
		if err := env.Client.Get(t.Context(), client.ObjectKey{Name: "profile-restarter-0"}, nm); err != nil {
			return err
		}
		if !meta.IsStatusConditionFalse(nm.Status.Conditions, pitstopv1alpha1.ConditionDrained) {
			return fmt.Errorf("drain not blocked yet: %+v", nm.Status.Conditions)
		}
		return nil
	})
	if got := testutil.GetNode(t, env.Client, "restarter-0").Labels[pitstopv1alpha1.LabelState]; got != string(pitstopv1alpha1.StateMaintenanceRequired) {
		t.Fatalf("state %q while the drain waits, want maintenance-required", got)
	}
	first.Stop()

	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{})
	testutil.SetAllowed(t, env.Client, budget, 2, 2)
	testutil.Eventually(t, 30*time.Second, 100*time.Millisecond, func() error {
		n := testutil.GetNode(t, env.Client, "restarter-0")
		if n.Labels[pitstopv1alpha1.LabelState] != string(pitstopv1alpha1.StateInMaintenance) {
			return fmt.Errorf("state %q", n.Labels[pitstopv1alpha1.LabelState])
		}
		return nil
	})
	// Events are written in the background, after the node: wait for the
	// move's, then make sure there is no second one.
	entries := func() int {
		n := 0
		list := &eventsv1.EventList{}
		if err := env.Client.List(t.Context(), list); err != nil {
			t.Fatal(err)
		}
		for _, e := range list.Items {
			if e.Regarding.Name == "restarter-0" && e.Reason == "ChangedMaintenanceState" && strings.Contains(e.Note, "now in-maintenance") {
				n++
			}
		}
		return n
	}
	testutil.Eventually(t, 10*time.Second, 100*time.Millisecond, func() error {
		if n := entries(); n != 1 {
			return fmt.Errorf("%d moves into maintenance recorded, want exactly 1", n)
		}
		return nil
	})
	leases := &coordinationv1.LeaseList{}
	if err := env.Client.List(t.Context(), leases, client.InNamespace("pitstop-system")); err != nil {
		t.Fatal(err)
	}
	held := 0
	for _, l := range leases.Items {
		if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == "node/restarter-0" {
			held++
		}
	}
	if held != 1 {
		t.Errorf("restarter-0 holds %d budget slots, want 1", held)
	}
}

// staleNodes reads nodes as they were when it was made, as an informer
// cache that has not yet seen the latest writes does.
type staleNodes struct {
	client.Client
	nodes map[string]*corev1.Node
}

func (s staleNodes) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if n, ok := s.nodes[key.Name]; ok {
		n.DeepCopyInto(obj.(*corev1.Node))
		return nil
	}
	return s.Client.Get(ctx, key, obj, opts...)
}

// TestStaleCachedNodeIsEvaluatedFromTheAPIServer: when the cached node is
// behind the API server in what the engine's write depends on (its record,
// written by an evaluation the cache has not seen yet), the write fails its
// test; the node is evaluated again at once from the API server's copy and
// written, instead of waiting for a requeue (on a busy fleet the queue is
// seconds deep). The kubelet's status written in between is kept.
func TestStaleCachedNodeIsEvaluatedFromTheAPIServer(t *testing.T) {
	p := rollingProfile("stale-cache", "stale-cache", 1)
	testutil.Create(t, env.Client, p)
	node := testutil.Node("stale-cache-0", testutil.WithLabels(map[string]string{"pool": "stale-cache"}),
		func(n *corev1.Node) { n.Annotations = map[string]string{"example.com/note": "x"} })
	testutil.Create(t, env.Client, node)
	stale := testutil.GetNode(t, env.Client, node.Name)
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: node.Name}}
	// An evaluation the cache has not seen records the node operational.
	if _, err := profile.NewBareReconciler(env.Client, env.Client).Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	// The node is asked for maintenance, and the kubelet reports in.
	live := testutil.GetNode(t, env.Client, node.Name)
	if _, err := engine.ReadRecord(live); err != nil || live.Annotations[pitstopv1alpha1.AnnotationMaintenanceData] == "" {
		t.Fatalf("the first evaluation wrote no record: %v", err)
	}
	patch := client.MergeFrom(live.DeepCopy())
	live.Annotations["reboot-needed"] = "true"
	if err := env.Client.Patch(t.Context(), live, patch); err != nil {
		t.Fatal(err)
	}
	live.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}
	if err := env.Client.Status().Update(t.Context(), live); err != nil {
		t.Fatal(err)
	}
	stale.Annotations["reboot-needed"] = "true" // the cache saw the request, not the record

	r := profile.NewBareReconciler(staleNodes{Client: env.Client, nodes: map[string]*corev1.Node{node.Name: stale}}, env.Client)
	res, err := r.Reconcile(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	got := testutil.GetNode(t, env.Client, node.Name)
	if state := got.Labels[pitstopv1alpha1.LabelState]; state != string(pitstopv1alpha1.StateMaintenanceRequired) {
		t.Fatalf("after one reconcile (result %+v) the node's state is %q, want %s: the stale read was not evaluated again", res, state, pitstopv1alpha1.StateMaintenanceRequired)
	}
	if len(got.Status.Conditions) != 1 {
		t.Errorf("the kubelet's status was lost: %+v", got.Status.Conditions)
	}
}

// TestAMoveIsNotTakenAgainFromALaggingCache: the evaluation right after a
// move, with a cache that has not seen the move yet, starts from the
// engine's own write: it neither runs the move's triggers again nor sends
// a write the API server refuses, nor reads the node from the API server.
// Once the cache shows a later version (here, a label someone else set),
// that is what is evaluated.
func TestAMoveIsNotTakenAgainFromALaggingCache(t *testing.T) {
	p := rollingProfile("lagging-cache", "lagging-cache", 1)
	p.Spec.States.MaintenanceRequired.Transitions[0].Check = "approved" // a bare reconciler takes no budget slots
	p.Spec.Checks = append(p.Spec.Checks, pitstopv1alpha1.CheckInstance{Name: "approved", HasLabel: &pitstopv1alpha1.KeyValueCheck{Key: "approved"}})
	p.Spec.Triggers = append(p.Spec.Triggers, pitstopv1alpha1.TriggerInstance{Name: "count", AlterAnnotation: &pitstopv1alpha1.AlterTrigger{Key: "example.com/moves", Value: ptr.To("1")}})
	p.Spec.States.Operational.Transitions[0].Triggers = []string{"count"}
	testutil.Create(t, env.Client, p)
	node := testutil.Node("lagging-cache-0", testutil.WithLabels(map[string]string{"pool": "lagging-cache"}),
		func(n *corev1.Node) { n.Annotations = map[string]string{"reboot-needed": "true"} })
	testutil.Create(t, env.Client, node)
	cached := testutil.GetNode(t, env.Client, node.Name)
	lagging := staleNodes{Client: env.Client, nodes: map[string]*corev1.Node{node.Name: cached}}
	var reads atomic.Int32
	r := profile.NewBareReconciler(lagging, countingReader{Reader: env.Client, reads: &reads})
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: node.Name}}
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	moved := testutil.GetNode(t, env.Client, node.Name)
	if moved.Labels[pitstopv1alpha1.LabelState] != string(pitstopv1alpha1.StateMaintenanceRequired) {
		t.Fatalf("state %q after the first evaluation, want maintenance-required", moved.Labels[pitstopv1alpha1.LabelState])
	}
	// Someone removes the trigger's annotation; the lagging cache shows
	// neither that nor the move.
	patch := []byte(`{"metadata":{"annotations":{"example.com/moves":null}}}`)
	if _, err := env.Clientset.CoreV1().Nodes().Patch(t.Context(), node.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	again := testutil.GetNode(t, env.Client, node.Name)
	if _, ran := again.Annotations["example.com/moves"]; ran {
		t.Errorf("the move's trigger ran again from the lagging cache")
	}
	if n := reads.Load(); n != 0 {
		t.Errorf("the evaluation read the node from the API server %d times; its own write was enough", n)
	}
	// The cache catches up with a later version: approved by someone else.
	approve := []byte(`{"metadata":{"labels":{"approved":"yes"}}}`)
	if _, err := env.Clientset.CoreV1().Nodes().Patch(t.Context(), node.Name, types.MergePatchType, approve, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	lagging.nodes[node.Name] = testutil.GetNode(t, env.Client, node.Name)
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if got := testutil.GetNode(t, env.Client, node.Name).Labels[pitstopv1alpha1.LabelState]; got != string(pitstopv1alpha1.StateInMaintenance) {
		t.Errorf("state %q once the cache showed the approval, want in-maintenance", got)
	}
}

// TestAMoveRecordsTheNewStatesChecksInTheSameWrite: the write that moves a
// node records the checks of the state it enters, evaluated on the node as
// the triggers left it, so the next evaluation, finding nothing changed,
// writes nothing.
func TestAMoveRecordsTheNewStatesChecksInTheSameWrite(t *testing.T) {
	p := &pitstopv1alpha1.MaintenanceProfile{
		ObjectMeta: metav1.ObjectMeta{Name: "one-write"},
		Spec: pitstopv1alpha1.MaintenanceProfileSpec{
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "one-write"}},
			Checks: []pitstopv1alpha1.CheckInstance{
				{Name: "wanted", HasAnnotation: &pitstopv1alpha1.KeyValueCheck{Key: "reboot-needed"}},
				{Name: "approved", HasLabel: &pitstopv1alpha1.KeyValueCheck{Key: "approved"}},
			},
			Triggers: []pitstopv1alpha1.TriggerInstance{
				{Name: "mark", AlterLabel: &pitstopv1alpha1.AlterTrigger{Key: "marked", Value: ptr.To("yes")}},
			},
			States: pitstopv1alpha1.StatesSpec{
				Operational:         pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "wanted", Triggers: []string{"mark"}, Next: pitstopv1alpha1.StateMaintenanceRequired}}},
				MaintenanceRequired: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "approved", Next: pitstopv1alpha1.StateInMaintenance}}},
				InMaintenance:       pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "!wanted", Next: pitstopv1alpha1.StateOperational}}},
			},
		},
	}
	testutil.Create(t, env.Client, p)
	node := testutil.Node("one-write-0", testutil.WithLabels(map[string]string{"pool": "one-write"}),
		func(n *corev1.Node) { n.Annotations = map[string]string{"reboot-needed": "true"} })
	testutil.Create(t, env.Client, node)
	r := profile.NewBareReconciler(env.Client, env.Client)
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: node.Name}}
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	moved := testutil.GetNode(t, env.Client, node.Name)
	rec, err := engine.ReadRecord(moved)
	if err != nil {
		t.Fatal(err)
	}
	pr := rec.Profiles["one-write"]
	if pr.Current != pitstopv1alpha1.StateMaintenanceRequired || moved.Labels["marked"] != "yes" {
		t.Fatalf("after one reconcile: state %s, marked %q; want %s, yes", pr.Current, moved.Labels["marked"], pitstopv1alpha1.StateMaintenanceRequired)
	}
	if passed, ok := pr.Checks["approved"]; !ok || passed || len(pr.Checks) != 1 {
		t.Fatalf("the move recorded checks %v, want the entered state's: approved=false", pr.Checks)
	}
	if _, err := r.Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if again := testutil.GetNode(t, env.Client, node.Name); again.ResourceVersion != moved.ResourceVersion {
		t.Errorf("the evaluation after the move wrote the node again (resourceVersion %s → %s)", moved.ResourceVersion, again.ResourceVersion)
	}
}

// TestChecksReadTheInformersNodes: the checks that count over the fleet
// read the nodes straight from the informer's store — every node, the
// store's own objects, not a copy per evaluation.
func TestChecksReadTheInformersNodes(t *testing.T) {
	names := map[string]bool{}
	for i := range 3 {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("lister-%d", i)}}
		testutil.Create(t, env.Client, n)
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), n) })
		names[n.Name] = true
	}
	c, err := cache.New(env.Config, cache.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	list, err := profile.InformerNodes(c)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(t.Context()) }()
	if !c.WaitForCacheSync(t.Context()) {
		t.Fatal("the cache did not sync")
	}
	first, err := list(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	second, _ := list(t.Context())
	byName := map[string]*corev1.Node{}
	for _, n := range first {
		byName[n.Name] = n
	}
	for name := range names {
		if byName[name] == nil {
			t.Errorf("node %s is not listed", name)
		}
	}
	for _, n := range second {
		if byName[n.Name] != n {
			t.Fatalf("node %s is a new copy on every list", n.Name)
		}
	}
}

// TestTheIndexShowsWhatTheCacheShows: the index of the nodes holding
// budget slots names exactly the cached nodes whose record says they are
// in maintenance or leaving it, from the moment the cache shows a node's
// version: a count taken from it never lags a look at every cached node.
func TestTheIndexShowsWhatTheCacheShows(t *testing.T) {
	record := func(pr engine.ProfileRecord) string {
		return engine.Record{Profiles: map[string]engine.ProfileRecord{"indexed": pr}}.Encode()
	}
	records := map[string]string{
		"indexed-operational": record(engine.ProfileRecord{Current: pitstopv1alpha1.StateOperational}),
		"indexed-in":          record(engine.ProfileRecord{Current: pitstopv1alpha1.StateInMaintenance, Previous: pitstopv1alpha1.StateMaintenanceRequired}),
		"indexed-leaving":     record(engine.ProfileRecord{Current: pitstopv1alpha1.StateOperational, Previous: pitstopv1alpha1.StateInMaintenance, Entering: true}),
		"indexed-unreadable":  "{not json",
	}
	for name, data := range records {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{pitstopv1alpha1.AnnotationMaintenanceData: data}}}
		testutil.Create(t, env.Client, n)
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), n) })
	}
	c, err := cache.New(env.Config, cache.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	ix, err := profile.InformerIndex(c)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(t.Context()) }()
	if !c.WaitForCacheSync(t.Context()) {
		t.Fatal("the cache did not sync")
	}
	holding := func() []string {
		nodes, err := ix.Holding(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, n := range nodes {
			if _, ours := records[n.Name]; ours {
				names = append(names, n.Name)
			}
		}
		slices.Sort(names)
		return names
	}
	if got := holding(); !slices.Equal(got, []string{"indexed-in", "indexed-leaving"}) {
		t.Fatalf("the index names %v, want [indexed-in indexed-leaving]", got)
	}
	if n, err := ix.Get(t.Context(), "indexed-operational"); err != nil || n == nil || n.Name != "indexed-operational" {
		t.Fatalf("the node by name: %v, %v", n, err)
	}

	// The operational node moves into maintenance, the one in it leaves
	// and is deleted: as soon as the cache shows each change, so does
	// the index.
	moved := testutil.GetNode(t, env.Client, "indexed-operational")
	patch := client.MergeFrom(moved.DeepCopy())
	moved.Annotations[pitstopv1alpha1.AnnotationMaintenanceData] = records["indexed-in"]
	if err := env.Client.Patch(t.Context(), moved, patch); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "indexed-in"}}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, time.Millisecond, func() error {
		// The cache first, then the index: what the cache showed, the
		// index shows a moment later.
		cached := &corev1.Node{}
		if err := c.Get(t.Context(), client.ObjectKey{Name: moved.Name}, cached); err != nil {
			return err
		}
		gone := c.Get(t.Context(), client.ObjectKey{Name: "indexed-in"}, &corev1.Node{})
		got := holding()
		if cached.ResourceVersion == moved.ResourceVersion && !slices.Contains(got, moved.Name) {
			t.Fatalf("the cache shows %s in maintenance, the index does not: %v", moved.Name, got)
		}
		if gone != nil && slices.Contains(got, "indexed-in") {
			t.Fatalf("the cache no longer has indexed-in, the index does: %v", got)
		}
		if want := []string{"indexed-leaving", "indexed-operational"}; !slices.Equal(got, want) {
			return fmt.Errorf("the index names %v, want %v", got, want)
		}
		return nil
	})
	if n, _ := ix.Get(t.Context(), "indexed-in"); n != nil {
		t.Errorf("a deleted node is still found by name")
	}
}
