package webhookcert

import (
	"crypto/x509"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// t0 is the fake clock's "now" in the pure tests.
var t0 = time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)

const (
	year  = 365 * 24 * time.Hour
	month = 30 * 24 * time.Hour
)

const testHost = "pitstop-webhook.pitstop-system.svc"

func mustCA(t *testing.T, now time.Time) keyPair {
	t.Helper()
	ca, err := newCA(now)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func mustCert(t *testing.T, ca keyPair, hosts []string, now time.Time, validity time.Duration) keyPair {
	t.Helper()
	c, err := newServingCert(ca.cert, ca.key, hosts, now, validity)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// secret builds Secret data from PEM parts; nil parts are left out.
func secret(caPEM, caKeyPEM, certPEM, keyPEM []byte) map[string][]byte {
	data := map[string][]byte{}
	for k, v := range map[string][]byte{caCertKey: caPEM, caKeyKey: caKeyPEM, corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM} {
		if v != nil {
			data[k] = v
		}
	}
	return data
}

func input(now time.Time, hosts ...string) planInput {
	return planInput{now: now, hosts: hosts, validity: year, renewBefore: month}
}

func TestPlan(t *testing.T) {
	ca := mustCA(t, t0.Add(-year))
	otherCA := mustCA(t, t0.Add(-year))
	oldCA := mustCA(t, t0.Add(-caValidity+year/2)) // expires in half a year
	fresh := mustCert(t, ca, []string{testHost, "127.0.0.1"}, t0.Add(-month), year)
	notCA := mustCert(t, ca, []string{"not-a-ca"}, t0.Add(-month), year)
	fromOtherCA := mustCert(t, otherCA, []string{testHost, "127.0.0.1"}, t0.Add(-month), year)
	future := mustCert(t, ca, []string{testHost}, t0.Add(2*backdate), year)
	good := func(cert keyPair) map[string][]byte { return secret(ca.certPEM, ca.keyPEM, cert.certPEM, cert.keyPEM) }

	for _, tc := range []struct {
		name      string
		data      map[string][]byte
		in        planInput
		reason    string // empty: keep
		newCA     bool
		keepOldCA bool
	}{
		{name: "keeps a valid certificate for the same hosts", data: good(fresh), in: input(t0, testHost, "127.0.0.1")},
		{name: "keeps a certificate that covers more hosts than asked for", data: good(fresh), in: input(t0, testHost)},
		{name: "keeps a certificate just before its renewal window", data: good(fresh),
			in: input(fresh.cert.NotAfter.Add(-month-time.Second), testHost)},
		{name: "keeps an IP host written differently", data: good(fresh), in: input(t0, "::ffff:127.0.0.1")},
		{name: "issues a CA and a certificate when the Secret is empty", data: nil, in: input(t0, testHost),
			reason: reasonCAMissing, newCA: true},
		{name: "issues a CA when the CA key is missing", data: secret(ca.certPEM, nil, fresh.certPEM, fresh.keyPEM), in: input(t0, testHost),
			reason: reasonCAMissing, newCA: true},
		{name: "issues a CA when ca.crt is not PEM", data: secret([]byte("garbage"), ca.keyPEM, fresh.certPEM, fresh.keyPEM), in: input(t0, testHost),
			reason: reasonCAMissing, newCA: true},
		{name: "issues a CA when the CA key belongs to another CA", data: secret(ca.certPEM, otherCA.keyPEM, fresh.certPEM, fresh.keyPEM), in: input(t0, testHost),
			reason: reasonCAKeyMismatch, newCA: true},
		{name: "issues a CA when ca.crt may not sign certificates", data: secret(notCA.certPEM, notCA.keyPEM, fresh.certPEM, fresh.keyPEM), in: input(t0, testHost),
			reason: reasonCANotCA, newCA: true},
		{name: "issues a CA when the CA is not valid yet", data: good(fresh), in: input(ca.cert.NotBefore.Add(-time.Second), testHost),
			reason: reasonCANotYetValid, newCA: true},
		{name: "issues a CA, still trusting the old one, when the CA would expire before a new certificate",
			data: secret(oldCA.certPEM, oldCA.keyPEM, fresh.certPEM, fresh.keyPEM), in: input(t0, testHost),
			reason: reasonCAExpiring, newCA: true, keepOldCA: true},
		{name: "issues a certificate when tls.crt is missing", data: secret(ca.certPEM, ca.keyPEM, nil, fresh.keyPEM), in: input(t0, testHost),
			reason: reasonCertMissing},
		{name: "issues a certificate when tls.key is not a key", data: secret(ca.certPEM, ca.keyPEM, fresh.certPEM, fresh.certPEM), in: input(t0, testHost),
			reason: reasonCertMissing},
		{name: "issues a certificate when tls.key belongs to another certificate", data: secret(ca.certPEM, ca.keyPEM, fresh.certPEM, notCA.keyPEM), in: input(t0, testHost),
			reason: reasonCertKeyMismatch},
		{name: "issues a certificate when it is not valid yet", data: good(future), in: input(t0, testHost),
			reason: reasonCertNotYetValid},
		{name: "issues a certificate when it enters its renewal window", data: good(fresh), in: input(fresh.cert.NotAfter.Add(-month), testHost),
			reason: reasonCertExpiring},
		{name: "issues a certificate when it has expired", data: good(fresh), in: input(fresh.cert.NotAfter.Add(time.Hour), testHost),
			reason: reasonCertExpiring},
		{name: "issues a certificate when it was signed by another CA", data: good(fromOtherCA), in: input(t0, testHost),
			reason: reasonCertNotSignedByCA},
		{name: "issues a certificate when a DNS name was added", data: good(fresh), in: input(t0, testHost, "pitstop-webhook.pitstop-system.svc.cluster.local"),
			reason: reasonCertMissingHosts},
		{name: "issues a certificate when an IP address was added", data: good(fresh), in: input(t0, testHost, "10.0.0.1"),
			reason: reasonCertMissingHosts},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := parseBundle(tc.data)
			d := plan(b, tc.in)
			if d.reason != tc.reason || d.newCA != tc.newCA || d.keepOldCA != tc.keepOldCA || d.keep() != (tc.reason == "") {
				t.Fatalf("plan = %+v, want reason %q newCA=%v keepOldCA=%v", d, tc.reason, tc.newCA, tc.keepOldCA)
			}
			if d.keep() {
				return
			}
			// Whatever plan wanted replaced, issue's answer is kept.
			issued, err := issue(b, d, tc.in)
			if err != nil {
				t.Fatal(err)
			}
			reread := parseBundle(issued.secretData())
			if again := plan(reread, tc.in); !again.keep() {
				t.Fatalf("plan of the issued bundle = %+v, want keep", again)
			}
			cas := parseCertificates(reread.caPEM)
			switch {
			case !tc.newCA && string(reread.caPEM) != string(b.caPEM):
				t.Errorf("the CA bundle changed though only the certificate was due")
			case !tc.newCA && string(reread.caKeyPEM) != string(b.caKeyPEM):
				t.Errorf("the CA key changed though only the certificate was due")
			case tc.newCA && cas[0].Equal(b.ca):
				t.Errorf("the CA was kept though it was due")
			case tc.keepOldCA && (len(cas) != 2 || !cas[1].Equal(b.ca)):
				t.Errorf("the bundle holds %d CAs, want the new one and then the old one", len(cas))
			case tc.newCA && !tc.keepOldCA && len(cas) != 1:
				t.Errorf("the bundle holds %d CAs, want only the new one", len(cas))
			}
		})
	}
}

