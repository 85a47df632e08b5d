package hypervisor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/config"
	"github.com/pitstop-dev/pitstop/internal/controller/profile"
	"github.com/pitstop-dev/pitstop/internal/plugin/check"
	"github.com/pitstop-dev/pitstop/internal/plugin/hypervisor"
	"github.com/pitstop-dev/pitstop/internal/plugin/trigger"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// env is a real API server and etcd with the Hypervisor CRD installed.
var env *testutil.Env

func TestMain(m *testing.M) { testutil.Main(m, &env) }

var noon = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

func installCRD(t *testing.T) {
	t.Helper()
	crds, err := config.KVMCRDs()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{CRDs: crds}); err != nil {
		t.Fatal(err)
	}
}

// newHypervisor creates node name's Hypervisor with status (merged into
// its status through the status subresource, as the operator writes it).
func newHypervisor(t *testing.T, name string, status map[string]any) {
	t.Helper()
	hv := &unstructured.Unstructured{}
	hv.SetGroupVersionKind(hypervisor.GVK)
	hv.SetName(name)
	hv.Object["spec"] = map[string]any{}
	testutil.Create(t, env.Client, hv)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), hv) })
	setStatus(t, name, status)
}

func setStatus(t *testing.T, name string, status map[string]any) {
	t.Helper()
	raw, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		t.Fatal(err)
	}
	hv := &unstructured.Unstructured{}
	hv.SetGroupVersionKind(hypervisor.GVK)
	hv.SetName(name)
	if err := env.Client.Status().Patch(t.Context(), hv, client.RawPatch("application/merge-patch+json", raw)); err != nil {
		t.Fatal(err)
	}
}

func spec(t *testing.T, name string) map[string]any {
	t.Helper()
	hv := &unstructured.Unstructured{}
	hv.SetGroupVersionKind(hypervisor.GVK)
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: name}, hv); err != nil {
		t.Fatal(err)
	}
	s, _, _ := unstructured.NestedMap(hv.Object, "spec")
	return s
}

func fields(t *testing.T, raw string) pitstopv1alpha1.HypervisorFields {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		t.Fatal(err)
	}
	out := pitstopv1alpha1.HypervisorFields{}
	for k, v := range m {
		out[k] = apiextensionsv1.JSON{Raw: v}
	}
	return out
}

func condition(typ, status, reason string) map[string]any {
	return map[string]any{"type": typ, "status": status, "reason": reason, "message": "", "lastTransitionTime": "2026-11-27T00:00:00Z"}
}

func evaluate(t *testing.T, inst pitstopv1alpha1.CheckInstance, node string) (check.Result, error) {
	t.Helper()
	c, err := check.New(inst, check.Deps{Reader: env.Client})
	if err != nil {
		t.Fatal(err)
	}
	return c.Evaluate(t.Context(), check.Context{Node: testutil.Node(node), Now: noon})
}

// TestChecksReadTheNodesHypervisor: checkHypervisor compares status fields
// of each kind, hypervisorCondition a condition, both on the Hypervisor
// named like the node.
func TestChecksReadTheNodesHypervisor(t *testing.T) {
	installCRD(t)
	newHypervisor(t, "hv-check", map[string]any{
		"evicted": true, "aggregates": []string{"az-a", "gpu"}, "numInstances": 0, "hypervisorId": "hv-123",
		"conditions": []any{condition("Ready", "False", "Maintenance")},
	})
	r, err := evaluate(t, pitstopv1alpha1.CheckInstance{CheckHypervisor: &pitstopv1alpha1.CheckHypervisorCheck{Status: fields(t, `{"evicted": true, "aggregates": ["az-a", "gpu"], "numInstances": 0, "hypervisorId": "hv-123"}`)}}, "hv-check")
	if err != nil || !r.Passed {
		t.Fatalf("matching fields: %+v, %v", r, err)
	}
	r, err = evaluate(t, pitstopv1alpha1.CheckInstance{CheckHypervisor: &pitstopv1alpha1.CheckHypervisorCheck{Status: fields(t, `{"evicted": true, "traits": ["CUSTOM_X"]}`)}}, "hv-check")
	if err != nil || r.Passed || r.Reason != `Hypervisor hv-check: status.traits is [], want ["CUSTOM_X"]` || !r.NextChange.After(noon) {
		t.Fatalf("a field that differs: %+v, %v", r, err)
	}
	r, err = evaluate(t, pitstopv1alpha1.CheckInstance{HypervisorCondition: &pitstopv1alpha1.ConditionCheck{Type: "Ready", Status: "False"}}, "hv-check")
	if err != nil || !r.Passed {
		t.Fatalf("condition Ready False: %+v, %v", r, err)
	}
	r, err = evaluate(t, pitstopv1alpha1.CheckInstance{HypervisorCondition: &pitstopv1alpha1.ConditionCheck{Type: "Onboarding", Status: "True"}}, "hv-check")
	if err != nil || r.Passed || r.Reason != "Hypervisor hv-check: condition Onboarding is Unknown, want True" {
		t.Fatalf("a condition not reported: %+v, %v", r, err)
	}
	setStatus(t, "hv-check", map[string]any{"evicted": false})
	if r, _ := evaluate(t, pitstopv1alpha1.CheckInstance{CheckHypervisor: &pitstopv1alpha1.CheckHypervisorCheck{Status: fields(t, `{"evicted": true}`)}}, "hv-check"); r.Passed {
		t.Fatal("evicted: true passed on a Hypervisor no longer evicted")
	}
	if _, err := evaluate(t, pitstopv1alpha1.CheckInstance{CheckHypervisor: &pitstopv1alpha1.CheckHypervisorCheck{Status: fields(t, `{"evicted": true}`)}}, "no-such-node"); err == nil || !strings.Contains(err.Error(), "node no-such-node has no Hypervisor (kvm.cloud.sap/v1)") {
		t.Fatalf("a node without a Hypervisor: %v", err)
	}
}

