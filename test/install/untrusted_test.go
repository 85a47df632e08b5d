package install

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pitstop-dev/pitstop/internal/cloud/clusterapi"
	"github.com/pitstop-dev/pitstop/internal/install"
	"github.com/pitstop-dev/pitstop/internal/manager"
	"github.com/pitstop-dev/pitstop/internal/scheme"
	"github.com/pitstop-dev/pitstop/internal/testutil"
	"github.com/pitstop-dev/pitstop/internal/testutil/clustertest"
)

// TestUntrustedEditAccountsCannotWriteProfiles: NodeMaintenances and
// MaintenanceProfiles are cluster-scoped, so only ClusterRoleBindings to
// the built-in edit and admin roles (CI and GitOps accounts, often) would
// gain pitstop-edit through aggregation, and with it the power to cordon,
// drain, label nodes and, with the features on, replace Machines and
// reboot instances. By default, with every feature on, nothing that
// writes pitstop's objects aggregates into edit or admin; the read-only
// pitstop-view still does, and rbac.aggregateToEdit opts pitstop-edit in.
func TestUntrustedEditAccountsCannotWriteProfiles(t *testing.T) {
	// aggregatedWrites lists what the chart's ClusterRoles add, beyond
	// reading, to the built-in edit and admin roles.
	aggregatedWrites := func(set ...string) []string {
		var out []string
		for _, r := range clusterRoles(t, set...) {
			for _, to := range []string{"edit", "admin"} {
				if r.Labels["rbac.authorization.k8s.io/aggregate-to-"+to] != "true" {
					continue
				}
				for _, rule := range r.Rules {
					for _, verb := range rule.Verbs {
						if !slices.Contains([]string{"get", "list", "watch"}, verb) {
							out = append(out, r.Name+" into "+to+": "+verb)
						}
					}
				}
			}
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	if got := aggregatedWrites(testutil.AllFeatures()...); len(got) != 0 {
		t.Errorf("with the defaults, ClusterRoles aggregate writes into the built-in roles: %v", got)
	}
	for _, r := range clusterRoles(t) {
		if r.Name == "pitstop-view" && (r.Labels["rbac.authorization.k8s.io/aggregate-to-view"] != "true" || r.Labels["rbac.authorization.k8s.io/aggregate-to-edit"] != "true") {
			t.Errorf("pitstop-view no longer lets view and edit read pitstop's objects: %v", r.Labels)
		}
	}
	got := aggregatedWrites("rbac.aggregateToEdit=true")
	if !slices.Contains(got, "pitstop-edit into edit: create") || !slices.Contains(got, "pitstop-edit into admin: delete") {
		t.Errorf("rbac.aggregateToEdit=true: aggregated writes %v, want pitstop-edit's in edit and admin", got)
	}
}

// clusterRoles are the ClusterRoles of the chart rendered with set.
func clusterRoles(t *testing.T, set ...string) []*rbacv1.ClusterRole {
	t.Helper()
	var out []*rbacv1.ClusterRole
	for _, obj := range ofKind(testutil.RenderChart(t, set...), "ClusterRole") {
		r := &rbacv1.ClusterRole{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// TestUntrustedChartGrantsPowersOnlyWhereAValueSays renders the chart with
// every feature on. pitstop gets no Secret read, no BareMetalHost or
// Cluster API Machine write cluster-wide: only in clusterAPI.namespaces
// (or everywhere with clusterAPI.allNamespaces, which the chart never
// assumes: clusterAPI without either is refused, naming them). The cloud
// events delete Machines and resize MachineSets only in
// machineAPI.namespace. Hypervisors are patched only with
// kvm.alterHypervisor.
func TestUntrustedChartGrantsPowersOnlyWhereAValueSays(t *testing.T) {
	granted := grantedToPitstop(t, testutil.RenderChart(t, testutil.AllFeatures()...))
	listed := map[string]bool{"in " + namespace: true}
	for _, ns := range testutil.ClusterAPINamespaces {
		listed["in "+ns] = true
	}
	for _, g := range granted {
		_, scope, _ := strings.Cut(g, " ")
		scope, grant, _ := strings.Cut(scope, ": ")
		switch {
		case strings.Contains(grant, " core/secrets ") && !listed[scope] && scope != "in openshift-machine-api":
			t.Errorf("a Secret read outside the namespaces listed: %s", g)
		case (strings.Contains(grant, " metal3.io/") || strings.Contains(grant, " cluster.x-k8s.io/")) && !listed[scope]:
			t.Errorf("a Cluster API or Metal3 grant outside clusterAPI.namespaces: %s", g)
		case strings.HasPrefix(g, "pitstop-cloud-events") && (grant == "delete machine.openshift.io/machines name=*" || grant == "patch machine.openshift.io/machines name=*" || grant == "update machine.openshift.io/machinesets name=*") && scope != "in openshift-machine-api":
			t.Errorf("the cloud events write Machines outside machineAPI.namespace: %s", g)
		}
	}
	if !slices.Contains(granted, "pitstop-core-alter-hypervisors cluster-wide: patch kvm.cloud.sap/hypervisors name=*") {
		t.Error("kvm.alterHypervisor=true does not grant patch on Hypervisors")
	}

	var withoutKVM []string
	for _, s := range testutil.AllFeatures() {
		if !strings.HasPrefix(s, "kvm.") {
			withoutKVM = append(withoutKVM, s)
		}
	}
	for _, g := range grantedToPitstop(t, testutil.RenderChart(t, withoutKVM...)) {
		if strings.Contains(g, "patch kvm.cloud.sap/hypervisors") {
			t.Errorf("Hypervisors patched without kvm.alterHypervisor: %s", g)
		}
	}

	_, err := testutil.Helm(t, "template", "pitstop", repoPath(t, "charts", "pitstop"), "--set", "clusterAPI.enabled=true")
	if err == nil || !strings.Contains(err.Error(), "clusterAPI.namespaces") || !strings.Contains(err.Error(), "clusterAPI.allNamespaces") {
		t.Errorf("clusterAPI without namespaces: got %v, want a refusal naming clusterAPI.namespaces and clusterAPI.allNamespaces", err)
	}
	all := grantedToPitstop(t, testutil.RenderChart(t, "clusterAPI.enabled=true", "clusterAPI.allNamespaces=true"))
	if !slices.Contains(all, "pitstop-cluster-api-namespaced cluster-wide: get core/secrets name=*") {
		t.Errorf("clusterAPI.allNamespaces=true does not grant reading the kubeconfig Secrets everywhere: %v", all)
	}
	d := deployment(t, testutil.RenderChart(t, "clusterAPI.enabled=true", "clusterAPI.allNamespaces=true"))
	assertArgs(t, d, []string{"--cluster-api"}, []string{"--cluster-api-namespaces"})
}

// TestUntrustedServiceAccountReadsSecretsOnlyInListedNamespaces applies
// the chart's RBAC, every feature on, to a real API server and acts as
// pitstop's ServiceAccount: it reads a kubeconfig Secret in a namespace of
// clusterAPI.namespaces, and is refused one in a tenant's namespace; the
// API server's SubjectAccessReview says the same of BareMetalHost patches.
// The manager, run as that ServiceAccount with --cluster-api-namespaces,
// watches Machines there only: it serves the listed namespace's Machine
// (its kubeconfig Secret is missing, which it reports on the Machine) and
// never touches the tenant's.
func TestUntrustedServiceAccountReadsSecretsOnlyInListedNamespaces(t *testing.T) {
	env, err := testutil.StartEnv()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c := env.Client
	if err := install.CRDs(t.Context(), c, capiCRDs(t)); err != nil {
		t.Fatal(err)
	}
	listed, tenant := testutil.ClusterAPINamespaces[0], "tenant"
	testutil.Namespace(t, c, listed)
	testutil.Namespace(t, c, tenant)
	sa := testutil.ServiceAccountConfig(t, env.Config, c)
	for _, ns := range []string{listed, tenant} {
		testutil.Create(t, c, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop-kubeconfig"}, Data: map[string][]byte{"value": []byte("apiVersion: v1\nkind: Config\n")}})
	}
	asPitstop, err := client.New(sa, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	if err := asPitstop.Get(t.Context(), client.ObjectKey{Namespace: listed, Name: "shop-kubeconfig"}, &corev1.Secret{}); err != nil {
		t.Errorf("pitstop cannot read the kubeconfig Secret in %s, a namespace of clusterAPI.namespaces: %v", listed, err)
	}
	if err := asPitstop.Get(t.Context(), client.ObjectKey{Namespace: tenant, Name: "shop-kubeconfig"}, &corev1.Secret{}); !apierrors.IsForbidden(err) {
		t.Errorf("pitstop reading a Secret in namespace %s, not listed: got %v, want Forbidden", tenant, err)
	}
	for ns, want := range map[string]bool{listed: true, tenant: false} {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "system:serviceaccount:" + namespace + ":pitstop",
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: ns, Verb: "patch", Group: "metal3.io", Resource: "baremetalhosts", Name: "host-0",
			},
		}}
		if err := c.Create(t.Context(), sar); err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed != want {
			t.Errorf("pitstop may patch a BareMetalHost in %s: %v, want %v", ns, sar.Status.Allowed, want)
		}
	}

	// pitstop, as its ServiceAccount, serves the listed namespace alone.
	machines := map[string]*clusterv1.Machine{}
	for _, ns := range []string{listed, tenant} {
		m := &clusterv1.Machine{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "worker-0",
				Labels: map[string]string{clusterapi.LabelEnabled: "true", clusterv1.ClusterNameLabel: "nokube"}},
			Spec: clusterv1.MachineSpec{
				ClusterName:       "nokube",
				Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To("bootstrap")},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DockerMachine", Name: "worker-0"},
			},
		}
		testutil.Create(t, c, m)
		machines[ns] = m
	}
	clustertest.StartManager(t, env.Config, c, clustertest.Options{AsServiceAccount: true, Tune: func(o *manager.Options) {
		o.ClusterAPI, o.ClusterAPINamespaces = true, testutil.ClusterAPINamespaces
	}})
	reported := func(ns string) *metav1.Condition {
		m := &clusterv1.Machine{}
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(machines[ns]), m); err != nil {
			t.Fatal(err)
		}
		return meta.FindStatusCondition(m.Status.Conditions, clusterapi.ConditionWorkloadReachable)
	}
	for deadline := time.Now().Add(time.Minute); reported(listed) == nil; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the Machine in %s, a namespace pitstop serves, was not reported on within a minute", listed)
		}
	}
	if cond := reported(listed); cond.Status != metav1.ConditionFalse || !strings.Contains(cond.Message, "nokube") {
		t.Errorf("the Machine in %s: %+v, want the missing workload cluster reported", listed, cond)
	}
	if cond := reported(tenant); cond != nil {
		t.Errorf("pitstop acted on a Machine in %s, a namespace it does not serve: %+v", tenant, cond)
	}
}

// capiCRDs are the Cluster API Machine and Metal3 BareMetalHost CRDs the
// bridge's own tests install.
func capiCRDs(t *testing.T) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	paths, err := filepath.Glob(repoPath(t, "internal", "controller", "capi", "testdata", "crds", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no CRDs in internal/controller/capi/testdata/crds: %v", err)
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		err = yaml.NewYAMLOrJSONDecoder(f, 4096).Decode(crd)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		crds = append(crds, crd)
	}
	return crds
}
