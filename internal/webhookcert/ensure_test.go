package webhookcert

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pitstop-dev/pitstop/internal/testutil"
)

func TestEnsureFromScratch(t *testing.T) {
	o := newOptions(t, "placeholder", "127.0.0.1", "::1")
	o.Hosts[0] = svcHost(o)
	rec := newRecorder(t)
	m := newManager(t, rec, o, nil)
	ensure(t, m)

	if got, want := rec.takeWrites(), []string{"create Secret", "create ValidatingWebhookConfiguration"}; !slices.Equal(got, want) {
		t.Errorf("writes %v, want %v", got, want)
	}
	secret := getSecret(t, o)
	if secret.Type != corev1.SecretTypeTLS {
		t.Errorf("Secret type %q, want %q", secret.Type, corev1.SecretTypeTLS)
	}
	for _, key := range []string{"ca.crt", "ca.key", "tls.crt", "tls.key"} {
		if len(secret.Data[key]) == 0 {
			t.Errorf("Secret has no %s", key)
		}
	}
	for _, key := range []string{"tls.crt", "tls.key"} {
		data, err := os.ReadFile(filepath.Join(o.CertDir, key))
		if err != nil {
			t.Fatal(err)
		}
		if string(data) != string(secret.Data[key]) {
			t.Errorf("%s on disk differs from the Secret's", key)
		}
	}
	if _, err := tls.LoadX509KeyPair(filepath.Join(o.CertDir, "tls.crt"), filepath.Join(o.CertDir, "tls.key")); err != nil {
		t.Errorf("the written files are not a key pair: %v", err)
	}

	vwc := getWebhookConfiguration(t, o)
	var names []string
	for _, w := range vwc.Webhooks {
		names = append(names, w.Name)
	}
	if !slices.Equal(names, []string{"vwidget.example.com", "vgadget.example.com"}) {
		t.Errorf("webhooks %v, want those of the Options", names)
	}
	caBundle := webhookCABundle(t, o)
	if string(caBundle) != string(secret.Data["ca.crt"]) {
		t.Errorf("the webhooks' CA bundle is not the Secret's ca.crt")
	}
	cert := writtenCert(t, o.CertDir)
	for _, host := range o.Hosts {
		if err := verifyFor(cert, caBundle, host, time.Now()); err != nil {
			t.Errorf("the written certificate does not verify for %s against the webhooks' CA bundle: %v", host, err)
		}
	}
	if err := verifyFor(cert, caBundle, "pitstop-webhook.elsewhere.svc", time.Now()); err == nil {
		t.Errorf("the written certificate verifies for a host it was not issued for")
	}

	// The API server filled in defaults; Ensure must not mistake them for
	// differences and write again.
	if vwc.Webhooks[0].TimeoutSeconds == nil || vwc.Webhooks[0].MatchPolicy == nil {
		t.Fatalf("the API server did not default the webhooks: %+v", vwc.Webhooks[0])
	}
	ensure(t, m)
	if got := rec.takeWrites(); len(got) != 0 {
		t.Errorf("a second Ensure with nothing to change wrote %v", got)
	}
	if getWebhookConfiguration(t, o).ResourceVersion != vwc.ResourceVersion || getSecret(t, o).ResourceVersion != secret.ResourceVersion {
		t.Errorf("a second Ensure with nothing to change changed a resourceVersion")
	}
}

func TestReplicaReusesCertificate(t *testing.T) {
	o := newOptions(t, "127.0.0.1")
	ensure(t, newManager(t, env.Client, o, nil))

	other := replica(t, o)
	rec := newRecorder(t)
	ensure(t, newManager(t, rec, other, nil))
	if got := rec.takeWrites(); len(got) != 0 {
		t.Errorf("the second replica wrote %v, want nothing", got)
	}
	first, second := writtenCert(t, o.CertDir), writtenCert(t, other.CertDir)
	if first.SerialNumber.Cmp(second.SerialNumber) != 0 {
		t.Errorf("the replicas serve serials %s and %s, want one certificate", first.SerialNumber, second.SerialNumber)
	}
}

