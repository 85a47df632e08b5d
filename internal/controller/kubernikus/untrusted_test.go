package kubernikus_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/controller/kubernikus"
	"github.com/pitstop-dev/pitstop/internal/sim/openstacksim"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// kubernikusDrains counts the Kubernikus NodeMaintenances not being
// deleted.
func kubernikusDrains(ctx context.Context) (int, error) {
	var list pitstopv1alpha1.NodeMaintenanceList
	if err := env.Client.List(ctx, &list, client.MatchingLabels{pitstopv1alpha1.LabelSource: pitstopv1alpha1.SourceKubernikus}); err != nil {
		return 0, err
	}
	n := 0
	for _, nm := range list.Items {
		if nm.DeletionTimestamp.IsZero() {
			n++
		}
	}
	return n, nil
}

// TestUntrustedNodeNamesPickNoServer: a Node registered under the name of
// a server outside the cluster, and labelled for deletion, gets no server
// deleted: not the one of its name (without a providerID, or with one
// naming another server), not one its providerID names under another name,
// not one of another Kubernikus cluster. Each is refused with an Event
// before any drain. A node whose links agree is deleted as before.
func TestUntrustedNodeNamesPickNoServer(t *testing.T) {
	fake := openstacksim.New(t, account)
	db := fake.AddServer("kn-prod-db")          // outside the cluster
	web := fake.AddServer("kn-web")             // another node's server
	other := fake.AddServer("kn-other-cluster") // a node of another cluster
	fake.SetMetadata(other, map[string]string{kubernikus.MetadataCluster: "elsewhere"})
	ours := fake.AddServer("kn-ours")
	fake.SetMetadata(ours, map[string]string{kubernikus.MetadataCluster: "kks", kubernikus.MetadataPool: "small"})
	fake.SetMetadata(web, map[string]string{kubernikus.MetadataCluster: "kks"})
	v := serverVersion(t)
	yes := map[string]string{kubernikus.LabelDeleteNode: "true"}
	node(t, "kn-prod-db", v, "", yes)          // named after it, no providerID
	node(t, "kn-prod-db.forged", v, db, yes)   // its providerID, another name
	node(t, "kn-prod-db-2", v, web, yes)       // another server's providerID
	node(t, "kn-other-cluster", v, other, yes) // links agree, wrong cluster
	node(t, "kn-ours", v, ours, yes)           // all agree
	cfg := "intervals:\n  requeue: 1s\ncluster: kks\nmaxMaintenance: 5\n"
	start(t, kubernikus.Options{ConfigPath: testutil.WriteFile(t, "kubernikus.yaml", cfg), CloudConfigPath: testutil.WriteFile(t, "cloudprovider.conf", cloudConf(fake))})

	eventually(t, func() error {
		if d := fake.Deleted(); !slices.Equal(d, []string{ours}) {
			return fmt.Errorf("deleted servers %v, want [%s]", d, ours)
		}
		return nil
	})
	refused := []string{"kn-prod-db", "kn-prod-db.forged", "kn-prod-db-2", "kn-other-cluster"}
	for _, name := range refused {
		eventually(t, func() error {
			if r := reasons(t, name); !slices.Contains(r, kubernikus.EventServerRefused) {
				return fmt.Errorf("node %s: Events %v, want %s", name, r, kubernikus.EventServerRefused)
			}
			return nil
		})
	}
	time.Sleep(2 * time.Second) // a few more reconciles
	if d := fake.Deleted(); !slices.Equal(d, []string{ours}) {
		t.Fatalf("deleted servers %v, want only %s", d, ours)
	}
	for _, name := range refused {
		if n := testutil.GetNode(t, env.Client, name); n.Spec.Unschedulable {
			t.Fatalf("node %s, refused, was cordoned", name)
		}
		err := env.Client.Get(t.Context(), client.ObjectKey{Name: "kubernikus-" + name}, &pitstopv1alpha1.NodeMaintenance{})
		if err == nil {
			t.Fatalf("node %s, refused, got a drain", name)
		}
	}
}

