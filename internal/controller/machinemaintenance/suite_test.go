package machinemaintenance_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/cloud/aws"
	"github.com/pitstop-dev/pitstop/internal/controller/machinemaintenance"
	"github.com/pitstop-dev/pitstop/internal/machineapi/machineset"
	"github.com/pitstop-dev/pitstop/internal/sim/ec2sim"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// env is a real API server and etcd with pitstop's and the Machine API's
// CRDs. EC2 is the local endpoint that speaks its wire format; the tests
// play the Machine controller and the kubelets.
var env *testutil.Env

const (
	timeout     = 30 * time.Second
	interval    = 50 * time.Millisecond
	region      = "us-east-1"
	accessKeyID = "AKIAIOSFODNN7EXAMPLE"
	secretKey   = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	credsSecret = "aws-cloud-credentials"
	labelSet    = "machine.openshift.io/cluster-api-machineset"
)

// TestMain gives the AWS SDK's default credential chain the fake's keys
// (Nodes without a Machine use it) and nothing else of this machine.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cloud-events-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, k := range []string{"AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION",
		"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_EC2", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE"} {
		_ = os.Unsetenv(k)
	}
	_ = os.Setenv("AWS_ACCESS_KEY_ID", accessKeyID)
	_ = os.Setenv("AWS_SECRET_ACCESS_KEY", secretKey)
	_ = os.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	_ = os.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	_ = os.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	testutil.Main(m, &env)
}

var namespaces atomic.Int32

// cluster is one test's world: a namespace, a fake EC2 with the keys of
// the namespace's credentials Secret, and pitstop's cloud events (plus
// the MachineSet controller) running against both.
type cluster struct {
	t      *testing.T
	ns     string
	ec2    *ec2sim.Server
	poller *machinemaintenance.Poller
	ctrl   *testutil.Controllers
	opts   machinemaintenance.Options
	// hold keeps the played Machine controller from running new Machines.
	hold atomic.Bool
	// noSets leaves pitstop's MachineSet controller out: the test plays one.
	noSets bool
	// removeNone makes the played MachineSet controller remove nothing
	// when its set shrinks.
	removeNone atomic.Bool
}

func newCluster(t *testing.T, name string, edit ...func(*machinemaintenance.Options)) *cluster {
	t.Helper()
	return newClusterOf(t, &cluster{t: t, ns: testutil.Namespace(t, env.Client, fmt.Sprintf("%s-%d", name, namespaces.Add(1)))}, edit...)
}