func TestConcurrentReplicasAgree(t *testing.T) {
	o := newOptions(t, "127.0.0.1")
	o.Hosts = []string{svcHost(o)}
	const replicas = 6
	rec := newRecorder(t)
	opts := make([]Options, replicas)
	errs := make([]error, replicas)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range replicas {
		opts[i] = replica(t, o)
		m := newManager(t, rec, opts[i], nil)
		wg.Go(func() {
			<-start
			errs[i] = m.Ensure(t.Context())
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
	}

	secret := getSecret(t, o)
	for i := range replicas {
		data, err := os.ReadFile(filepath.Join(opts[i].CertDir, "tls.crt"))
		if err != nil {
			t.Fatal(err)
		}
		if string(data) != string(secret.Data["tls.crt"]) {
			t.Errorf("replica %d serves a certificate other than the Secret's", i)
		}
	}
	writes := rec.takeWrites()
	slices.Sort(writes)
	if want := []string{"create Secret", "create ValidatingWebhookConfiguration"}; !slices.Equal(writes, want) {
		t.Errorf("writes %v, want exactly %v: losers must adopt the winner's objects", writes, want)
	}
	if err := verifyFor(writtenCert(t, opts[0].CertDir), webhookCABundle(t, o), svcHost(o), time.Now()); err != nil {
		t.Errorf("the agreed certificate does not verify against the webhooks' CA bundle: %v", err)
	}
}

// TestLosingReplicaAdoptsWinnersCertificate stages each race exactly: the
// other replica writes between this replica's read and its write.
func TestLosingReplicaAdoptsWinnersCertificate(t *testing.T) {
	start := time.Now()
	renewal := start.Add(defaultValidity - defaultRenewBefore + time.Hour)
	for _, tc := range []struct {
		name string
		// setup runs before the race, with the real clock.
		setup func(t *testing.T, o Options)
		// at is the clock of both racing replicas.
		at         time.Time
		loserWrite string
	}{
		{
			name:       "a Create that finds the Secret already created",
			setup:      func(*testing.T, Options) {},
			at:         start,
			loserWrite: "create Secret",
		},
		{
			name: "an Update that finds the certificate already renewed",
			setup: func(t *testing.T, o Options) {
				ensure(t, newManager(t, env.Client, o, func() time.Time { return start }))
			},
			at:         renewal,
			loserWrite: "update Secret",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newOptions(t, "127.0.0.1")
			tc.setup(t, o)
			var before []byte
			if tc.loserWrite == "update Secret" {
				before = getSecret(t, o).Data["tls.crt"]
			}
			clock := func() time.Time { return tc.at }
			winner := newManager(t, env.Client, replica(t, o), clock)
			rec := newRecorder(t)
			var once sync.Once
			rec.before = func(verb, kind string) error {
				if verb+" "+kind == tc.loserWrite {
					once.Do(func() { ensure(t, winner) })
				}
				return nil
			}
			loser := newManager(t, rec, o, clock)
			ensure(t, loser)

			secret := getSecret(t, o)
			if string(secret.Data["tls.crt"]) == string(before) {
				t.Fatal("the race did not happen: the Secret still holds the old certificate")
			}
			for _, m := range []*Manager{winner, loser} {
				data, err := os.ReadFile(filepath.Join(m.opts.CertDir, "tls.crt"))
				if err != nil {
					t.Fatal(err)
				}
				if string(data) != string(secret.Data["tls.crt"]) {
					t.Errorf("a replica serves a certificate other than the Secret's")
				}
			}
			if got := rec.takeWrites(); slices.Contains(got, tc.loserWrite) {
				t.Errorf("the losing replica's %s went through: %v", tc.loserWrite, got)
			}
		})
	}
}

func TestChangedHosts(t *testing.T) {
	o := newOptions(t, "placeholder")
	o.Hosts = []string{svcHost(o)}
	ensure(t, newManager(t, env.Client, o, nil))
	first := getSecret(t, o)

	t.Run("a new host gets a new certificate from the same CA", func(t *testing.T) {
		more := replica(t, o)
		more.Hosts = []string{svcHost(o), "127.0.0.1"}
		rec := newRecorder(t)
		ensure(t, newManager(t, rec, more, nil))
		if got, want := rec.takeWrites(), []string{"update Secret"}; !slices.Equal(got, want) {
			t.Errorf("writes %v, want %v (the CA bundle did not change)", got, want)
		}
		second := getSecret(t, o)
		if string(second.Data["tls.crt"]) == string(first.Data["tls.crt"]) {
			t.Fatal("the certificate was kept though it lacks a host")
		}
		if string(second.Data["ca.crt"]) != string(first.Data["ca.crt"]) {
			t.Error("the CA was replaced though it is valid")
		}
		cert := writtenCert(t, more.CertDir)
		for _, host := range more.Hosts {
			if err := verifyFor(cert, webhookCABundle(t, o), host, time.Now()); err != nil {
				t.Errorf("the new certificate does not verify for %s: %v", host, err)
			}
		}
	})

	t.Run("a removed host keeps the certificate", func(t *testing.T) {
		kept := getSecret(t, o)
		rec := newRecorder(t)
		ensure(t, newManager(t, rec, replica(t, o), nil))
		if got := rec.takeWrites(); len(got) != 0 {
			t.Errorf("writes %v, want none", got)
		}
		if string(getSecret(t, o).Data["tls.crt"]) != string(kept.Data["tls.crt"]) {
			t.Error("the certificate was replaced though it covers every host")
		}
	})
}

// TestRenewal walks one replica's clock through a certificate's life and
// its CA's.
func TestRenewal(t *testing.T) {
	o := newOptions(t, "127.0.0.1")
	now := time.Now()
	rec := newRecorder(t)
	m := newManager(t, rec, o, func() time.Time { return now })
	ensure(t, m)
	rec.takeWrites()
	initial := getSecret(t, o)
	initialCA := parseBundle(initial.Data).ca

	for _, step := range []struct {
		name        string
		at          time.Time
		newCert     bool
		newCA       bool
		wantWrites  []string
		wantCACount int
	}{
		{"keeps the certificate just before its renewal window", now.Add(defaultValidity - defaultRenewBefore - time.Hour), false, false, nil, 1},
		{"renews the certificate in its renewal window, keeping the CA", now.Add(defaultValidity - defaultRenewBefore + time.Hour), true, false,
			[]string{"update Secret"}, 1},
		{"replaces the CA once it cannot outlive a new certificate, still trusting the old one", now.Add(caValidity - defaultValidity + time.Hour), true, true,
			[]string{"update Secret", "update ValidatingWebhookConfiguration"}, 2},
	} {
		t.Run(step.name, func(t *testing.T) {
			before := getSecret(t, o)
			now = step.at
			ensure(t, m)
			if got := rec.takeWrites(); !slices.Equal(got, step.wantWrites) {
				t.Errorf("writes %v, want %v", got, step.wantWrites)
			}
			after := getSecret(t, o)
			if changed := string(after.Data["tls.crt"]) != string(before.Data["tls.crt"]); changed != step.newCert {
				t.Errorf("certificate replaced: %v, want %v", changed, step.newCert)
			}
			if changed := string(after.Data["ca.key"]) != string(before.Data["ca.key"]); changed != step.newCA {
				t.Errorf("CA replaced: %v, want %v", changed, step.newCA)
			}
			caBundle := webhookCABundle(t, o)
			if string(caBundle) != string(after.Data["ca.crt"]) {
				t.Errorf("the webhooks' CA bundle is not the Secret's ca.crt")
			}
			cas := parseCertificates(caBundle)
			if len(cas) != step.wantCACount {
				t.Errorf("the CA bundle holds %d CAs, want %d", len(cas), step.wantCACount)
			}
			if step.newCA && (len(cas) < 2 || !cas[1].Equal(initialCA)) {
				t.Errorf("the CA bundle dropped the old CA, which replicas not yet renewed still serve certificates from")
			}
			cert := writtenCert(t, o.CertDir)
			if err := verifyFor(cert, caBundle, "127.0.0.1", step.at); err != nil {
				t.Errorf("the written certificate does not verify at %s: %v", step.at, err)
			}
			if !cert.NotAfter.After(step.at.Add(defaultRenewBefore)) {
				t.Errorf("the written certificate expires at %s, within the renewal window", cert.NotAfter)
			}
			if m.renewalDue().Before(step.at) {
				t.Errorf("renewal due at %s, before now (%s)", m.renewalDue(), step.at)
			}
		})
	}
}

// TestWebhookConfigurationIsRepaired checks that Ensure puts back exactly
// the configured webhooks, whatever was done to them.
func TestWebhookConfigurationIsRepaired(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tamper func(*admissionregistrationv1.ValidatingWebhookConfiguration)
	}{
		{"a webhook's CA bundle was replaced", func(v *admissionregistrationv1.ValidatingWebhookConfiguration) {
			other, err := newCA(time.Now())
			if err != nil {
				panic(err)
			}
			v.Webhooks[1].ClientConfig.CABundle = other.certPEM
		}},
		{"a webhook's CA bundle was removed", func(v *admissionregistrationv1.ValidatingWebhookConfiguration) {
			v.Webhooks[0].ClientConfig.CABundle = nil
		}},
		{"a webhook was added", func(v *admissionregistrationv1.ValidatingWebhookConfiguration) {
			extra := v.Webhooks[0].DeepCopy()
			extra.Name = "extra.example.com"
			v.Webhooks = append(v.Webhooks, *extra)
		}},
		{"a webhook was removed", func(v *admissionregistrationv1.ValidatingWebhookConfiguration) {
			v.Webhooks = v.Webhooks[:1]
		}},
		{"the webhooks were reordered", func(v *admissionregistrationv1.ValidatingWebhookConfiguration) {
			v.Webhooks[0], v.Webhooks[1] = v.Webhooks[1], v.Webhooks[0]
		}},
		{"a failure policy was changed", func(v *admissionregistrationv1.ValidatingWebhookConfiguration) {
			v.Webhooks[0].FailurePolicy = ptr.To(admissionregistrationv1.Fail)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newOptions(t, "127.0.0.1")
			rec := newRecorder(t)
			m := newManager(t, rec, o, nil)
			ensure(t, m)
			want := getWebhookConfiguration(t, o).Webhooks

			vwc := getWebhookConfiguration(t, o)
			tc.tamper(vwc)
			if err := env.Client.Update(t.Context(), vwc); err != nil {
				t.Fatal(err)
			}
			rec.takeWrites()
			ensure(t, m)
			if got := rec.takeWrites(); !slices.Equal(got, []string{"update ValidatingWebhookConfiguration"}) {
				t.Errorf("writes %v, want one update of the configuration", got)
			}
			got := getWebhookConfiguration(t, o).Webhooks
			if !equality.Semantic.DeepEqual(got, want) {
				gotJSON, _ := json.Marshal(got)
				wantJSON, _ := json.Marshal(want)
				t.Errorf("webhooks after repair:\n%s\nwant:\n%s", gotJSON, wantJSON)
			}
		})
	}

	t.Run("the configuration was deleted", func(t *testing.T) {
		o := newOptions(t, "127.0.0.1")
		m := newManager(t, env.Client, o, nil)
		ensure(t, m)
		deleteWebhookConfiguration(t, o.WebhookConfigName)
		ensure(t, m)
		if string(webhookCABundle(t, o)) != string(getSecret(t, o).Data["ca.crt"]) {
			t.Error("the recreated configuration does not carry the Secret's CA bundle")
		}
	})
}

