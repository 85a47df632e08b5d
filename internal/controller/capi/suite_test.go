package capi_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/config"
	"github.com/pitstop-dev/pitstop/internal/cloud/clusterapi"
	"github.com/pitstop-dev/pitstop/internal/controller/capi"
	"github.com/pitstop-dev/pitstop/internal/explain"
	"github.com/pitstop-dev/pitstop/internal/fleet"
	"github.com/pitstop-dev/pitstop/internal/localcluster"
	"github.com/pitstop-dev/pitstop/internal/plugin/check"
	"github.com/pitstop-dev/pitstop/internal/scheme"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// Two API servers, as Cluster API has them: the management cluster, with
// the Machine and BareMetalHost CRDs, and one workload cluster.
var (
	mgmt, workload *envtest.Environment
	mgmtClient     client.Client
	wlClient       client.Client
	wlClientset    kubernetes.Interface
	mgmtConfig     *rest.Config
	wlConfig       *rest.Config
)

const interval = 50 * time.Millisecond

func TestMain(m *testing.M) {
	flag.Parse()
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	// A fuzzing worker (go test -fuzz starts one per core) runs only a
	// fuzz target's inputs and starts no API server: it is killed when
	// fuzzing ends, and would leave them running (as testutil.Main).
	if worker := flag.Lookup("test.fuzzworker"); worker != nil && worker.Value.String() == "true" {
		return m.Run(), nil
	}
	bin := localcluster.DefaultBinDir()
	mgmt = &envtest.Environment{BinaryAssetsDirectory: bin, CRDDirectoryPaths: []string{filepath.Join("testdata", "crds")}, ErrorIfCRDPathMissing: true}
	crds, err := config.CRDs()
	if err != nil {
		return 0, err
	}
	// The workload cluster runs pitstop: its CRDs are there.
	workload = &envtest.Environment{BinaryAssetsDirectory: bin, CRDs: crds}
	if mgmtConfig, err = mgmt.Start(); err != nil {
		return 0, fmt.Errorf("starting the management API server: %w", err)
	}
	defer func() { _ = mgmt.Stop() }()
	if wlConfig, err = workload.Start(); err != nil {
		return 0, fmt.Errorf("starting the workload API server: %w", err)
	}
	defer func() { _ = workload.Stop() }()
	if mgmtClient, err = client.New(mgmtConfig, client.Options{Scheme: scheme.New()}); err != nil {
		return 0, err
	}
	if wlClient, err = client.New(wlConfig, client.Options{Scheme: scheme.New()}); err != nil {
		return 0, err
	}
	if wlClientset, err = kubernetes.NewForConfig(wlConfig); err != nil {
		return 0, err
	}
	return m.Run(), nil
}

var worlds atomic.Int32

// world is one test's cluster: a namespace of the management cluster with
// the kubeconfig Secret of workload cluster "wl", and pitstop's bridge
// running.
type world struct {
	t       *testing.T
	ns      string
	cluster string
	ctrl    *testutil.Controllers
	metal3  bool
	// recheck is the bridge's SecretRecheck (0: its default).
	recheck time.Duration
	// clusters are the running bridge's connections.
	clusters *clusterapi.Clusters
}

func newWorld(t *testing.T, name string, metal3 bool, edit ...func(*world)) *world {
	t.Helper()
	w := &world{t: t, ns: testutil.Namespace(t, mgmtClient, fmt.Sprintf("%s-%d", name, worlds.Add(1))), cluster: "wl", metal3: metal3}
	for _, e := range edit {
		e(w)
	}
	w.writeKubeconfig(adminKubeconfig())
	w.start()
	return w
}

func (w *world) start() {
	w.t.Helper()
	w.ctrl = testutil.StartControllers(w.t, mgmtConfig, ctrl.Options{}, func(mgr ctrl.Manager) error {
		var err error
		w.clusters, err = capi.Setup(mgr, capi.Options{Metal3: w.metal3, SecretRecheck: w.recheck})
		return err
	})
}

// restart stops the bridge and starts a new one, as a new pitstop would.
func (w *world) restart() {
	w.t.Helper()
	w.ctrl.Stop()
	w.start()
}

// adminKubeconfig reaches the workload cluster as its admin.
func adminKubeconfig() []byte {
	return kubeconfig(func(a *clientcmdapi.AuthInfo) {
		a.ClientCertificateData, a.ClientKeyData = wlConfig.CertData, wlConfig.KeyData
	})
}

