package aws

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/pitstop-dev/pitstop/internal/machineapi/provider"
)

// Kind is the providerSpec kind the aws provider serves.
const Kind = "AWSMachineProviderConfig"

// Options configure the aws provider.
type Options struct {
	// Region is the region of machines whose providerSpec has no
	// placement.region. Empty: the AWS SDK's default (AWS_REGION, the
	// shared config file).
	Region string
	// Endpoint replaces EC2's regional endpoint (a VPC endpoint, a test
	// server), as an absolute http(s) URL. Empty: the region's endpoint.
	Endpoint string
	// Secrets reads the Secrets a providerSpec names (credentialsSecret,
	// userDataSecret) from the Machine's namespace.
	Secrets client.Reader
	// RetryMaxAttempts is how many times one EC2 call is attempted when
	// it is throttled or fails transiently, the first included. Zero: the
	// SDK's standard retryer's default (3).
	RetryMaxAttempts int
	// RetryMaxBackoff caps the wait between attempts. Zero: the SDK's
	// standard retryer's default (20s).
	RetryMaxBackoff time.Duration
	// HTTPClient sends the EC2 requests. Nil: the SDK's client.
	HTTPClient *http.Client
	// Clock stamps the providerStatus conditions. Nil: the real clock.
	Clock clock.PassiveClock
}

// Provider runs Machines' instances on EC2. It is safe for concurrent
// use.
type Provider struct {
	opts Options
	// retryer is shared by all EC2 clients, so that its retry quota
	// (the SDK's token bucket) backs off every machine at once when EC2
	// throttles the account.
	retryer awssdk.Retryer

	mu sync.Mutex
	// defaults is the SDK's default configuration (region, credential
	// chain, shared config), loaded on first use.
	defaults *awssdk.Config
}

var _ provider.Provider = (*Provider)(nil)

// New returns an aws provider, or an error naming the option that is
// wrong.
func New(opts Options) (*Provider, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	retryer := retry.NewStandard(func(o *retry.StandardOptions) {
		if opts.RetryMaxAttempts > 0 {
			o.MaxAttempts = opts.RetryMaxAttempts
		}
		if opts.RetryMaxBackoff > 0 {
			o.MaxBackoff = opts.RetryMaxBackoff
		}
	})
	return &Provider{opts: opts, retryer: retryer}, nil
}

func (o *Options) validate() error {
	if o.Secrets == nil {
		return errors.New("aws provider: Options.Secrets is required: it reads the providerSpec's credentialsSecret and userDataSecret")
	}
	if o.Region != "" && !regionPattern.MatchString(o.Region) {
		return fmt.Errorf("aws provider: region %q is not an AWS region (such as us-east-1)", o.Region)
	}
	if o.Endpoint != "" {
		u, err := url.Parse(o.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("aws provider: endpoint %q is not an absolute http(s) URL", o.Endpoint)
		}
	}
	if o.RetryMaxAttempts < 0 {
		return fmt.Errorf("aws provider: retry max attempts %d is negative", o.RetryMaxAttempts)
	}
	if o.RetryMaxBackoff < 0 {
		return fmt.Errorf("aws provider: retry max backoff %s is negative", o.RetryMaxBackoff)
	}
	return nil
}

// Kind is AWSMachineProviderConfig.
func (p *Provider) Kind() string { return Kind }

// Create launches the machine's instance, or returns the one it has: the
// instance recorded in its providerStatus (or providerID), else one
// tagged with its name and cluster. RunInstances carries the Machine's
// UID as client token, so that EC2 itself returns the instance it
// launched for a Create that is retried or repeated after a crash.
func (p *Provider) Create(ctx context.Context, m *machinev1beta1.Machine) (*provider.Instance, error) {
	spec, st, err := decode(m)
	if err != nil {
		return nil, err
	}
	if err := validate(spec); err != nil {
		return nil, err
	}
	if m.UID == "" {
		return nil, errors.New("machine has no UID, which the aws provider uses as the launch's client token")
	}
	s, err := p.session(ctx, m, spec)
	if err != nil {
		return nil, err
	}
	existing, err := s.find(ctx, m, st)
	if err != nil && !errors.Is(err, provider.ErrNotFound) {
		return nil, err
	}
	if len(existing) > 0 {
		log.FromContext(ctx).V(1).Info("Found the machine's EC2 instance", "instance", awssdk.ToString(existing[0].InstanceId), "region", s.region)
		return toInstance(existing[0], s.region, st), nil
	}
	l, err := s.prepare(ctx, m, spec)
	if err != nil {
		return nil, err
	}
	out, err := s.ec2.RunInstances(ctx, runInstancesInput(m, spec, l))
	if err != nil {
		return nil, fmt.Errorf("launching an instance in %s: %w", s.region, err)
	}
	if len(out.Instances) != 1 {
		return nil, fmt.Errorf("launching an instance in %s: EC2 returned %d instances", s.region, len(out.Instances))
	}
	inst := toInstance(out.Instances[0], s.region, st)
	if inst.State == string(types.InstanceStateNameTerminated) {
		// EC2 returns the instance it launched for this client token even
		// once it is gone: a Machine never gets a second instance. Said
		// as it is, the Machine records it, finds it gone and fails.
		return inst, nil
	}
	setCreated(inst, p.opts.Clock.Now())
	log.FromContext(ctx).Info("Launched EC2 instance", "instance", inst.ID, "region", s.region, "zone", inst.Zone)
	return inst, nil
}

// Describe returns the machine's instance: the one recorded in its
// providerStatus (or providerID), else the newest one tagged with its name
// and cluster. A terminated instance, or one EC2 does not know, is
// provider.ErrNotFound.
func (p *Provider) Describe(ctx context.Context, m *machinev1beta1.Machine) (*provider.Instance, error) {
	spec, st, err := decode(m)
	if err != nil {
		return nil, err
	}
	s, err := p.session(ctx, m, spec)
	if err != nil {
		return nil, err
	}
	found, err := s.find(ctx, m, st)
	if err != nil {
		return nil, err
	}
	return toInstance(found[0], s.region, st), nil
}

// Delete terminates the machine's instance; when it has none recorded,
// every instance tagged with its name and cluster. An instance that is
// already gone is not an error.
func (p *Provider) Delete(ctx context.Context, m *machinev1beta1.Machine) error {
	spec, st, err := decode(m)
	if err != nil {
		return err
	}
	s, err := p.session(ctx, m, spec)
	if err != nil {
		return err
	}
	ids := []string{knownInstanceID(m, st)}
	if ids[0] == "" {
		found, err := s.find(ctx, m, st)
		if errors.Is(err, provider.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		ids = ids[:0]
		for _, i := range found {
			ids = append(ids, awssdk.ToString(i.InstanceId))
		}
	}
	return s.terminate(ctx, ids)
}

// decode reads the machine's providerSpec (leniently) and providerStatus.
func decode(m *machinev1beta1.Machine) (*machinev1beta1.AWSMachineProviderConfig, *machinev1beta1.AWSMachineProviderStatus, error) {
	spec, err := decodeSpec(m)
	if err != nil {
		return nil, nil, err
	}
	st := &machinev1beta1.AWSMachineProviderStatus{}
	if err := provider.DecodeStatus(m, st); err != nil {
		return nil, nil, err
	}
	return spec, st, nil
}

// session is an EC2 client for one machine's region and credentials.
type session struct {
	ec2     *ec2.Client
	region  string
	secrets client.Reader
	// now is when the call began, to tell a just-launched instance EC2
	// does not show yet from one that is gone.
	now time.Time
}