// newClusterOf starts the controllers for c, set up as the test wants.
func newClusterOf(t *testing.T, c *cluster, edit ...func(*machinemaintenance.Options)) *cluster {
	t.Helper()
	c.ec2 = ec2sim.New(t)
	c.ec2.AddCredentials(accessKeyID, secretKey)
	testutil.Create(t, env.Client, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: credsSecret},
		Data:       map[string][]byte{"aws_access_key_id": []byte(accessKeyID), "aws_secret_access_key": []byte(secretKey)},
	})
	p, err := aws.New(aws.Options{Region: region, Endpoint: c.ec2.URL, Secrets: env.Client, RetryMaxAttempts: 2, RetryMaxBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c.opts = machinemaintenance.Options{
		Cloud: aws.Events{Provider: p}, Namespace: c.ns, Interval: time.Hour, Machines: true, Margin: time.Hour,
		// The tests poll when they choose: the first poll at start finds
		// nothing yet.
	}
	for _, e := range edit {
		e(&c.opts)
	}
	c.start()
	return c
}

// start runs the controllers, their cache limited to the test's
// namespace (Nodes are cluster-wide).
func (c *cluster) start() {
	c.t.Helper()
	opts := ctrl.Options{Cache: cache.Options{DefaultNamespaces: map[string]cache.Config{c.ns: {}}}}
	c.ctrl = testutil.StartControllers(c.t, env.Config, opts, func(mgr ctrl.Manager) error {
		p, err := machinemaintenance.Setup(mgr, c.opts)
		c.poller = p
		if err != nil || c.noSets {
			return err
		}
		return machineset.Setup(mgr, machineset.Options{})
	})
	if !c.ctrl.GetCache().WaitForCacheSync(c.t.Context()) {
		c.t.Fatal("cache did not sync")
	}
}

// restart stops the controllers and starts new ones, as a new pitstop
// process would.
func (c *cluster) restart() {
	c.t.Helper()
	c.ctrl.Stop()
	c.start()
}

// poll runs a poll and returns its summary. The cache it reads may lag
// the test's and the reconciler's writes: a poll whose status write lost a
// conflict (which the next poll retries) is run again at once, for up to
// 10 s. Other errors are logged (EC2 errors are the test's).
func (c *cluster) poll() machinemaintenance.PollSummary {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		sum, err := c.poller.Poll(c.t.Context())
		if err == nil {
			return sum
		}
		c.t.Logf("poll: %v", err)
		if !apierrors.IsConflict(err) || time.Now().After(deadline) {
			return sum
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// awsSpec is an aws Machine's providerSpec in the test's region.
func awsSpec() *runtime.RawExtension {
	raw, _ := json.Marshal(map[string]any{
		"apiVersion": "machine.openshift.io/v1beta1", "kind": aws.Kind,
		"instanceType": "m6i.xlarge", "ami": map[string]string{"id": "ami-0c55b159cbfafe1f0"},
		"placement":         map[string]string{"region": region, "availabilityZone": "us-east-1a"},
		"credentialsSecret": map[string]string{"name": credsSecret},
	})
	return &runtime.RawExtension{Raw: raw}
}

// instance launches an instance in the fake for the node c.node(name)
// makes, and returns its ID and the providerID that Node carries. EC2
// gives the instance the node's name as its private DNS name, as the
// kubelet registers under it.
func (c *cluster) instance(name string) (string, string) {
	id := c.ec2.AddInstance(ec2sim.Instance{ID: uniqueInstanceID(), Zone: "us-east-1a", PrivateDNS: c.ns + "-" + name})
	return id, "aws:///us-east-1a/" + id
}

var instanceIDs atomic.Int64

// uniqueInstanceID is an instance ID no other test's EC2 gives: the
// Machines of earlier tests stay in the API server (envtest deletes no
// namespace), and two Machines with one instance are refused.
func uniqueInstanceID() string {
	return fmt.Sprintf("i-%017x", 0xe0000+instanceIDs.Add(1))
}

// node creates a Ready Node with the providerID, named after the test.
func (c *cluster) node(name, providerID string, edit ...func(*corev1.Node)) *corev1.Node {
	c.t.Helper()
	n := testutil.Node(c.ns + "-" + name)
	n.Spec.ProviderID = providerID
	n.Status.NodeInfo.BootID = "boot-1"
	for _, e := range edit {
		e(n)
	}
	testutil.Create(c.t, env.Client, n)
	// The status is the kubelet's: set it after the create.
	ready := n.DeepCopy()
	ready.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	ready.Status.NodeInfo.BootID = n.Status.NodeInfo.BootID
	if err := env.Client.Status().Update(c.t.Context(), ready); err != nil {
		c.t.Fatal(err)
	}
	// The API server taints a new node not-ready; the node lifecycle
	// controller, which envtest does not run, takes the taint off once the
	// node is Ready.
	untainted := ready.DeepCopy()
	untainted.Spec.Taints = nil
	if err := env.Client.Patch(c.t.Context(), untainted, client.MergeFrom(ready)); err != nil {
		c.t.Fatal(err)
	}
	ready = untainted
	c.t.Cleanup(func() { _ = env.Client.Delete(context.Background(), n) })
	return ready
}

// machine creates a Running aws Machine with an instance and a Ready Node,
// as the Machine controller and nodelink would leave it.
func (c *cluster) machine(name string, owner *machinev1beta1.MachineSet) (*machinev1beta1.Machine, string) {
	c.t.Helper()
	m := &machinev1beta1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: name, Labels: map[string]string{}},
		Spec:       machinev1beta1.MachineSpec{ProviderSpec: machinev1beta1.ProviderSpec{Value: awsSpec()}},
	}
	if owner != nil {
		m.Labels[labelSet] = owner.Name
		m.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(owner, machinev1beta1.GroupVersion.WithKind("MachineSet"))}
	}
	testutil.Create(c.t, env.Client, m)
	id := c.run(m)
	return m, id
}

