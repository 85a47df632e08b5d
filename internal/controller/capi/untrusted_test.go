package capi_test

import (
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/cloud/clusterapi"
	"github.com/pitstop-dev/pitstop/internal/explain"
	"github.com/pitstop-dev/pitstop/internal/fleet"
	"github.com/pitstop-dev/pitstop/internal/plugin/check"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// bait is a server that no refused kubeconfig may reach: it counts the
// requests it gets and keeps their Authorization headers.
type bait struct {
	*httptest.Server
	hits atomic.Int32
	auth atomic.Value
}

func newBait(t *testing.T, tls bool) *bait {
	b := &bait{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.hits.Add(1)
		b.auth.Store(r.Method + " " + r.URL.Path + " " + r.Header.Get("Authorization"))
		http.Error(w, "bait", http.StatusForbidden)
	})
	if tls {
		b.Server = httptest.NewTLSServer(h)
	} else {
		b.Server = httptest.NewServer(h)
	}
	t.Cleanup(b.Close)
	return b
}

// caPEM is the CA of a TLS test server, as a kubeconfig carries it.
func caPEM(s *httptest.Server) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
}

// kubeconfigFor is a kubeconfig of server, trusting ca, edited.
func kubeconfigFor(server string, ca []byte, cluster func(*clientcmdapi.Cluster), user func(*clientcmdapi.AuthInfo)) []byte {
	c := &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	a := &clientcmdapi.AuthInfo{}
	if cluster != nil {
		cluster(c)
	}
	user(a)
	data, err := clientcmd.Write(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"wl": c},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"wl": a},
		Contexts:       map[string]*clientcmdapi.Context{"wl": {Cluster: "wl", AuthInfo: "wl"}},
		CurrentContext: "wl",
	})
	if err != nil {
		panic(err)
	}
	return data
}

// writeKubeconfigOf creates or updates the kubeconfig Secret of cluster.
func (w *world) writeKubeconfigOf(cluster string, data []byte) {
	w.t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: cluster + "-kubeconfig",
		Labels: map[string]string{clusterv1.ClusterNameLabel: cluster}}, Type: "cluster.x-k8s.io/secret"}
	if _, err := ctrl.CreateOrUpdate(w.t.Context(), mgmtClient, s, func() error {
		s.Data = map[string][]byte{"value": data}
		return nil
	}); err != nil {
		w.t.Fatal(err)
	}
}

// machineOf creates an opted-in Machine of cluster whose status names
// the Node nodeRef (which need not exist anywhere).
func (w *world) machineOf(cluster, name, nodeRef string) {
	w.t.Helper()
	w.machine(name, "", nil, func(m *clusterv1.Machine) {
		m.Spec.ClusterName = cluster
		m.Labels[clusterv1.ClusterNameLabel] = cluster
	})
	m := w.get(name)
	base := m.DeepCopy()
	m.Status.NodeRef = clusterv1.MachineNodeReference{Name: nodeRef}
	if err := mgmtClient.Status().Patch(w.t.Context(), m, client.MergeFrom(base)); err != nil {
		w.t.Fatal(err)
	}
}

// connected says whether the running bridge holds a connection to the
// world's cluster named cluster that has listed its Nodes. (The bridge
// also serves the opted-in Machines other tests left behind, so its
// total count says little.)
func (w *world) connected(cluster string) bool {
	w.t.Helper()
	views, err := w.clusters.View(w.t.Context(), mgmtClient)
	if err != nil {
		w.t.Fatal(err)
	}
	for _, v := range views {
		if v.Cluster == w.ns+"/"+cluster {
			return v.Connected
		}
	}
	return false
}

