package aws_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/pitstop-dev/pitstop/internal/cloud/aws"
	"github.com/pitstop-dev/pitstop/internal/sim/ec2sim"
)

// The account the tests run in: a cluster "demo-x7k2p" in us-east-1 with
// two private subnets, two security groups and one AMI, and the keys its
// credentials Secret holds.
const (
	region      = "us-east-1"
	namespace   = "openshift-machine-api"
	clusterName = "demo-x7k2p"
	ami         = "ami-0c55b159cbfafe1f0"
	accessKeyID = "AKIAIOSFODNN7EXAMPLE"
	secretKey   = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	credsSecret = "aws-cloud-credentials"
	userData    = "{\"ignition\":{\"version\":\"3.2.0\"}}"
	machineUID  = "6f1c2c6e-0c1d-4c39-9f7a-2d5e8f1b7a10"
)

// now is the fake clock's time, stamped on providerStatus conditions.
var now = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// TestMain keeps the AWS SDK from reading anything of the machine it runs
// on (shared config files, environment credentials, instance metadata):
// what the tests see must come from the Secrets and the fake EC2 alone.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "aws-provider-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, k := range []string{
		"AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
		"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_MAX_ATTEMPTS", "AWS_RETRY_MODE", "AWS_ENDPOINT_URL",
		"AWS_ENDPOINT_URL_EC2", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_NEW_RETRIES_2026",
	} {
		_ = os.Unsetenv(k)
	}
	_ = os.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	_ = os.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	_ = os.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// account is a fake EC2 account with the Secrets of the Machines'
// namespace, and an aws provider pointed at both.
type account struct {
	ec2      *ec2sim.Server
	secrets  client.Client
	provider *aws.Provider
}

// newAccount starts a fake EC2 with the cluster's subnets, security
// groups and AMI, and a provider that retries up to 3 attempts with
// millisecond backoffs. edit adjusts the provider's options.
func newAccount(t *testing.T, edit ...func(*aws.Options)) *account {
	t.Helper()
	f := ec2sim.New(t)
	f.AddCredentials(accessKeyID, secretKey)
	f.AddImage(ec2sim.Image{ID: ami, Name: "rhcos-418", RootDeviceName: "/dev/xvda"})
	f.AddSubnet(ec2sim.Subnet{ID: "subnet-0aa1", VPCID: "vpc-0d1", Zone: "us-east-1a", CIDR: "10.0.0.0/19",
		Tags: map[string]string{"Name": clusterName + "-private-us-east-1a"}})
	f.AddSubnet(ec2sim.Subnet{ID: "subnet-0bb2", VPCID: "vpc-0d1", Zone: "us-east-1b", CIDR: "10.0.32.0/19",
		Tags: map[string]string{"Name": clusterName + "-private-us-east-1b"}})
	f.AddSecurityGroup(ec2sim.SecurityGroup{ID: "sg-0node", Name: clusterName + "-node", VPCID: "vpc-0d1",
		Tags: map[string]string{"Name": clusterName + "-node"}})
	f.AddSecurityGroup(ec2sim.SecurityGroup{ID: "sg-0lb", Name: clusterName + "-lb", VPCID: "vpc-0d1",
		Tags: map[string]string{"Name": clusterName + "-lb"}})
	secrets := fake.NewClientBuilder().WithObjects(
		secret(credsSecret, map[string]string{"aws_access_key_id": accessKeyID, "aws_secret_access_key": secretKey}),
		secret("worker-user-data", map[string]string{"userData": userData, "disableTemplating": "true"}),
	).Build()
	opts := aws.Options{
		Region:           region,
		Endpoint:         f.URL,
		Secrets:          secrets,
		RetryMaxAttempts: 3,
		RetryMaxBackoff:  time.Millisecond,
		Clock:            clocktesting.NewFakePassiveClock(now),
	}
	for _, e := range edit {
		e(&opts)
	}
	p, err := aws.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return &account{ec2: f, secrets: secrets, provider: p}
}