// TestCABundleRace stages the race Ensure's last read of the Secret
// guards against: between this replica's read of the Secret and its write
// of the webhook configuration, another replica replaces the CA and writes
// its bundle. This replica's write then undoes it and must be redone.
func TestCABundleRace(t *testing.T) {
	o := newOptions(t, "127.0.0.1")
	other := newManager(t, env.Client, replica(t, o), nil)
	rec := newRecorder(t)
	var once sync.Once
	rec.before = func(verb, kind string) error {
		if verb == "get" && kind == "ValidatingWebhookConfiguration" {
			once.Do(func() {
				// Deleting the Secret makes the other replica start over
				// with a new CA, as after an operator deletes it.
				if err := env.Client.Delete(t.Context(), getSecret(t, o)); err != nil {
					t.Error(err)
				}
				ensure(t, other)
			})
		}
		return nil
	}
	ensure(t, newManager(t, rec, o, nil))

	secret := getSecret(t, o)
	caBundle := webhookCABundle(t, o)
	if string(caBundle) != string(secret.Data["ca.crt"]) {
		t.Fatal("the webhook configuration carries a CA bundle the Secret no longer holds")
	}
	for _, dir := range []string{o.CertDir, other.opts.CertDir} {
		if err := verifyFor(writtenCert(t, dir), caBundle, "127.0.0.1", time.Now()); err != nil {
			t.Errorf("a replica's certificate does not verify against the webhooks' CA bundle: %v", err)
		}
	}
}