// conditionOf waits for the Machine's reachability condition to be False
// with reason and a message holding every part.
func (w *world) conditionOf(name, reason string, timeout time.Duration, parts ...string) {
	w.t.Helper()
	testutil.Eventually(w.t, timeout, interval, func() error {
		c := meta.FindStatusCondition(w.get(name).Status.Conditions, clusterapi.ConditionWorkloadReachable)
		if c == nil || c.Status != metav1.ConditionFalse || (reason != "" && c.Reason != reason) {
			return fmt.Errorf("machine %s: condition %+v, want False with reason %q", name, c, reason)
		}
		for _, p := range parts {
			if !strings.Contains(c.Message, p) {
				return fmt.Errorf("machine %s: condition message %q lacks %q", name, c.Message, p)
			}
		}
		return nil
	})
}

// eventWith waits for an Event of reason on the Machine whose note holds
// every part.
func (w *world) eventWith(machine, reason string, parts ...string) {
	w.t.Helper()
	testutil.Eventually(w.t, 20*time.Second, interval, func() error {
		events := &eventsv1.EventList{}
		if err := mgmtClient.List(w.t.Context(), events, client.InNamespace(w.ns)); err != nil {
			return err
		}
	next:
		for _, e := range events.Items {
			if e.Reason != reason || e.Regarding.Name != machine {
				continue
			}
			for _, p := range parts {
				if !strings.Contains(e.Note, p) {
					continue next
				}
			}
			return nil
		}
		return fmt.Errorf("no %s Event on %s holding %q", reason, machine, parts)
	})
}

