package testutil

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pitstop-dev/pitstop/internal/localcluster"
)

// ChartNamespace is where the tests install pitstop's chart, as
// docs/install.md does.
const ChartNamespace = "pitstop-system"

// Tool is the path of a binary that `make tools` builds into bin/; the
// test fails if it is missing.
func Tool(t testing.TB, name string) string {
	t.Helper()
	path := filepath.Join(localcluster.DefaultBinDir(), name)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s is missing: `make tools` builds it (%v)", name, err)
	}
	return path
}

// Helm runs bin/helm and returns its standard output, or an error with
// what it printed.
func Helm(t testing.TB, args ...string) (string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(Tool(t, "helm"), args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// RenderChart runs `helm template` on charts/pitstop in ChartNamespace,
// CRDs included, with the values given as --set pairs, and decodes every
// object.
func RenderChart(t testing.TB, set ...string) []*unstructured.Unstructured {
	t.Helper()
	root, ok := localcluster.RepoRoot()
	if !ok {
		t.Fatal("not in a pitstop checkout")
	}
	args := []string{"template", "pitstop", filepath.Join(root, "charts", "pitstop"), "--namespace", ChartNamespace, "--include-crds"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := Helm(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := DecodeObjects(out)
	if err != nil {
		t.Fatalf("decoding the rendered chart: %v", err)
	}
	return objs
}

// DecodeObjects reads a multi-document YAML stream into objects, skipping
// empty documents.
func DecodeObjects(stream string) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(stream), 4096)
	for {
		obj := &unstructured.Unstructured{}
		err := dec.Decode(&obj.Object)
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
}

// ClusterAPINamespaces are the namespaces of the Cluster API Clusters that
// the chart, rendered with AllFeatures, serves (clusterAPI.namespaces): a
// manager started as its ServiceAccount with ClusterAPI serves them through
// manager.Options.ClusterAPINamespaces.
var ClusterAPINamespaces = []string{"clusters", "dash"}

// AllFeatures are the chart values that turn every feature on.
func AllFeatures() []string {
	return []string{
		"machineAPI.enabled=true", "machineAPI.providers={aws,kwok}", "medik8sCompat.enabled=true", "cloudEvents.enabled=true",
		"clusterAPI.enabled=true", "clusterAPI.metal3=true", "clusterAPI.namespaces={" + strings.Join(ClusterAPINamespaces, ",") + "}",
		"smcCompat.enabled=true", "kvm.alterHypervisor=true", "seedConfig.enabled=true", "seedConfig.configMap=maintenance",
	}
}

// rbacKinds are what ServiceAccountConfig applies of the chart.
var rbacKinds = []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}

// ServiceAccountConfig applies the chart's ServiceAccount and RBAC, with
// every feature on, to the API server c talks to, and returns a
// configuration of cfg's API server that authenticates as that
// ServiceAccount with a token from the TokenRequest API, as the chart's pod
// would. Namespaces the RBAC names are created if missing.
func ServiceAccountConfig(t testing.TB, cfg *rest.Config, c client.Client) *rest.Config {
	t.Helper()
	objs := RenderChart(t, AllFeatures()...)
	for _, obj := range objs {
		if !slices.Contains(rbacKinds, obj.GetKind()) {
			continue
		}
		if ns := obj.GetNamespace(); ns != "" {
			err := c.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
		}
		obj.SetManagedFields(nil)
		if err := c.Patch(t.Context(), obj, client.Apply, client.FieldOwner("pitstop-test"), client.ForceOwnership); err != nil {
			t.Fatalf("applying %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
	return ServiceAccountToken(t, cfg)
}

// ServiceAccountToken returns a configuration of cfg's API server that
// authenticates as the chart's ServiceAccount with a token from the
// TokenRequest API, as the chart's pod would.
func ServiceAccountToken(t testing.TB, cfg *rest.Config) *rest.Config {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sa := rest.AnonymousClientConfig(cfg)
	sa.BearerToken = TokenOf(t, cs, ChartNamespace, "pitstop")
	return sa
}

// TokenOf returns a token of ServiceAccount ns/name for an hour, from the
// TokenRequest API.
func TokenOf(t testing.TB, cs kubernetes.Interface, ns, name string) string {
	t.Helper()
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	tok, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(t.Context(), name, req, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("requesting a token for ServiceAccount %s/%s: %v", ns, name, err)
	}
	return tok.Status.Token
}
