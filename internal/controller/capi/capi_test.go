package capi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/cloud/clusterapi"
	"github.com/pitstop-dev/pitstop/internal/dashboard"
	"github.com/pitstop-dev/pitstop/internal/fleet"
	"github.com/pitstop-dev/pitstop/internal/plugin/check"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// TestNothingWithoutAMaintenanceControllerOnTheNode: as the seed does, a
// Machine whose workload Node carries no maintenance state (neither
// pitstop's nor the maintenance-controller's) gets no hook and its Node no
// label; once pitstop's state label is there, the hook is added; a Node
// with only the maintenance-controller's label counts too.
func TestNothingWithoutAMaintenanceControllerOnTheNode(t *testing.T) {
	w := newWorld(t, "gate", false)
	w.machine("m-0", w.ns+"-n0", nil)
	w.machine("m-1", w.ns+"-n1", map[string]string{pitstopv1alpha1.LabelSeedState: "operational"})
	w.hookIs("m-1", true)
	time.Sleep(time.Second)
	if _, ok := w.get("m-0").Annotations[clusterapi.AnnotationHook]; ok {
		t.Fatal("a Machine whose Node has no maintenance state got the hook")
	}
	labelNode(t, w.ns+"-n0", map[string]*string{pitstopv1alpha1.LabelState: ptr.To("operational")})
	w.hookIs("m-0", true)
	if c := meta.FindStatusCondition(w.get("m-0").Status.Conditions, clusterapi.ConditionWorkloadReachable); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("condition %s = %+v, want True", clusterapi.ConditionWorkloadReachable, c)
	}
	// One connection for the cluster while it has opted-in Machines; none
	// once the last is opted out.
	if n := w.clusters.Connected(); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
	for _, m := range []string{"m-0", "m-1"} {
		w.patchMachine(m, map[string]map[string]*string{"labels": {clusterapi.LabelEnabled: nil}})
		w.hookIs(m, false)
	}
	testutil.Eventually(t, 10*time.Second, interval, func() error {
		if n := w.clusters.Connected(); n != 0 {
			return fmt.Errorf("%d connections left", n)
		}
		return nil
	})
}

// TestADeletionWaitsForTheNodesApprovalAcrossARestart: a deleted Machine
// keeps its hook, its Node is labelled machine-deleted; pitstop restarts
// in the middle; once the Node approves, the hook goes and the deletion
// goes on. A Machine opted out loses its hook; a deleted Machine without
// a Node is not held.
func TestADeletionWaitsForTheNodesApprovalAcrossARestart(t *testing.T) {
	w := newWorld(t, "delete", false)
	node := w.ns + "-n0"
	w.machine("m-0", node, stateLabel)
	w.hookIs("m-0", true)
	if err := mgmtClient.Delete(t.Context(), w.get("m-0")); err != nil {
		t.Fatal(err)
	}
	nodeLabelIs(t, node, clusterapi.LabelMachineDeleted, "true")
	w.restart()
	time.Sleep(time.Second)
	w.hookIs("m-0", true)
	labelNode(t, node, map[string]*string{clusterapi.LabelApproveDeletion: ptr.To("true")})
	w.hookIs("m-0", false)

	w.machine("m-1", w.ns+"-n1", stateLabel)
	w.hookIs("m-1", true)
	w.patchMachine("m-1", map[string]map[string]*string{"labels": {clusterapi.LabelEnabled: nil}})
	w.hookIs("m-1", false)

	// A Machine that never got a Node but carries the hook (from an
	// earlier Node) is let go when deleted.
	w.machine("m-2", "", nil, func(m *clusterv1.Machine) {
		m.Annotations = map[string]string{clusterapi.AnnotationHook: clusterapi.HookOwner}
	})
	if err := mgmtClient.Delete(t.Context(), w.get("m-2")); err != nil {
		t.Fatal(err)
	}
	w.hookIs("m-2", false)
}

