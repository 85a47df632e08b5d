package install

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// allowlist is every permission the chart may grant pitstop with every
// feature on, one line each. Widening a role fails the test until this
// file says so in review; narrowing one does too, so it stays exact.
const allowlist = "testdata/rbac-allowlist.txt"

// forUsers are the chart's ClusterRoles for people: pitstop-view
// aggregates into the built-in view, edit and admin roles, pitstop-edit is
// bound by administrators (or aggregated into edit and admin with
// rbac.aggregateToEdit), and the others let their users read the dashboard
// and the metrics.
var forUsers = []string{"pitstop-view", "pitstop-edit", "pitstop-dashboard-viewer", "pitstop-metrics-reader"}

// TestRBACIsTheAllowlist renders the chart with every feature on and
// compares each verb it grants pitstop's ServiceAccount, where it grants
// it, with the allowlist. Set PITSTOP_UPDATE_ALLOWLIST=1 to rewrite the file
// from the chart.
func TestRBACIsTheAllowlist(t *testing.T) {
	granted := grantedToPitstop(t, testutil.RenderChart(t, testutil.AllFeatures()...))
	slices.Sort(granted)
	if os.Getenv("PITSTOP_UPDATE_ALLOWLIST") != "" {
		if err := os.WriteFile(allowlist, []byte(strings.Join(granted, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(allowlist)
	if err != nil {
		t.Fatal(err)
	}
	allowed := strings.Split(strings.TrimSpace(string(data)), "\n")
	for _, g := range granted {
		if !slices.Contains(allowed, g) {
			t.Errorf("granted but not in %s: %s", allowlist, g)
		}
	}
	for _, a := range allowed {
		if !slices.Contains(granted, a) {
			t.Errorf("in %s but no longer granted: %s", allowlist, a)
		}
	}
}

// grantedToPitstop spells out every verb the chart's roles grant pitstop's
// ServiceAccount, one line each with the role and where it holds: a Role
// in its namespace, a ClusterRole cluster-wide through a
// ClusterRoleBinding or in a namespace through a RoleBinding there.
func grantedToPitstop(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	var granted []string
	for _, kind := range []string{"ClusterRole", "Role"} {
		for _, obj := range ofKind(objs, kind) {
			if slices.Contains(forUsers, obj.GetName()) {
				continue // bound to people (and Prometheus), never to pitstop
			}
			role := &rbacv1.ClusterRole{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, role); err != nil {
				t.Fatal(err)
			}
			for _, scope := range scopesOf(t, objs, kind, obj) {
				granted = append(granted, grants(obj.GetName(), scope, role.Rules)...)
			}
		}
	}
	return granted
}

// scopesOf says where the bindings to pitstop's ServiceAccount put a role:
// "cluster-wide" or "in NAMESPACE", once per binding.
func scopesOf(t *testing.T, objs []*unstructured.Unstructured, kind string, role *unstructured.Unstructured) []string {
	t.Helper()
	var scopes []string
	for _, bindingKind := range []string{"ClusterRoleBinding", "RoleBinding"} {
		for _, obj := range ofKind(objs, bindingKind) {
			b := &rbacv1.RoleBinding{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, b); err != nil {
				t.Fatal(err)
			}
			if b.RoleRef.Kind != kind || b.RoleRef.Name != role.GetName() || (kind == "Role" && b.Namespace != role.GetNamespace()) {
				continue
			}
			if !slices.Contains(b.Subjects, rbacv1.Subject{Kind: "ServiceAccount", Name: "pitstop", Namespace: namespace}) {
				t.Errorf("%s %s binds %s %s to %v, not to pitstop's ServiceAccount alone", bindingKind, b.Name, kind, role.GetName(), b.Subjects)
			}
			if bindingKind == "ClusterRoleBinding" {
				scopes = append(scopes, "cluster-wide")
			} else {
				scopes = append(scopes, "in "+b.Namespace)
			}
		}
	}
	if len(scopes) == 0 {
		t.Errorf("%s %s is bound to nothing", kind, role.GetName())
	}
	return scopes
}

// grants spells out each verb a role's rules grant, one line each.
func grants(role, scope string, rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
		for _, u := range r.NonResourceURLs {
			for _, v := range r.Verbs {
				out = append(out, fmt.Sprintf("%s %s: %s nonResourceURL %s", role, scope, v, u))
			}
		}
		names := r.ResourceNames
		if len(names) == 0 {
			names = []string{"*"}
		}
		for _, g := range r.APIGroups {
			if g == "" {
				g = "core"
			}
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					for _, n := range names {
						out = append(out, fmt.Sprintf("%s %s: %s %s/%s name=%s", role, scope, v, g, res, n))
					}
				}
			}
		}
	}
	return out
}