// kubeconfig is a kubeconfig of the workload cluster with the given
// credentials.
func kubeconfig(auth func(*clientcmdapi.AuthInfo)) []byte {
	return kubeconfigAt(wlConfig.Host, auth)
}

// kubeconfigAt is a kubeconfig of an API server at server.
func kubeconfigAt(server string, auth func(*clientcmdapi.AuthInfo)) []byte {
	a := &clientcmdapi.AuthInfo{}
	auth(a)
	data, err := clientcmd.Write(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"wl": {Server: server, CertificateAuthorityData: wlConfig.CAData}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"wl": a},
		Contexts:       map[string]*clientcmdapi.Context{"wl": {Cluster: "wl", AuthInfo: "wl"}},
		CurrentContext: "wl",
	})
	if err != nil {
		panic(err)
	}
	return data
}

// writeKubeconfig creates or updates the cluster's kubeconfig Secret.
func (w *world) writeKubeconfig(data []byte) {
	w.t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: w.cluster + "-kubeconfig",
		Labels: map[string]string{clusterv1.ClusterNameLabel: w.cluster}}, Type: "cluster.x-k8s.io/secret"}
	_, err := ctrl.CreateOrUpdate(w.t.Context(), mgmtClient, s, func() error {
		s.Data = map[string][]byte{"value": data}
		return nil
	})
	if err != nil {
		w.t.Fatal(err)
	}
}

// machine creates an opted-in Machine of the cluster (with a finalizer
// of the test's, so that its deletion can be watched) whose Node is node,
// and the Node in the workload cluster with labels.
func (w *world) machine(name, node string, nodeLabels map[string]string, edit ...func(*clusterv1.Machine)) *clusterv1.Machine {
	w.t.Helper()
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name, Finalizers: []string{"example.com/test"},
			Labels: map[string]string{clusterapi.LabelEnabled: "true", clusterv1.ClusterNameLabel: w.cluster}},
		Spec: clusterv1.MachineSpec{
			ClusterName:       w.cluster,
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To("bootstrap")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DockerMachine", Name: name},
		},
	}
	for _, e := range edit {
		e(m)
	}
	testutil.Create(w.t, mgmtClient, m)
	w.t.Cleanup(func() { w.release(name) })
	if node != "" {
		n := testutil.Node(node, testutil.WithLabels(nodeLabels))
		n.Annotations = map[string]string{clusterv1.MachineAnnotation: name, clusterv1.ClusterNamespaceAnnotation: w.ns}
		if err := wlClient.Create(w.t.Context(), n); err != nil {
			w.t.Fatal(err)
		}
		w.t.Cleanup(func() { _ = wlClient.Delete(w.t.Context(), n) })
		base := m.DeepCopy()
		m.Status.NodeRef = clusterv1.MachineNodeReference{Name: node}
		if err := mgmtClient.Status().Patch(w.t.Context(), m, client.MergeFrom(base)); err != nil {
			w.t.Fatal(err)
		}
	}
	return m
}