// TestRenewalTime checks that renewalTime is exactly when plan stops
// keeping a bundle, so Start's timer fires neither early nor late.
func TestRenewalTime(t *testing.T) {
	ca := mustCA(t, t0.Add(-year))
	oldCA := mustCA(t, t0.Add(-caValidity+year+year/2)) // must be replaced half a year from t0
	for _, tc := range []struct {
		name   string
		ca     keyPair
		want   func(cert keyPair) time.Time
		reason string
	}{
		{"is the start of the certificate's renewal window when the CA lives long", ca,
			func(cert keyPair) time.Time { return cert.cert.NotAfter.Add(-month) }, reasonCertExpiring},
		{"is when the CA can no longer outlive a new certificate, if that comes first", oldCA,
			func(keyPair) time.Time { return oldCA.cert.NotAfter.Add(-year) }, reasonCAExpiring},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cert := mustCert(t, tc.ca, []string{testHost}, t0, year)
			b := parseBundle(secret(tc.ca.certPEM, tc.ca.keyPEM, cert.certPEM, cert.keyPEM))
			got := renewalTime(b, input(t0, testHost))
			if want := tc.want(cert); !got.Equal(want) {
				t.Fatalf("renewalTime = %s, want %s", got, want)
			}
			if d := plan(b, input(got.Add(-time.Nanosecond), testHost)); !d.keep() {
				t.Errorf("just before the renewal time plan = %+v, want keep", d)
			}
			if d := plan(b, input(got, testHost)); d.reason != tc.reason {
				t.Errorf("at the renewal time plan = %+v, want reason %s", d, tc.reason)
			}
		})
	}
}

func TestNextCheck(t *testing.T) {
	for _, tc := range []struct {
		name    string
		renewAt time.Time
		want    time.Duration
	}{
		{"waits until the renewal time when it is near", t0.Add(10 * time.Minute), 10 * time.Minute},
		{"waits at most the check interval", t0.Add(year), time.Hour},
		{"waits at least the floor when the renewal time has passed", t0.Add(-time.Hour), 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := nextCheck(tc.renewAt, t0, time.Hour, 5*time.Second); got != tc.want {
				t.Fatalf("nextCheck = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestNewServingCert checks the certificate a webhook client sees: valid for
// every host, for server authentication, and for the requested time.
func TestNewServingCert(t *testing.T) {
	ca := mustCA(t, t0)
	cert := mustCert(t, ca, []string{testHost, "127.0.0.1", "::1"}, t0, year)
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	for _, host := range []string{testHost, "127.0.0.1", "::1"} {
		if _, err := cert.cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: host, CurrentTime: t0}); err != nil {
			t.Errorf("verifying for %s: %v", host, err)
		}
	}
	if _, err := cert.cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: "other.svc", CurrentTime: t0}); err == nil {
		t.Errorf("the certificate verifies for a host it was not issued for")
	}
	if !cert.cert.NotAfter.Equal(t0.Add(year)) || !cert.cert.NotBefore.Equal(t0.Add(-backdate)) {
		t.Errorf("validity %s to %s, want %s to %s", cert.cert.NotBefore, cert.cert.NotAfter, t0.Add(-backdate), t0.Add(year))
	}
	if ca.cert.Equal(cert.cert) || ca.cert.SerialNumber.Cmp(cert.cert.SerialNumber) == 0 {
		t.Errorf("the CA and the certificate share a serial number")
	}
}
