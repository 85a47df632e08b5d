package install

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// allowlist is every permission the chart may grant pitstop with every
// feature on, one line each. Widening a role fails the test until this
// file says so in review; narrowing one does too, so it stays exact.
const allowlist = "testdata/rbac-allowlist.txt"

// forUsers are the chart's ClusterRoles for people: pitstop-view and
// pitstop-edit aggregate into the built-in view and edit roles, and the
// others let their users read the dashboard and the metrics.
var forUsers = []string{"pitstop-view", "pitstop-edit", "pitstop-dashboard-viewer", "pitstop-metrics-reader"}

// TestRBACIsTheAllowlist renders the chart with every feature on and
// compares each verb it grants pitstop's ServiceAccount with the allowlist.
// Set PITSTOP_UPDATE_ALLOWLIST=1 to rewrite the file from the chart.
func TestRBACIsTheAllowlist(t *testing.T) {
	objs := testutil.RenderChart(t, "machineAPI.enabled=true", "machineAPI.providers={aws,kwok}", "medik8sCompat.enabled=true", "cloudEvents.enabled=true", "clusterAPI.enabled=true", "clusterAPI.metal3=true", "smcCompat.enabled=true")
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
			scope := "cluster-wide"
			if kind == "Role" {
				scope = "in " + obj.GetNamespace()
			} else if b := find(objs, "RoleBinding", "openshift-machine-api", obj.GetName()); b != nil {
				scope = "in openshift-machine-api"
			}
			granted = append(granted, grants(obj.GetName(), scope, role.Rules)...)
		}
	}
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