// TestUntrustedDeleteNodeLabelsDrainOneAtATime: cloud.sap/delete-node=true
// on three nodes at once (anyone with nodes/patch can write it) drains and
// deletes one node at a time, the integration's budget (maxMaintenance,
// default 1): the next drain starts only once the last node is gone.
func TestUntrustedDeleteNodeLabelsDrainOneAtATime(t *testing.T) {
	fake := openstacksim.New(t, account)
	v := serverVersion(t)
	names := []string{"kn-three-a", "kn-three-b", "kn-three-c"}
	for _, name := range names {
		node(t, name, v, fake.AddServer(name), nil)
	}
	ns := testutil.Namespace(t, env.Client, "kubernikus-three")
	testutil.Kubelet(t, env.Clientset)
	for _, name := range names {
		testutil.ManagedPods(t, env.Client, ns, name, name, 1)
	}
	start(t, kubernikus.Options{ConfigPath: testutil.WriteFile(t, "kubernikus.yaml", "intervals:\n  requeue: 1s\n  podEviction:\n    period: 1s\n"), CloudConfigPath: testutil.WriteFile(t, "cloudprovider.conf", cloudConf(fake))})

	// The most drains and cordoned nodes at once; the cloud's node
	// controller deletes the node of a deleted server.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	var mostDrains, mostCordoned atomic.Int32
	wg.Go(func() {
		for ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
			if n, err := kubernikusDrains(ctx); err == nil && int32(n) > mostDrains.Load() {
				mostDrains.Store(int32(n))
			}
			cordoned := 0
			for _, name := range names {
				n := &corev1.Node{}
				if env.Client.Get(ctx, client.ObjectKey{Name: name}, n) != nil {
					continue
				}
				if n.Spec.Unschedulable {
					cordoned++
				}
				if !slices.Contains(fake.Servers(), name) {
					_ = env.Client.Delete(ctx, n)
				}
			}
			if int32(cordoned) > mostCordoned.Load() {
				mostCordoned.Store(int32(cordoned))
			}
		}
	})

	yes := "true"
	for _, name := range names {
		setLabel(t, name, kubernikus.LabelDeleteNode, &yes)
	}
	testutil.Eventually(t, 60*time.Second, 100*time.Millisecond, func() error {
		if d := fake.Deleted(); len(d) != 3 {
			return fmt.Errorf("deleted servers %v, want 3", d)
		}
		return nil
	})
	if m := mostDrains.Load(); m != 1 {
		t.Fatalf("%d Kubernikus drains at once, want 1 (the budget)", m)
	}
	if m := mostCordoned.Load(); m != 1 {
		t.Fatalf("%d nodes cordoned at once, want 1 (the budget)", m)
	}
	waited := 0
	for _, name := range names {
		if slices.Contains(reasons(t, name), kubernikus.EventWaitingForBudget) {
			waited++
		}
	}
	if waited == 0 {
		t.Fatalf("no node has a %s Event", kubernikus.EventWaitingForBudget)
	}
}

// TestUntrustedDeleteNodeKeepsControlPlaneQuorum: of three control-plane
// nodes, one NotReady, a delete-node label on a second one must not take
// it down (quorum 2): its drain is held back by the quorum guard and its
// server stays.
func TestUntrustedDeleteNodeKeepsControlPlaneQuorum(t *testing.T) {
	fake := openstacksim.New(t, account)
	v := serverVersion(t)
	ids := map[string]string{}
	for _, name := range []string{"kn-cp-a", "kn-cp-b", "kn-cp-c"} {
		ids[name] = fake.AddServer(name)
	}
	node(t, "kn-cp-a", v, ids["kn-cp-a"], nil, testutil.ControlPlane())
	node(t, "kn-cp-b", v, ids["kn-cp-b"], nil, testutil.ControlPlane())
	node(t, "kn-cp-c", v, ids["kn-cp-c"], nil, testutil.ControlPlane(), testutil.NotReady())
	n := testutil.GetNode(t, env.Client, "kn-cp-c")
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	if err := env.Client.Status().Update(t.Context(), n); err != nil {
		t.Fatal(err)
	}
	start(t, kubernikus.Options{ConfigPath: testutil.WriteFile(t, "kubernikus.yaml", "intervals:\n  requeue: 1s\n"), CloudConfigPath: testutil.WriteFile(t, "cloudprovider.conf", cloudConf(fake))})

	yes := "true"
	setLabel(t, "kn-cp-a", kubernikus.LabelDeleteNode, &yes)
	eventually(t, func() error {
		nm := &pitstopv1alpha1.NodeMaintenance{}
		if err := env.Client.Get(t.Context(), client.ObjectKey{Name: "kubernikus-kn-cp-a"}, nm); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(nm.Status.Conditions, pitstopv1alpha1.ConditionCordoned); c == nil || c.Reason != pitstopv1alpha1.ReasonQuorumProtected {
			return fmt.Errorf("NodeMaintenance %s: conditions %v, want Cordoned %s", nm.Name, nm.Status.Conditions, pitstopv1alpha1.ReasonQuorumProtected)
		}
		return nil
	})
	time.Sleep(2 * time.Second)
	if d := fake.Deleted(); len(d) != 0 {
		t.Fatalf("a control-plane server was deleted below quorum: %v", d)
	}
	if n := testutil.GetNode(t, env.Client, "kn-cp-a"); n.Spec.Unschedulable {
		t.Fatal("a control-plane node was cordoned below quorum")
	}
}
