package aws_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/pitstop-dev/pitstop/internal/cloud/aws"
	"github.com/pitstop-dev/pitstop/internal/machineapi/provider"
)

func TestSecretsThatCannotBeUsed(t *testing.T) {
	tests := []struct {
		name string
		edit func(*machinev1beta1.AWSMachineProviderConfig)
		// secret replaces the credentials Secret when set.
		secret *corev1.Secret
		// want are the parts the error must contain.
		want         []string
		wantNotFound bool
	}{
		{
			name:         "a credentials Secret that does not exist",
			edit:         func(s *machinev1beta1.AWSMachineProviderConfig) { s.CredentialsSecret.Name = "missing-creds" },
			want:         []string{"Secret " + namespace + "/missing-creds", "credentialsSecret"},
			wantNotFound: true,
		},
		{
			name:   "a credentials Secret without the access key",
			secret: secret(credsSecret, map[string]string{"credentials": "[default]\nrole_arn = arn:aws:iam::123456789012:role/demo"}),
			want:   []string{"Secret " + namespace + "/" + credsSecret, "aws_access_key_id", "aws_secret_access_key"},
		},
		{
			name:         "a user data Secret that does not exist",
			edit:         func(s *machinev1beta1.AWSMachineProviderConfig) { s.UserDataSecret.Name = "missing-user-data" },
			want:         []string{"Secret " + namespace + "/missing-user-data", "userDataSecret"},
			wantNotFound: true,
		},
		{
			name: "a user data Secret without userData",
			edit: func(s *machinev1beta1.AWSMachineProviderConfig) { s.UserDataSecret.Name = credsSecret },
			want: []string{"Secret " + namespace + "/" + credsSecret, "userData"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			acct := newAccount(t)
			if tt.secret != nil {
				if err := acct.secrets.Update(context.Background(), tt.secret); err != nil {
					t.Fatal(err)
				}
			}
			spec := workerSpec()
			if tt.edit != nil {
				tt.edit(spec)
			}

			_, err := acct.provider.Create(context.Background(), machine(t, "worker", spec))

			if err == nil {
				t.Fatal("Create: no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if apierrors.IsNotFound(err) != tt.wantNotFound {
				t.Errorf("error %v: NotFound %t, want %t", err, apierrors.IsNotFound(err), tt.wantNotFound)
			}
			// A Secret can be created or fixed later: the Machine must
			// not fail over it.
			if errors.Is(err, provider.ErrInvalidConfig) {
				t.Errorf("error %v wraps ErrInvalidConfig", err)
			}
			if n := len(acct.ec2.Requests("RunInstances")); n != 0 {
				t.Errorf("%d RunInstances requests, want none", n)
			}
		})
	}
}

func TestEC2RefusesAWrongSecretAccessKey(t *testing.T) {
	acct := newAccount(t)
	wrong := secret(credsSecret, map[string]string{"aws_access_key_id": accessKeyID, "aws_secret_access_key": "not-the-key"})
	if err := acct.secrets.Update(context.Background(), wrong); err != nil {
		t.Fatal(err)
	}

	_, err := acct.provider.Create(context.Background(), machine(t, "worker", workerSpec()))

	if err == nil || !strings.Contains(err.Error(), "SignatureDoesNotMatch") {
		t.Fatalf("Create: %v, want EC2's SignatureDoesNotMatch", err)
	}
}

func TestRotatedCredentialsSignTheNextRequest(t *testing.T) {
	acct := newAccount(t)
	m := machine(t, "worker", workerSpec())
	if _, err := acct.provider.Create(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	acct.ec2.AddCredentials("AKIAROTATEDEXAMPLE2", "rotated-secret")
	rotated := secret(credsSecret, map[string]string{"aws_access_key_id": "AKIAROTATEDEXAMPLE2", "aws_secret_access_key": "rotated-secret"})
	if err := acct.secrets.Update(context.Background(), rotated); err != nil {
		t.Fatal(err)
	}

	if _, err := acct.provider.Describe(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	reqs := acct.ec2.Requests("DescribeInstances")
	if got := reqs[len(reqs)-1].AccessKeyID; got != "AKIAROTATEDEXAMPLE2" {
		t.Errorf("Describe signed with %s, want the rotated key", got)
	}
}

func TestWithoutCredentialsSecretTheSDKsDefaultChainSigns(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIAFROMENVIRONMENT")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "environment-secret")
	acct := newAccount(t)
	acct.ec2.AddCredentials("AKIAFROMENVIRONMENT", "environment-secret")
	spec := workerSpec()
	spec.CredentialsSecret = nil

	if _, err := acct.provider.Create(context.Background(), machine(t, "worker", spec)); err != nil {
		t.Fatal(err)
	}

	for _, r := range acct.ec2.Requests("") {
		if r.AccessKeyID != "AKIAFROMENVIRONMENT" {
			t.Errorf("%s signed with %q, want the environment's key", r.Action, r.AccessKeyID)
		}
	}
}

func TestRegion(t *testing.T) {
	tests := []struct {
		name          string
		specRegion    string
		optionsRegion string
		envRegion     string
		want          string
		wantErr       string
	}{
		{name: "placement.region wins", specRegion: "eu-west-1", optionsRegion: "us-west-2", envRegion: "ap-south-1", want: "eu-west-1"},
		{name: "the provider's region serves a spec without one", optionsRegion: "us-west-2", envRegion: "ap-south-1", want: "us-west-2"},
		{name: "the SDK's default (AWS_REGION) serves when neither has one", envRegion: "ap-south-1", want: "ap-south-1"},
		{name: "no region anywhere is an error saying where to set one", wantErr: "placement.region is empty and no default region is configured"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.envRegion != "" {
				t.Setenv("AWS_REGION", tt.envRegion)
			}
			acct := newAccount(t, func(o *aws.Options) { o.Region = tt.optionsRegion })
			spec := workerSpec()
			spec.Placement.Region = tt.specRegion

			inst, err := acct.provider.Describe(context.Background(), machine(t, "worker", spec, withStatus("i-0123456789abcdef0")))

			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Describe: %v, want an error saying %q", err, tt.wantErr)
				}
				return
			}
			if !errors.Is(err, provider.ErrNotFound) {
				t.Fatalf("Describe: %v, want ErrNotFound from the fake", err)
			}
			if inst != nil {
				t.Fatalf("Describe returned %+v with ErrNotFound", inst)
			}
			if got := only(t, acct.ec2, "DescribeInstances").Region; got != tt.want {
				t.Errorf("request signed for %s, want %s", got, tt.want)
			}
		})
	}
}