// TestUntrustedKubeconfigIsRefusedOnBothPaths: a kubeconfig Secret that
// asks pitstop to run a program, use an auth plugin, read a file of its
// own (a token, a client certificate or key, a CA), go through a proxy,
// impersonate, or talk plain http is refused before any client is built:
// on the controller path the Machine says which Secret and which field
// (condition reason KubeconfigRefused, Warning Event), on the explain
// path the report says the same; the program never runs, the server it
// names is never asked, and another cluster of the same bridge goes on.
func TestUntrustedKubeconfigIsRefusedOnBothPaths(t *testing.T) {
	w := newWorld(t, "kubeconfig", false)
	tlsBait, plainBait := newBait(t, true), newBait(t, false)
	dir := t.TempDir()
	marker := filepath.Join(dir, "exec-ran")
	file := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tokenPath := file("token", []byte("pitstops-own-token"))
	certPath, keyPath := file("cert.pem", wlConfig.CertData), file("key.pem", wlConfig.KeyData)
	caPath := file("ca.pem", caPEM(tlsBait.Server))
	ca := caPEM(tlsBait.Server)
	cases := []struct {
		cluster, field string
		kubeconfig     []byte
	}{
		{"exec", `users["wl"].user.exec`, kubeconfigFor(tlsBait.URL, ca, nil, func(a *clientcmdapi.AuthInfo) {
			a.Exec = &clientcmdapi.ExecConfig{APIVersion: "client.authentication.k8s.io/v1", Command: "/bin/sh",
				Args:            []string{"-c", "touch " + marker + `; echo '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"x"}}'`},
				InteractiveMode: clientcmdapi.NeverExecInteractiveMode}
		})},
		{"authprovider", `users["wl"].user.auth-provider`, kubeconfigFor(tlsBait.URL, ca, nil, func(a *clientcmdapi.AuthInfo) {
			a.AuthProvider = &clientcmdapi.AuthProviderConfig{Name: "oidc", Config: map[string]string{"idp-issuer-url": tlsBait.URL}}
		})},
		{"tokenfile", `users["wl"].user.tokenFile`, kubeconfigFor(tlsBait.URL, ca, nil, func(a *clientcmdapi.AuthInfo) { a.TokenFile = tokenPath })},
		{"clientcert", `users["wl"].user.client-certificate`, kubeconfigFor(tlsBait.URL, ca, nil, func(a *clientcmdapi.AuthInfo) {
			a.ClientCertificate, a.ClientKeyData = certPath, wlConfig.KeyData
		})},
		{"clientkey", `users["wl"].user.client-key`, kubeconfigFor(tlsBait.URL, ca, nil, func(a *clientcmdapi.AuthInfo) {
			a.ClientCertificateData, a.ClientKey = wlConfig.CertData, keyPath
		})},
		{"cafile", `clusters["wl"].cluster.certificate-authority`, kubeconfigFor(tlsBait.URL, nil,
			func(c *clientcmdapi.Cluster) { c.CertificateAuthority = caPath },
			func(a *clientcmdapi.AuthInfo) { a.Token = "t" })},
		{"proxy", `clusters["wl"].cluster.proxy-url`, kubeconfigFor(tlsBait.URL, ca,
			func(c *clientcmdapi.Cluster) { c.ProxyURL = plainBait.URL },
			func(a *clientcmdapi.AuthInfo) { a.Token = "t" })},
		{"impersonate", `users["wl"].user.as`, kubeconfigFor(tlsBait.URL, ca, nil, func(a *clientcmdapi.AuthInfo) {
			a.Token, a.Impersonate = "t", "system:admin"
		})},
		{"plainhttp", `clusters["wl"].cluster.server`, kubeconfigFor(plainBait.URL, nil, nil, func(a *clientcmdapi.AuthInfo) { a.Token = "t" })},
	}
	// Checked however the test ends.
	defer func() {
		if n, n2 := tlsBait.hits.Load(), plainBait.hits.Load(); n+n2 != 0 {
			t.Errorf("the servers of refused kubeconfigs were asked %d times (last: %v / %v)", n+n2, tlsBait.auth.Load(), plainBait.auth.Load())
		}
		if _, err := os.Stat(marker); err == nil {
			t.Error("the exec plugin of a refused kubeconfig ran")
		}
	}()
	// A good cluster beside them: the workload cluster, by its admin.
	w.machine("good", w.ns+"-good", stateLabel)
	for _, c := range cases {
		w.writeKubeconfigOf(c.cluster, c.kubeconfig)
		w.machineOf(c.cluster, "m-"+c.cluster, "node-"+c.cluster)
	}
	ev := fleet.NewEvaluator(mgmtClient, check.Deps{})
	for _, c := range cases {
		secret := w.ns + "/" + c.cluster + "-kubeconfig"
		// The controller path.
		w.conditionOf("m-"+c.cluster, "KubeconfigRefused", 20*time.Second, secret, c.field+" is refused")
		w.eventWith("m-"+c.cluster, "WorkloadClusterUnreachable", secret, c.field)
		// The explain path, as an administrator runs it.
		report, err := explain.Machine(t.Context(), mgmtClient, mgmtClient, ev, w.ns+"/m-"+c.cluster, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if got := report.ClusterAPI.WorkloadError; !strings.Contains(got, secret) || !strings.Contains(got, c.field+" is refused") {
			t.Errorf("%s: pitstop explain machine says %q, want the Secret %s and %s refused", c.cluster, got, secret, c.field)
		}
	}
	w.hookIs("good", true)
	for _, c := range cases {
		if w.connected(c.cluster) {
			t.Errorf("connected to cluster %s", c.cluster)
		}
	}
	if !w.connected(w.cluster) {
		t.Error("the good cluster is not connected")
	}
	if s := w.secretText(); strings.Contains(s, "pitstops-own-token") {
		t.Errorf("the token file's content in a condition or Event: %s", s)
	}
}

// hostile is a workload API server that lies: it answers the Nodes list
// and watch as the Kubernetes wire format has them (the metadata-only
// form pitstop asks for), but with as much as it likes. It counts what it
// manages to write, and whether pitstop hung up before it was done.
type hostile struct {
	*httptest.Server
	list, watch func(w http.ResponseWriter, r *http.Request, h *hostile)
	written     atomic.Int64
	cut         atomic.Bool
}

// hostileLimit is how much a hostile server writes at most, far past
// what a connection may read, yet little enough not to hurt this machine
// if pitstop did read it all.
const hostileLimit = 96 << 20

func newHostile(t *testing.T, list, watch func(w http.ResponseWriter, r *http.Request, h *hostile)) *hostile {
	h := &hostile{list: list, watch: watch}
	h.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/nodes" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("watch") != "" {
			h.watch(w, r, h)
			return
		}
		h.list(w, r, h)
	}))
	t.Cleanup(h.Close)
	return h
}

