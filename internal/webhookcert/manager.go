package webhookcert

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

var (
	_ manager.Runnable               = (*Manager)(nil)
	_ manager.LeaderElectionRunnable = (*Manager)(nil)
)

const (
	// checkInterval is the longest Start waits between two Ensures, so a
	// Secret or webhook configuration changed behind pitstop's back, or a
	// certificate another replica renewed, is picked up within it.
	checkInterval = time.Hour
	// retryInterval is how soon Start retries a failed Ensure; it doubles
	// on each further failure up to checkInterval.
	retryInterval = 5 * time.Second
	// maxRounds bounds Ensure's rounds; see Ensure.
	maxRounds = 3
	// removeTimeout bounds the removal of a registered configuration when
	// Start returns.
	removeTimeout = 5 * time.Second
)

// Manager keeps the webhook's serving certificate, its files and the webhook
// configuration's CA bundle current. Every replica runs one; they coordinate
// through the Secret.
type Manager struct {
	c    client.Client
	opts Options

	// now is the clock; tests replace it.
	now func() time.Time
	// checkInterval and retryInterval are Start's timings; tests shorten
	// them.
	checkInterval, retryInterval time.Duration

	// mu serializes Ensure, which Start and the caller may both run.
	mu sync.Mutex
	// renewAt is when the certificate last written is due for renewal;
	// zero until Ensure first succeeds.
	renewAt time.Time
}

// New returns a Manager for opts, which must pass Validate. c must be a live
// client, not the manager's cache-backed one: a cached read of a Secret
// starts an informer on every Secret in the cluster (with list and watch
// permissions this package does not ask for), and a stale read would make
// replicas overwrite each other's certificates.
func New(c client.Client, opts Options) (*Manager, error) {
	if c == nil {
		return nil, errors.New("webhookcert: client must not be nil")
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return &Manager{
		c:             c,
		opts:          opts.withDefaults().clone(),
		now:           time.Now,
		checkInterval: checkInterval,
		retryInterval: retryInterval,
	}, nil
}

// Ensure makes sure the Secret holds a valid CA and a serving certificate
// for Options.Hosts (creating or renewing them as needed), that the
// ValidatingWebhookConfiguration holds exactly Options.Webhooks with the CA
// bundle, and that CertDir holds the serving certificate and key. Several
// replicas may run it at once. Run it once before starting the webhook
// server, which fails to start without the files.
func (m *Manager) Ensure(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for range maxRounds {
		b, err := m.ensureSecret(ctx)
		if err != nil {
			return err
		}
		// The configuration before the files: when an expiring CA is
		// replaced, the new bundle still holds the old one, so the API
		// server trusts both the certificate this replica serves now and
		// the one it is about to write.
		// A missing install configuration does not stop the files: the
		// server can serve, and the next round writes the bundle once the
		// configuration is installed.
		configErr := m.ensureWebhookConfiguration(ctx, b.caPEM)
		if configErr != nil && !IsConfigurationMissing(configErr) {
			return configErr
		}
		// Another replica may have replaced the CA after ensureSecret read
		// the Secret, and written the new bundle to the configuration just
		// before this replica overwrote it with the old one. Read the Secret
		// again: if it still holds the bundle just written, any later
		// replacement writes its own bundle after this write, so the
		// configuration ends up right; otherwise go round again.
		latest, err := m.readCABundle(ctx)
		if err != nil {
			return err
		}
		if !bytes.Equal(latest, b.caPEM) {
			continue
		}
		if err := writeServingFiles(m.opts.CertDir, b.certPEM, b.keyPEM); err != nil {
			return err
		}
		m.renewAt = renewalTime(b, m.planInput())
		return configErr
	}
	return fmt.Errorf("the CA in Secret %s/%s changed during each of %d rounds", m.opts.Namespace, m.opts.SecretName, maxRounds)
}

// Start runs Ensure now, then again when the certificate is due for renewal
// and at least every hour, until ctx ends. A failed Ensure is logged and
// retried with backoff rather than returned: returning would stop the whole
// controller-runtime manager while the certificate on disk is most likely
// still valid. When ctx ends, a configuration this package registered
// (Options.Installed false) is removed. Start implements manager.Runnable.
func (m *Manager) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithValues("secret", klog.KRef(m.opts.Namespace, m.opts.SecretName))
	defer func() {
		// ctx has ended: the removal gets a short context of its own.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeTimeout)
		defer cancel()
		if err := m.removeWebhookConfiguration(rctx); err != nil {
			log.Error(err, "Removing the webhook configuration failed")
		}
	}()
	retry := m.retryInterval
	for {
		var wait time.Duration
		if err := m.Ensure(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			log.Error(err, "Keeping the webhook certificate current failed", "retryAfter", retry)
			wait, retry = retry, min(2*retry, m.checkInterval)
		} else {
			retry = m.retryInterval
			wait = nextCheck(m.renewalDue(), m.now(), m.checkInterval, m.retryInterval)
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-timer.C:
		}
	}
}

// NeedLeaderElection returns false: every replica serves the webhook, so
// every replica keeps its certificate files current.
func (m *Manager) NeedLeaderElection() bool { return false }

// nextCheck is how long Start waits after a successful Ensure: until
// renewAt, but at most interval and at least floor, so a clock that jumps
// cannot make Start spin.
func nextCheck(renewAt, now time.Time, interval, floor time.Duration) time.Duration {
	return max(floor, min(renewAt.Sub(now), interval))
}

func (m *Manager) renewalDue() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.renewAt
}

func (m *Manager) planInput() planInput {
	return planInput{now: m.now(), hosts: m.opts.Hosts, validity: m.opts.Validity, renewBefore: m.opts.RenewBefore}
}