func TestNewValidatesOptions(t *testing.T) {
	secrets := fake.NewClientBuilder().Build()
	tests := []struct {
		name    string
		opts    aws.Options
		wantErr string
	}{
		{name: "the defaults and a Secrets reader are enough", opts: aws.Options{Secrets: secrets}},
		{name: "every option set", opts: aws.Options{Secrets: secrets, Region: "us-gov-west-1", Endpoint: "https://vpce-0abc.ec2.us-gov-west-1.vpce.amazonaws.com", RetryMaxAttempts: 10, RetryMaxBackoff: time.Minute}},
		{name: "no Secrets reader", opts: aws.Options{}, wantErr: "Options.Secrets is required"},
		{name: "a region that is not one", opts: aws.Options{Secrets: secrets, Region: "US East"}, wantErr: `region "US East"`},
		{name: "an endpoint without a scheme", opts: aws.Options{Secrets: secrets, Endpoint: "ec2.local:4566"}, wantErr: `endpoint "ec2.local:4566"`},
		{name: "an endpoint without a host", opts: aws.Options{Secrets: secrets, Endpoint: "http://"}, wantErr: `endpoint "http://"`},
		{name: "negative attempts", opts: aws.Options{Secrets: secrets, RetryMaxAttempts: -1}, wantErr: "retry max attempts -1"},
		{name: "a negative backoff", opts: aws.Options{Secrets: secrets, RetryMaxBackoff: -time.Second}, wantErr: "retry max backoff -1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := aws.New(tt.opts)
			if tt.wantErr == "" {
				if err != nil || p.Kind() != aws.Kind {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("New: %v, want an error saying %q", err, tt.wantErr)
			}
		})
	}
}