// TestAMaintenanceIsRequestedApprovedAndEnded: the Machine's request
// labels its Node; the Node's approval marks the Machine approved, and
// (with --metal3) its BareMetalHost gets the reboot annotation; removing
// the Machine's label ends it all.
func TestAMaintenanceIsRequestedApprovedAndEnded(t *testing.T) {
	w := newWorld(t, "maint", true)
	node := w.ns + "-n0"
	w.bareMetalHost("", "host-0", "m-0")
	w.machine("m-0", node, stateLabel, onMetal3("host-0"))
	w.hookIs("m-0", true)
	w.patchMachine("m-0", map[string]map[string]*string{"labels": {clusterapi.LabelMaintenance: ptr.To(clusterapi.MaintenanceRequested)}})
	nodeLabelIs(t, node, clusterapi.LabelMachineMaintenance, "true")
	// pitstop explain machine, in the management cluster, shows the
	// request and the workload node's report.
	text := explainMachine(t, w.ns+"/m-0")
	for _, want := range []string{"Machine " + w.ns + "/m-0 (Cluster API, workload cluster " + w.ns + "/wl): ", "node " + node,
		"opted in: a deletion will wait for the workload node's approval", "maintenance requested: waiting for the workload node",
		"Node " + node} {
		if !strings.Contains(text, want) {
			t.Errorf("pitstop explain machine lacks %q:\n%s", want, text)
		}
	}
	// The dashboard's clusters page: the cluster, the Machine, its
	// node's state.
	h := dashboard.NewHandler(mgmtClient, mgmtClient, fleet.NewEvaluator(mgmtClient, check.Deps{}))
	h.ServeClusters(func(ctx context.Context) ([]clusterapi.ClusterView, error) {
		return w.clusters.View(ctx, w.ctrl.GetClient())
	})
	testutil.Eventually(t, 10*time.Second, interval, func() error {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/clusters", nil))
		var got dashboard.Clusters
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Code != http.StatusOK {
			return fmt.Errorf("%d %s", rec.Code, rec.Body.String())
		}
		var cl *clusterapi.ClusterView
		for i := range got.Clusters {
			if got.Clusters[i].Cluster == w.ns+"/wl" {
				cl = &got.Clusters[i]
			}
		}
		if cl == nil || !cl.Connected || len(cl.Machines) != 1 {
			return fmt.Errorf("clusters %+v", got.Clusters)
		}
		if m := cl.Machines[0]; m.Machine != "m-0" || m.Node != node || m.State != "operational" || m.Maintenance != clusterapi.MaintenanceRequested || !m.Held {
			return fmt.Errorf("machine %+v", m)
		}
		return nil
	})
	time.Sleep(500 * time.Millisecond)
	if w.get("m-0").Labels[clusterapi.LabelMaintenance] != clusterapi.MaintenanceRequested || w.rebootAnnotated("host-0") {
		t.Fatal("approved, or the host rebooted, before the Node approved")
	}
	labelNode(t, node, map[string]*string{clusterapi.LabelApproveMaintenance: ptr.To("true")})
	eventually(t, func() error {
		if v := w.get("m-0").Labels[clusterapi.LabelMaintenance]; v != clusterapi.MaintenanceApproved {
			return fmt.Errorf("maintenance %q", v)
		}
		if !w.rebootAnnotated("host-0") {
			return fmt.Errorf("no reboot annotation on the host")
		}
		return nil
	})
	w.patchMachine("m-0", map[string]map[string]*string{"labels": {clusterapi.LabelMaintenance: nil}})
	nodeLabelIs(t, node, clusterapi.LabelMachineMaintenance, "")
	nodeLabelIs(t, node, clusterapi.LabelApproveMaintenance, "")
	eventually(t, func() error {
		if w.rebootAnnotated("host-0") {
			return fmt.Errorf("reboot annotation still there")
		}
		return nil
	})
}

// TestRotatedCredentialsAreFollowed: the kubeconfig Secret's token is
// replaced and the old one revoked; pitstop reconnects with the new one
// and the protocol goes on. A token revoked before the Secret changes is
// reported on the Machine until the Secret brings a new one.
func TestRotatedCredentialsAreFollowed(t *testing.T) {
	w := newWorld(t, "rotate", false)
	first, revokeFirst := serviceAccountKubeconfig(t, w.ns+"-a")
	w.writeKubeconfig(first)
	node := w.ns + "-n0"
	w.machine("m-0", node, stateLabel)
	w.hookIs("m-0", true)

	second, revokeSecond := serviceAccountKubeconfig(t, w.ns+"-b")
	w.writeKubeconfig(second)
	revokeFirst()
	w.patchMachine("m-0", map[string]map[string]*string{"labels": {clusterapi.LabelMaintenance: ptr.To(clusterapi.MaintenanceRequested)}})
	nodeLabelIs(t, node, clusterapi.LabelMachineMaintenance, "true")

	// Revoked first, then rotated.
	revokeSecond()
	w.patchMachine("m-0", map[string]map[string]*string{"labels": {clusterapi.LabelMaintenance: nil}})
	w.conditionIs("m-0", metav1.ConditionFalse, "Unauthorized")
	third, _ := serviceAccountKubeconfig(t, w.ns+"-c")
	w.writeKubeconfig(third)
	nodeLabelIs(t, node, clusterapi.LabelMachineMaintenance, "")
	w.conditionIs("m-0", metav1.ConditionTrue, "")
	if s := w.secretText(); strings.Contains(s, "eyJ") {
		t.Errorf("a token in a condition or Event: %s", s)
	}
}