// write writes s, counting it; false once the client is gone.
func (h *hostile) write(w http.ResponseWriter, s string) bool {
	n, err := writeFlush(w, s)
	h.written.Add(int64(n))
	if err != nil {
		h.cut.Store(true)
		return false
	}
	return true
}

func writeFlush(w http.ResponseWriter, s string) (int, error) {
	n, err := w.Write([]byte(s))
	if err == nil {
		err = http.NewResponseController(w).Flush()
	}
	return n, err
}

// endless writes chunk until the client hangs up or hostileLimit.
func (h *hostile) endless(w http.ResponseWriter, chunk string) {
	for h.written.Load() < hostileLimit {
		if !h.write(w, chunk) {
			return
		}
	}
}

func nodeJSON(name string, annotations string) string {
	return fmt.Sprintf(`{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":%q,"resourceVersion":"2","annotations":{%s}}}`, name, annotations)
}

func emptyList(w http.ResponseWriter, _ *http.Request, h *hostile) {
	h.write(w, `{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"1"},"items":[]}`)
}

func quietWatch(_ http.ResponseWriter, r *http.Request, _ *hostile) { <-r.Context().Done() }

// TestUntrustedWorkloadClusterCannotExhaustTheLeadersMemory: workload API
// servers that send too many Nodes, Nodes too large, or a watch that
// never stops adding Nodes (or never ends its event) get their
// connection closed at the bound, the reason on their Machine, and what
// they could make pitstop read stays bounded (they are cut off far before
// they are done); a good cluster of the same bridge goes on.
func TestUntrustedWorkloadClusterCannotExhaustTheLeadersMemory(t *testing.T) {
	w := newWorld(t, "hostile", false)
	huge := strings.Repeat("x", 1<<20)
	record := strings.Repeat("r", 4<<10)
	cases := []struct {
		cluster string
		server  *hostile
		// want is in the Machine's condition; bounded: the server must
		// have been cut off before it was done.
		want    string
		bounded bool
	}{
		{"manynodes", newHostile(t, func(rw http.ResponseWriter, _ *http.Request, h *hostile) {
			var b strings.Builder
			b.WriteString(`{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"1"},"items":[`)
			for i := range 20000 {
				if i > 0 {
					b.WriteString(",")
				}
				b.WriteString(nodeJSON(fmt.Sprintf("n-%d", i), ""))
			}
			b.WriteString("]}")
			h.write(rw, b.String())
		}, quietWatch), "more than 10000 Nodes", false},
		{"hugelist", newHostile(t, func(rw http.ResponseWriter, _ *http.Request, h *hostile) {
			if !h.write(rw, `{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"1"},"items":[{"metadata":{"name":"n","annotations":{"a":"`) {
				return
			}
			h.endless(rw, huge)
		}, quietWatch), "passed 32 MiB", true},
		{"streamnodes", newHostile(t, emptyList, func(rw http.ResponseWriter, _ *http.Request, h *hostile) {
			for i := 0; h.written.Load() < hostileLimit; i++ {
				ev := `{"type":"ADDED","object":` + nodeJSON(fmt.Sprintf("n-%d", i), fmt.Sprintf("%q:%q", pitstopv1alpha1.AnnotationMaintenanceData, record)) + "}\n"
				if !h.write(rw, ev) {
					return
				}
			}
		}), "more than 32 MiB of the labels and annotations", true},
		{"endlessevent", newHostile(t, emptyList, func(rw http.ResponseWriter, _ *http.Request, h *hostile) {
			if !h.write(rw, `{"type":"ADDED","object":{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"n","annotations":{"a":"`) {
				return
			}
			h.endless(rw, huge)
		}), "passed 32 MiB", true},
	}
	w.machine("good", w.ns+"-good", stateLabel)
	for _, c := range cases {
		w.writeKubeconfigOf(c.cluster, kubeconfigFor(c.server.URL, caPEM(c.server.Server), nil, func(a *clientcmdapi.AuthInfo) { a.Token = "t" }))
		w.machineOf(c.cluster, "m-"+c.cluster, "n-1")
	}
	for _, c := range cases {
		w.conditionOf("m-"+c.cluster, "Unreachable", 60*time.Second, "connection to the workload cluster was closed", c.want)
		if c.bounded {
			testutil.Eventually(t, 10*time.Second, interval, func() error {
				if !c.server.cut.Load() {
					return fmt.Errorf("%s: pitstop did not hang up (%d MiB written)", c.cluster, c.server.written.Load()>>20)
				}
				return nil
			})
			// What was written is what pitstop read, and what is still
			// in the sockets' buffers.
			t.Logf("%s: the server wrote %d MiB before pitstop hung up", c.cluster, c.server.written.Load()>>20)
			if n := c.server.written.Load(); n > 48<<20 {
				t.Errorf("%s: the server wrote %d MiB before pitstop hung up, want at most 32 MiB and the buffers", c.cluster, n>>20)
			}
		}
	}
	w.hookIs("good", true)
	for _, c := range cases {
		if w.connected(c.cluster) {
			t.Errorf("connected to cluster %s", c.cluster)
		}
	}
	if !w.connected(w.cluster) {
		t.Error("the good cluster is not connected")
	}
	// A closed connection is not made again at once.
	before := int64(0)
	for _, c := range cases {
		before += c.server.written.Load()
	}
	time.Sleep(2 * time.Second)
	after := int64(0)
	for _, c := range cases {
		after += c.server.written.Load()
	}
	if after != before {
		t.Errorf("the hostile servers were read again at once (%d bytes more)", after-before)
	}
}