// release takes the test's finalizer off, so a deleted Machine goes.
func (w *world) release(name string) {
	m := &clusterv1.Machine{}
	if err := mgmtClient.Get(w.t.Context(), client.ObjectKey{Namespace: w.ns, Name: name}, m); err != nil {
		return
	}
	_ = mgmtClient.Patch(w.t.Context(), m, client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`)))
}

func (w *world) get(name string) *clusterv1.Machine {
	w.t.Helper()
	m := &clusterv1.Machine{}
	if err := mgmtClient.Get(w.t.Context(), client.ObjectKey{Namespace: w.ns, Name: name}, m); err != nil {
		w.t.Fatal(err)
	}
	return m
}

// patchMachine merges labels or annotations (nil values remove).
func (w *world) patchMachine(name string, meta map[string]map[string]*string) {
	w.t.Helper()
	data, _ := json.Marshal(map[string]any{"metadata": meta})
	if err := mgmtClient.Patch(w.t.Context(), &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name}}, client.RawPatch(types.MergePatchType, data)); err != nil {
		w.t.Fatal(err)
	}
}

// labelNode merges workload Node labels (nil values remove).
func labelNode(t *testing.T, node string, labels map[string]*string) {
	t.Helper()
	data, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	if err := wlClient.Patch(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, client.RawPatch(types.MergePatchType, data)); err != nil {
		t.Fatal(err)
	}
}

func nodeLabels(t *testing.T, node string) map[string]string {
	t.Helper()
	n := &corev1.Node{}
	if err := wlClient.Get(t.Context(), client.ObjectKey{Name: node}, n); err != nil {
		t.Fatal(err)
	}
	return n.Labels
}

func eventually(t *testing.T, check func() error) {
	t.Helper()
	testutil.Eventually(t, 20*time.Second, interval, check)
}

// hookIs waits for the Machine's hook to be there (want) or gone.
func (w *world) hookIs(name string, want bool) {
	w.t.Helper()
	eventually(w.t, func() error {
		v, ok := w.get(name).Annotations[clusterapi.AnnotationHook]
		if ok != want || (want && v != clusterapi.HookOwner) {
			return fmt.Errorf("hook %q present %v, want present %v", v, ok, want)
		}
		return nil
	})
}

// nodeLabelIs waits for a workload Node label to have value ("" for
// absent).
func nodeLabelIs(t *testing.T, node, key, value string) {
	t.Helper()
	eventually(t, func() error {
		if got := nodeLabels(t, node)[key]; got != value {
			return fmt.Errorf("node %s label %s = %q, want %q", node, key, got, value)
		}
		return nil
	})
}

var stateLabel = map[string]string{pitstopv1alpha1.LabelState: string(pitstopv1alpha1.StateOperational)}

// bareMetalHost creates a host in the namespace ns ("": the world's),
// provisioned for the Metal3Machine consumer ("": for none), as Metal3
// records it in spec.consumerRef.
func (w *world) bareMetalHost(ns, name, consumer string) {
	w.t.Helper()
	if ns == "" {
		ns = w.ns
	}
	h := &unstructured.Unstructured{}
	h.SetAPIVersion("metal3.io/v1alpha1")
	h.SetKind("BareMetalHost")
	h.SetNamespace(ns)
	h.SetName(name)
	if consumer != "" {
		h.Object["spec"] = map[string]any{"consumerRef": map[string]any{
			"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "Metal3Machine", "name": consumer, "namespace": ns,
		}}
	}
	if err := mgmtClient.Create(w.t.Context(), h); err != nil {
		w.t.Fatal(err)
	}
}

// rebootAnnotated says whether the host carries the reboot annotation.
func (w *world) rebootAnnotated(name string) bool {
	w.t.Helper()
	return rebootAnnotatedIn(w.t, w.ns, name)
}

// rebootAnnotatedIn says whether the host ns/name carries the reboot
// annotation.
func rebootAnnotatedIn(t *testing.T, ns, name string) bool {
	t.Helper()
	h := &unstructured.Unstructured{}
	h.SetAPIVersion("metal3.io/v1alpha1")
	h.SetKind("BareMetalHost")
	if err := mgmtClient.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, h); err != nil {
		t.Fatal(err)
	}
	_, ok := h.GetAnnotations()[clusterapi.AnnotationReboot]
	return ok
}

// serviceAccountKubeconfig is a kubeconfig with a token of a workload
// ServiceAccount (cluster-admin), bound to a Secret: deleting the Secret
// revokes the token.
func serviceAccountKubeconfig(t *testing.T, name string) (kubeconfigData []byte, revoke func()) {
	t.Helper()
	ctx := t.Context()
	ns := "kube-system"
	if _, err := wlClientset.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "pitstop-mgmt"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "pitstop-mgmt"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "pitstop-mgmt", Namespace: ns}}}
	if _, err := wlClientset.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	bound, err := wlClientset.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := wlClientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "pitstop-mgmt", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To[int64](3600),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Secret", APIVersion: "v1", Name: bound.Name, UID: bound.UID},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data := kubeconfig(func(a *clientcmdapi.AuthInfo) { a.Token = tr.Status.Token })
	return data, func() {
		if err := wlClientset.CoreV1().Secrets(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// The API server may still accept the token for a few seconds
		// from its cache: revoked is when it no longer does.
		cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
		if err != nil {
			t.Fatal(err)
		}
		cs := kubernetes.NewForConfigOrDie(cfg)
		testutil.Eventually(t, 30*time.Second, 200*time.Millisecond, func() error {
			if _, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1}); !apierrors.IsUnauthorized(err) {
				return fmt.Errorf("the token still works (%v)", err)
			}
			return nil
		})
	}
}

// explainMachine is `pitstop explain machine NAMESPACE/NAME` run against
// the management cluster, as text.
func explainMachine(t *testing.T, ref string) string {
	t.Helper()
	report, err := explain.Machine(t.Context(), mgmtClient, mgmtClient, fleet.NewEvaluator(mgmtClient, check.Deps{}), ref, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	if err := report.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	return text.String()
}