func TestStart(t *testing.T) {
	if (&Manager{}).NeedLeaderElection() {
		t.Error("NeedLeaderElection() = true, want false: every replica serves the webhook")
	}

	// The API server fails the first reads: Start must keep retrying
	// rather than give up.
	o := newOptions(t, "127.0.0.1")
	rec := newRecorder(t)
	var failed atomic.Int32
	rec.before = func(verb, _ string) error {
		if verb == "get" && failed.Load() < 3 {
			failed.Add(1)
			return apierrors.NewServiceUnavailable("staged outage")
		}
		return nil
	}
	m := newManager(t, rec, o, nil)
	m.checkInterval, m.retryInterval = 200*time.Millisecond, 20*time.Millisecond
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- m.Start(ctx) }()

	testutil.Eventually(t, 10*time.Second, 20*time.Millisecond, func() error {
		_, err := os.Stat(filepath.Join(o.CertDir, "tls.crt"))
		return err
	})
	if failed.Load() != 3 {
		t.Fatalf("%d reads failed, want 3", failed.Load())
	}

	// Start repairs what changes behind its back within checkInterval.
	deleteWebhookConfiguration(t, o.WebhookConfigName)
	testutil.Eventually(t, 10*time.Second, 20*time.Millisecond, func() error {
		var vwc admissionregistrationv1.ValidatingWebhookConfiguration
		return env.Client.Get(t.Context(), client.ObjectKey{Name: o.WebhookConfigName}, &vwc)
	})

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Start returned %v, want nil when its context ends", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Start did not return after its context ended")
	}
}