// TestUntrustedKubeconfigSecretDeletedClosesTheConnection: deleting a
// cluster's kubeconfig Secret (to revoke pitstop's access) closes its
// connection within the bridge's recheck, with no Machine event needed,
// and the Machine says so; what the workload Node says is no longer
// carried over.
func TestUntrustedKubeconfigSecretDeletedClosesTheConnection(t *testing.T) {
	w := newWorld(t, "secretgone", false, func(w *world) { w.recheck = time.Second })
	node := w.ns + "-n0"
	w.machine("m-0", node, stateLabel)
	w.hookIs("m-0", true)
	if !w.connected(w.cluster) {
		t.Fatal("not connected")
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: w.cluster + "-kubeconfig"}}
	if err := mgmtClient.Delete(t.Context(), secret); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, interval, func() error {
		if w.connected(w.cluster) {
			return fmt.Errorf("still connected after the Secret was deleted")
		}
		return nil
	})
	w.conditionOf("m-0", "Unreachable", 20*time.Second, w.ns+"/wl-kubeconfig", "not found")
	w.patchMachine("m-0", map[string]map[string]*string{"labels": {clusterapi.LabelMaintenance: ptr.To(clusterapi.MaintenanceRequested)}})
	time.Sleep(2 * time.Second)
	if v := nodeLabels(t, node)[clusterapi.LabelMachineMaintenance]; v != "" {
		t.Errorf("the workload Node was labelled %s=%q after its Secret was deleted", clusterapi.LabelMachineMaintenance, v)
	}
	w.hookIs("m-0", true)
}