func secret(name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

// workerSpec is an OpenShift worker's providerSpec, as the installer
// writes it: subnet and one security group by filters, another by ID.
func workerSpec() *machinev1beta1.AWSMachineProviderConfig {
	return &machinev1beta1.AWSMachineProviderConfig{
		TypeMeta:           metav1.TypeMeta{APIVersion: "machine.openshift.io/v1beta1", Kind: aws.Kind},
		AMI:                machinev1beta1.AWSResourceReference{ID: ptr.To(ami)},
		InstanceType:       "m6i.xlarge",
		Placement:          machinev1beta1.Placement{Region: region, AvailabilityZone: "us-east-1a"},
		Subnet:             machinev1beta1.AWSResourceReference{Filters: []machinev1beta1.Filter{{Name: "tag:Name", Values: []string{clusterName + "-private-us-east-1a"}}}},
		SecurityGroups:     []machinev1beta1.AWSResourceReference{{Filters: []machinev1beta1.Filter{{Name: "tag:Name", Values: []string{clusterName + "-node"}}}}, {ID: ptr.To("sg-0lb")}},
		IAMInstanceProfile: &machinev1beta1.AWSResourceReference{ID: ptr.To(clusterName + "-worker-profile")},
		KeyName:            ptr.To("demo-key"),
		UserDataSecret:     &corev1.LocalObjectReference{Name: "worker-user-data"},
		CredentialsSecret:  &corev1.LocalObjectReference{Name: credsSecret},
		Tags:               []machinev1beta1.TagSpecification{{Name: "team", Value: "infra"}, {Name: "Name", Value: "overridden"}},
		BlockDevices: []machinev1beta1.BlockDeviceMappingSpec{{EBS: &machinev1beta1.EBSBlockDeviceSpec{
			VolumeSize: ptr.To[int64](120), VolumeType: ptr.To("gp3"), Encrypted: ptr.To(true),
			KMSKey: machinev1beta1.AWSResourceReference{ARN: ptr.To("arn:aws:kms:us-east-1:123456789012:key/demo")},
		}}},
	}
}

// machine is a worker Machine of the cluster with spec as its
// providerSpec; edits adjust it.
func machine(t *testing.T, name string, spec *machinev1beta1.AWSMachineProviderConfig, edits ...func(*machinev1beta1.Machine)) *machinev1beta1.Machine {
	t.Helper()
	raw, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	m := &machinev1beta1.Machine{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace, Name: name, UID: types.UID(machineUID),
			Labels: map[string]string{machinev1beta1.MachineClusterIDLabel: clusterName},
		},
		Spec: machinev1beta1.MachineSpec{ProviderSpec: machinev1beta1.ProviderSpec{Value: &runtime.RawExtension{Raw: raw}}},
	}
	for _, e := range edits {
		e(m)
	}
	return m
}

// withStatus records an instance ID (and conditions) in the machine's
// providerStatus, as a Create before would have.
func withStatus(id string, conditions ...metav1.Condition) func(*machinev1beta1.Machine) {
	return func(m *machinev1beta1.Machine) {
		raw, _ := json.Marshal(&machinev1beta1.AWSMachineProviderStatus{InstanceID: ptr.To(id), InstanceState: ptr.To("running"), Conditions: conditions})
		m.Status.ProviderStatus = &runtime.RawExtension{Raw: raw}
	}
}

func withProviderID(id string) func(*machinev1beta1.Machine) {
	return func(m *machinev1beta1.Machine) { m.Spec.ProviderID = ptr.To(id) }
}

func withoutClusterLabel(m *machinev1beta1.Machine) {
	delete(m.Labels, machinev1beta1.MachineClusterIDLabel)
}

func withUID(uid string) func(*machinev1beta1.Machine) {
	return func(m *machinev1beta1.Machine) { m.UID = types.UID(uid) }
}

// ownedTags are the tags that make an instance the cluster's machine.
func ownedTags(name string) map[string]string {
	return map[string]string{"Name": name, "kubernetes.io/cluster/" + clusterName: "owned"}
}

// wantParams fails the test for every parameter the request did not send
// as expected ("" means not sent).
func wantParams(t *testing.T, req ec2sim.Request, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got := req.Params.Get(k); got != v {
			t.Errorf("%s sent %s=%q, want %q", req.Action, k, got, v)
		}
	}
}

// only returns the single request for action, failing the test if there
// is not exactly one.
func only(t *testing.T, f *ec2sim.Server, action string) ec2sim.Request {
	t.Helper()
	reqs := f.Requests(action)
	if len(reqs) != 1 {
		t.Fatalf("%d %s requests, want 1", len(reqs), action)
	}
	return reqs[0]
}