// TestAFieldTheHypervisorDoesNotHaveIsRefused: names and value types are
// checked when the profile is built (at admission), naming the field.
func TestAFieldTheHypervisorDoesNotHaveIsRefused(t *testing.T) {
	for raw, want := range map[string]string{
		`{"evictd": true}`:      "checkHypervisor.status.evictd: not a status field of a Hypervisor (known: aggregates, evicted,",
		`{"evicted": "yes"}`:    `checkHypervisor.status.evicted: want a boolean, got "yes"`,
		`{"aggregates": "a,b"}`: `checkHypervisor.status.aggregates: want a list of strings, got "a,b"`,
	} {
		if _, err := check.New(pitstopv1alpha1.CheckInstance{CheckHypervisor: &pitstopv1alpha1.CheckHypervisorCheck{Status: fields(t, raw)}}, check.Deps{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", raw, err, want)
		}
	}
	if _, err := trigger.New(pitstopv1alpha1.TriggerInstance{AlterHypervisor: &pitstopv1alpha1.AlterHypervisorTrigger{Spec: fields(t, `{"maintenanceMode": "manual"}`)}}); err == nil || !strings.Contains(err.Error(), "alterHypervisor.spec.maintenanceMode: not a spec field") {
		t.Errorf("alterHypervisor with an unknown field: %v", err)
	}
}

// TestAlterHypervisorPatchesTheSpec: the named spec fields change and the
// others keep their values; a value the Hypervisor's schema refuses is the
// trigger's error.
func TestAlterHypervisorPatchesTheSpec(t *testing.T) {
	installCRD(t)
	newHypervisor(t, "hv-alter", nil)
	run := func(raw string) error {
		tr, err := trigger.New(pitstopv1alpha1.TriggerInstance{AlterHypervisor: &pitstopv1alpha1.AlterHypervisorTrigger{Spec: fields(t, raw)}})
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = tr.Run(t.Context(), trigger.Context{Node: testutil.Node("hv-alter"), Client: env.Client, Now: noon})
		return err
	}
	if err := run(`{"maintenance": "manual", "maintenanceReason": "pitstop: kernel update", "customTraits": ["CUSTOM_DRAINING"]}`); err != nil {
		t.Fatal(err)
	}
	s := spec(t, "hv-alter")
	if s["maintenance"] != "manual" || s["maintenanceReason"] != "pitstop: kernel update" || fmt.Sprint(s["customTraits"]) != "[CUSTOM_DRAINING]" || s["highAvailability"] != true {
		t.Fatalf("spec %v", s)
	}
	if err := run(`{"maintenance": "sometimes"}`); err == nil || !strings.Contains(err.Error(), "spec.maintenance") {
		t.Fatalf("a maintenance the schema refuses: %v", err)
	}
	if err := run(`{"maintenance": "manual", "maintenanceReason": ""}`); err == nil || !strings.Contains(err.Error(), "maintenanceReason must be non-empty") {
		t.Fatalf("manual without a reason: %v", err)
	}
}

// TestAProfileTakesAHypervisorThroughMaintenance runs the profile engine:
// a node that needs maintenance puts its Hypervisor into manual
// maintenance, waits in-maintenance until the Hypervisor is evicted, and
// is operational again (the maintenance lifted) once it no longer needs
// it and its Hypervisor is Ready.
func TestAProfileTakesAHypervisorThroughMaintenance(t *testing.T) {
	installCRD(t)
	ns := testutil.Namespace(t, env.Client, "hv-profile")
	testutil.Create(t, env.Client, testutil.Node("hv-node", testutil.WithLabels(map[string]string{"kvm": "yes"})))
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "hv-node"}})
	})
	newHypervisor(t, "hv-node", map[string]any{"conditions": []any{condition("Ready", "True", "Ready")}})
	mp := &pitstopv1alpha1.MaintenanceProfile{
		ObjectMeta: metav1.ObjectMeta{Name: "kvm"},
		Spec: pitstopv1alpha1.MaintenanceProfileSpec{
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kvm": "yes"}},
			Checks: []pitstopv1alpha1.CheckInstance{
				{Name: "needs", HasLabel: &pitstopv1alpha1.KeyValueCheck{Key: "needs-maintenance"}},
				{Name: "evicted", CheckHypervisor: &pitstopv1alpha1.CheckHypervisorCheck{Status: fields(t, `{"evicted": true}`)}},
				{Name: "ready", HypervisorCondition: &pitstopv1alpha1.ConditionCheck{Type: "Ready", Status: "True"}},
			},
			Triggers: []pitstopv1alpha1.TriggerInstance{
				{Name: "enter", AlterHypervisor: &pitstopv1alpha1.AlterHypervisorTrigger{Spec: fields(t, `{"maintenance": "manual", "maintenanceReason": "pitstop"}`)}},
				{Name: "leave", AlterHypervisor: &pitstopv1alpha1.AlterHypervisorTrigger{Spec: fields(t, `{"maintenance": ""}`)}},
			},
			States: pitstopv1alpha1.StatesSpec{
				Operational:         pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "needs", Next: pitstopv1alpha1.StateMaintenanceRequired}}},
				MaintenanceRequired: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "needs", Triggers: []string{"enter"}, Next: pitstopv1alpha1.StateInMaintenance}}},
				InMaintenance:       pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{{Check: "evicted && !needs && ready", Triggers: []string{"leave"}, Next: pitstopv1alpha1.StateOperational}}},
			},
		},
	}
	testutil.Create(t, env.Client, mp)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), mp) })
	testutil.StartControllers(t, env.Config, ctrl.Options{}, func(mgr ctrl.Manager) error {
		_, err := profile.Setup(mgr, profile.Options{LeaseNamespace: ns, Checks: check.Deps{Reader: mgr.GetAPIReader()}})
		return err
	})
	state := func(want pitstopv1alpha1.MaintenanceState) {
		t.Helper()
		testutil.Eventually(t, 60*time.Second, 100*time.Millisecond, func() error {
			if got := testutil.GetNode(t, env.Client, "hv-node").Labels[pitstopv1alpha1.LabelState]; got != string(want) {
				return fmt.Errorf("node is %q, want %s", got, want)
			}
			return nil
		})
	}
	state(pitstopv1alpha1.StateOperational)
	node := testutil.GetNode(t, env.Client, "hv-node")
	base := node.DeepCopy()
	node.Labels["needs-maintenance"] = "true"
	if err := env.Client.Patch(t.Context(), node, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	state(pitstopv1alpha1.StateInMaintenance)
	if s := spec(t, "hv-node"); s["maintenance"] != "manual" {
		t.Fatalf("in maintenance with spec %v", s)
	}
	// The operator evicts the instances and reports it; the node is done.
	setStatus(t, "hv-node", map[string]any{"evicted": true, "conditions": []any{condition("Ready", "False", "Evicted")}})
	node = testutil.GetNode(t, env.Client, "hv-node")
	base = node.DeepCopy()
	delete(node.Labels, "needs-maintenance")
	if err := env.Client.Patch(t.Context(), node, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if got := testutil.GetNode(t, env.Client, "hv-node").Labels[pitstopv1alpha1.LabelState]; got != string(pitstopv1alpha1.StateInMaintenance) {
		t.Fatalf("left maintenance while the Hypervisor is not Ready: %s", got)
	}
	setStatus(t, "hv-node", map[string]any{"conditions": []any{condition("Ready", "True", "Ready")}})
	state(pitstopv1alpha1.StateOperational)
	if s := spec(t, "hv-node"); s["maintenance"] != "" {
		t.Fatalf("maintenance not lifted: spec %v", s)
	}
}