// TestUntrustedMetal3MachineCannotRebootAnotherMachinesHost: a Machine
// whose providerID names a BareMetalHost of another namespace, a host of
// its namespace provisioned for another Metal3Machine, or a host
// provisioned for none, does not get that host rebooted when its
// maintenance is approved: the host is left alone and the Machine gets a
// Warning Event saying why.
func TestUntrustedMetal3MachineCannotRebootAnotherMachinesHost(t *testing.T) {
	w := newWorld(t, "metal3x", true)
	victim := testutil.Namespace(t, mgmtClient, w.ns+"-victim")
	w.bareMetalHost(victim, "host-v", "m-cross")
	w.bareMetalHost("", "host-o", "someone-else")
	w.bareMetalHost("", "host-f", "")
	cases := []struct {
		machine, hostNS, host string
		want                  []string
	}{
		{"m-cross", victim, "host-v", []string{"spec.providerID", victim + "/host-v", "outside the Machine's namespace " + w.ns}},
		{"m-other", w.ns, "host-o", []string{w.ns + "/host-o", "is provisioned for Metal3Machine " + w.ns + "/someone-else"}},
		{"m-free", w.ns, "host-f", []string{w.ns + "/host-f", "has no spec.consumerRef"}},
	}
	for i, c := range cases {
		node := fmt.Sprintf("%s-n%d", w.ns, i)
		w.machine(c.machine, node, stateLabel, func(m *clusterv1.Machine) {
			onMetal3(c.host)(m)
			m.Spec.ProviderID = "metal3://" + c.hostNS + "/" + c.host + "/" + m.Name
		})
		w.hookIs(c.machine, true)
		w.patchMachine(c.machine, map[string]map[string]*string{"labels": {clusterapi.LabelMaintenance: ptr.To(clusterapi.MaintenanceRequested)}})
		nodeLabelIs(t, node, clusterapi.LabelMachineMaintenance, "true")
		labelNode(t, node, map[string]*string{clusterapi.LabelApproveMaintenance: ptr.To("true")})
	}
	// The Node's approval is carried over (the Machine is approved), and
	// the host is still left alone a while later.
	for _, c := range cases {
		eventually(t, func() error {
			if v := w.get(c.machine).Labels[clusterapi.LabelMaintenance]; v != clusterapi.MaintenanceApproved {
				return fmt.Errorf("%s: maintenance %q", c.machine, v)
			}
			return nil
		})
	}
	time.Sleep(2 * time.Second)
	for _, c := range cases {
		if rebootAnnotatedIn(t, c.hostNS, c.host) {
			t.Errorf("%s: BareMetalHost %s/%s got the reboot annotation", c.machine, c.hostNS, c.host)
		}
	}
	for _, c := range cases {
		w.eventWith(c.machine, "Metal3RebootRefused", c.want...)
	}
}

// TestUntrustedWorkloadProfileSteersNoQueryFromExplain: `pitstop explain
// machine` runs on an administrator's workstation and evaluates the
// workload node's checks from the workload cluster's profiles, which its
// owner writes. A prometheusInstant check there names a URL of the
// owner's choosing: explain must not send it a request (from inside the
// administrator's network), and says why the check is not evaluated.
func TestUntrustedWorkloadProfileSteersNoQueryFromExplain(t *testing.T) {
	var hits atomic.Int32
	bait := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[0,"1"]}]}}`))
	}))
	defer bait.Close()
	w := newWorld(t, "prom", false)
	node := w.ns + "-n0"
	w.machine("m-0", node, map[string]string{"pool": w.ns})
	profile := &pitstopv1alpha1.MaintenanceProfile{
		ObjectMeta: metav1.ObjectMeta{Name: w.ns},
		Spec: pitstopv1alpha1.MaintenanceProfileSpec{
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": w.ns}},
			Checks: []pitstopv1alpha1.CheckInstance{{Name: "quiet", PrometheusInstant: &pitstopv1alpha1.PrometheusInstantCheck{
				URL: bait.URL, Query: "up", Operator: "==", Threshold: "1",
			}}},
			States: pitstopv1alpha1.StatesSpec{Operational: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{
				{Check: "quiet", Next: pitstopv1alpha1.StateMaintenanceRequired},
			}}},
		},
	}
	if err := wlClient.Create(t.Context(), profile); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = wlClient.Delete(t.Context(), profile) })

	text := explainMachine(t, w.ns+"/m-0")
	if n := hits.Load(); n != 0 {
		t.Errorf("explain machine sent %d requests to the URL a workload cluster's profile names", n)
	}
	if want := "not queried: " + bait.URL; !strings.Contains(text, want) {
		t.Errorf("the report does not say why the check is not evaluated (%q):\n%s", want, text)
	}
}
