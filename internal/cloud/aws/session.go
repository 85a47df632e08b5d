package aws

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Keys of the Secrets a providerSpec names, as OpenShift's credentials
// and user-data Secrets have them.
const (
	keyAccessKeyID     = "aws_access_key_id"
	keySecretAccessKey = "aws_secret_access_key"
	keySessionToken    = "aws_session_token"
	keyUserData        = "userData"
)

// session returns an EC2 client for the machine: its region
// (placement.region, else the provider's, else the SDK's default) and its
// credentials (the credentialsSecret, else the SDK's default chain). The
// Secret is read on every call, so rotated keys take effect at once.
func (p *Provider) session(ctx context.Context, m *machinev1beta1.Machine, spec *machinev1beta1.AWSMachineProviderConfig) (*session, error) {
	var secret string
	if ref := spec.CredentialsSecret; ref != nil {
		secret = ref.Name
	}
	return p.sessionFor(ctx, spec.Placement.Region, m.Namespace, secret)
}

// sessionFor returns an EC2 client for a region (else the provider's,
// else the SDK's default) with the credentials of the Secret
// namespace/secret (none named: the SDK's default chain).
func (p *Provider) sessionFor(ctx context.Context, region, namespace, secret string) (*session, error) {
	base, err := p.defaultConfig(ctx)
	if err != nil {
		return nil, err
	}
	region = cmp.Or(region, p.opts.Region, base.Region)
	if region == "" {
		// The manager's configuration can fix this as well as the
		// Machine, so the Machine does not fail over it.
		return nil, errors.New("no AWS region: spec.providerSpec.value.placement.region is empty and no default region is configured")
	}
	var creds awssdk.CredentialsProvider
	if secret != "" {
		if creds, err = p.credentials(ctx, namespace, secret); err != nil {
			return nil, err
		}
	}
	c := ec2.NewFromConfig(base, func(o *ec2.Options) {
		o.Region = region
		o.Retryer = p.retryer
		if p.opts.RetryMaxAttempts > 0 {
			o.RetryMaxAttempts = p.opts.RetryMaxAttempts
		}
		if p.opts.Endpoint != "" {
			o.BaseEndpoint = awssdk.String(p.opts.Endpoint)
		}
		if p.opts.HTTPClient != nil {
			o.HTTPClient = p.opts.HTTPClient
		}
		if creds != nil {
			o.Credentials = creds
		}
	})
	return &session{ec2: c, region: region, secrets: p.opts.Secrets, now: p.opts.Clock.Now()}, nil
}

// defaultConfig is the SDK's default configuration, loaded once: it
// reads the environment and the shared config files, and holds the
// default credential chain, which caches what it resolves.
func (p *Provider) defaultConfig(ctx context.Context) (awssdk.Config, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.defaults == nil {
		cfg, err := config.LoadDefaultConfig(ctx)
		if err != nil {
			return awssdk.Config{}, fmt.Errorf("loading the AWS SDK's default configuration: %w", err)
		}
		p.defaults = &cfg
	}
	return *p.defaults, nil
}

// credentials reads the access key from the machine's credentialsSecret.
func (p *Provider) credentials(ctx context.Context, namespace, name string) (awssdk.CredentialsProvider, error) {
	data, err := readSecret(ctx, p.opts.Secrets, namespace, name, "credentialsSecret")
	if err != nil {
		return nil, err
	}
	id := strings.TrimSpace(string(data[keyAccessKeyID]))
	key := strings.TrimSpace(string(data[keySecretAccessKey]))
	if id == "" || key == "" {
		return nil, fmt.Errorf("credentials Secret %s/%s (spec.providerSpec.value.credentialsSecret) needs the keys %s and %s",
			namespace, name, keyAccessKeyID, keySecretAccessKey)
	}
	return credentials.NewStaticCredentialsProvider(id, key, strings.TrimSpace(string(data[keySessionToken]))), nil
}

// userData reads the machine's user data from its userDataSecret.
func (s *session) userData(ctx context.Context, namespace, name string) ([]byte, error) {
	data, err := readSecret(ctx, s.secrets, namespace, name, "userDataSecret")
	if err != nil {
		return nil, err
	}
	v, ok := data[keyUserData]
	if !ok {
		return nil, fmt.Errorf("user data Secret %s/%s (spec.providerSpec.value.userDataSecret) has no key %s", namespace, name, keyUserData)
	}
	return v, nil
}

// readSecret reads a Secret the providerSpec names in field. A Secret that
// does not exist (yet) is an error to retry, not an invalid spec: it is
// often created alongside the Machine.
func readSecret(ctx context.Context, r client.Reader, namespace, name, field string) (map[string][]byte, error) {
	secret := &corev1.Secret{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, secret); err != nil {
		return nil, fmt.Errorf("reading Secret %s/%s (spec.providerSpec.value.%s): %w", namespace, name, field, err)
	}
	return secret.Data, nil
}