// TestAnUnreachableClusterIsReportedAndItsHooksKept: a cluster whose API
// server does not answer is reported on its Machine (condition, Warning
// Event), and the hook of a Machine being deleted stays.
func TestAnUnreachableClusterIsReportedAndItsHooksKept(t *testing.T) {
	w := newWorld(t, "unreach", false)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close() // nothing listens there now
	w.writeKubeconfig(kubeconfigAt("https://"+addr, func(a *clientcmdapi.AuthInfo) { a.Token = "whatever" }))
	w.machine("m-0", "", nil, func(m *clusterv1.Machine) {
		m.Annotations = map[string]string{clusterapi.AnnotationHook: clusterapi.HookOwner}
	})
	m := w.get("m-0")
	base := m.DeepCopy()
	m.Status.NodeRef = clusterv1.MachineNodeReference{Name: "somewhere"}
	if err := mgmtClient.Status().Patch(t.Context(), m, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	if err := mgmtClient.Delete(t.Context(), w.get("m-0")); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 60*time.Second, interval, func() error {
		c := meta.FindStatusCondition(w.get("m-0").Status.Conditions, clusterapi.ConditionWorkloadReachable)
		if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "the deletion hook is kept") {
			return fmt.Errorf("condition %+v", c)
		}
		return nil
	})
	if !w.hasEvent("WorkloadClusterUnreachable") {
		t.Error("no WorkloadClusterUnreachable Event")
	}
	w.hookIs("m-0", true)
}

// conditionIs waits for the reachability condition's status, its message
// containing part.
func (w *world) conditionIs(name string, status metav1.ConditionStatus, part string) {
	w.t.Helper()
	testutil.Eventually(w.t, 60*time.Second, interval, func() error {
		c := meta.FindStatusCondition(w.get(name).Status.Conditions, clusterapi.ConditionWorkloadReachable)
		if c == nil || c.Status != status || !strings.Contains(c.Message, part) {
			return fmt.Errorf("condition %+v, want %s containing %q", c, status, part)
		}
		return nil
	})
}

// secretText is every condition and Event text of the namespace.
func (w *world) secretText() string {
	var b strings.Builder
	list := &clusterv1.MachineList{}
	_ = mgmtClient.List(w.t.Context(), list, client.InNamespace(w.ns))
	for _, m := range list.Items {
		for _, c := range m.Status.Conditions {
			b.WriteString(c.Message)
		}
	}
	events := &eventsv1.EventList{}
	_ = mgmtClient.List(w.t.Context(), events, client.InNamespace(w.ns))
	for _, e := range events.Items {
		b.WriteString(e.Note)
	}
	return b.String()
}

func (w *world) hasEvent(reason string) bool {
	w.t.Helper()
	found := false
	testutil.Eventually(w.t, 10*time.Second, interval, func() error {
		events := &eventsv1.EventList{}
		if err := mgmtClient.List(w.t.Context(), events, client.InNamespace(w.ns)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Reason == reason {
				found = true
				return nil
			}
		}
		return fmt.Errorf("no %s Event", reason)
	})
	return found
}

// onMetal3 puts a Machine on the BareMetalHost host of its namespace, its
// Metal3Machine named as the Machine.
func onMetal3(host string) func(*clusterv1.Machine) {
	return func(m *clusterv1.Machine) {
		m.Spec.ProviderID = "metal3://" + m.Namespace + "/" + host + "/" + m.Name
		m.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "Metal3Machine", Name: m.Name}
	}
}