// run plays the Machine controller and nodelink for a new Machine: an
// instance, a Ready Node, the Machine Running with its nodeRef.
func (c *cluster) run(m *machinev1beta1.Machine) string {
	c.t.Helper()
	id, providerID := c.instance(m.Name)
	n := c.node(m.Name, providerID, func(n *corev1.Node) {
		n.Annotations = map[string]string{"machine.openshift.io/machine": c.ns + "/" + m.Name}
	})
	// A Machine deleted meanwhile (its set scaled down while it waited
	// to run) is not run, as a Machine controller would leave it.
	testutil.Eventually(c.t, timeout, interval, func() error {
		if err := env.Client.Get(c.t.Context(), client.ObjectKeyFromObject(m), m); err != nil {
			return client.IgnoreNotFound(err)
		}
		base := m.DeepCopy()
		m.Spec.ProviderID = ptr.To(providerID)
		if err := env.Client.Patch(c.t.Context(), m, client.MergeFrom(base)); err != nil {
			return client.IgnoreNotFound(err)
		}
		base = m.DeepCopy()
		m.Status.Phase = ptr.To(machinev1beta1.PhaseRunning)
		m.Status.NodeRef = &corev1.ObjectReference{Kind: "Node", Name: n.Name}
		return client.IgnoreNotFound(env.Client.Status().Patch(c.t.Context(), m, client.MergeFrom(base)))
	})
	return id
}

// playMachineController runs c.run for every new Machine of the set and
// deletes the Node of every Machine that goes, until the test ends.
func (c *cluster) playMachineController(ms *machinev1beta1.MachineSet) {
	c.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	c.t.Cleanup(func() { cancel(); wg.Wait() })
	known := map[string]bool{}
	wg.Go(func() {
		for ctx.Err() == nil {
			var list machinev1beta1.MachineList
			if err := env.Client.List(ctx, &list, client.InNamespace(c.ns)); err == nil {
				for i := range list.Items {
					m := &list.Items[i]
					if known[m.Name] || m.Labels[labelSet] != ms.Name || c.hold.Load() {
						continue
					}
					known[m.Name] = true
					if m.Status.Phase == nil {
						c.run(m)
					}
				}
				for name := range known {
					if !contains(list.Items, name) {
						_ = env.Client.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: c.ns + "-" + name}})
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
}

func contains(items []machinev1beta1.Machine, name string) bool {
	for i := range items {
		if items[i].Name == name {
			return true
		}
	}
	return false
}

// eventually waits for check to pass.
func eventually(t *testing.T, check func() error) {
	t.Helper()
	testutil.Eventually(t, timeout, interval, check)
}

// mmOf reads a MachineMaintenance.
func mmOf(t *testing.T, ns, name string) (*pitstopv1alpha1.MachineMaintenance, error) {
	mm := &pitstopv1alpha1.MachineMaintenance{}
	err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, mm)
	return mm, err
}

// phaseIs waits for a MachineMaintenance's phase.
func phaseIs(t *testing.T, ns, name string, want pitstopv1alpha1.MachineMaintenancePhase) *pitstopv1alpha1.MachineMaintenance {
	t.Helper()
	var mm *pitstopv1alpha1.MachineMaintenance
	eventually(t, func() error {
		var err error
		if mm, err = mmOf(t, ns, name); err != nil {
			return err
		}
		if mm.Status.Phase != want {
			return fmt.Errorf("%s/%s is %q, want %q (%s)", ns, name, mm.Status.Phase, want, mm.Status.Plan)
		}
		return nil
	})
	return mm
}

// withStartBy waits for a MachineMaintenance to have its latest safe
// start.
func withStartBy(t *testing.T, ns, name string) *pitstopv1alpha1.MachineMaintenance {
	t.Helper()
	var mm *pitstopv1alpha1.MachineMaintenance
	eventually(t, func() error {
		var err error
		if mm, err = mmOf(t, ns, name); err != nil {
			return err
		}
		if mm.Status.LatestSafeStart == nil || mm.Status.Phase == "" {
			return fmt.Errorf("%s/%s has no latest safe start yet", ns, name)
		}
		return nil
	})
	return mm
}

func gone(t *testing.T, obj client.Object) error {
	err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(obj), obj)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("%s still exists", obj.GetName())
}
