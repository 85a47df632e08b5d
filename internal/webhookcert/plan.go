package webhookcert

import (
	"crypto/x509"
	"fmt"
	"net"
	"strings"
	"time"
)

// Reasons plan gives for replacing certificates, logged with the decision.
const (
	reasonCAMissing         = "CAMissing"
	reasonCAKeyMismatch     = "CAKeyMismatch"
	reasonCANotCA           = "CANotACertificateAuthority"
	reasonCANotYetValid     = "CANotYetValid"
	reasonCAExpiring        = "CAExpiring"
	reasonCertMissing       = "CertificateMissing"
	reasonCertKeyMismatch   = "CertificateKeyMismatch"
	reasonCertNotYetValid   = "CertificateNotYetValid"
	reasonCertExpiring      = "CertificateExpiring"
	reasonCertNotSignedByCA = "CertificateNotSignedByCA"
	reasonCertMissingHosts  = "CertificateMissingHosts"
)

// planInput is what plan decides on besides the Secret's content.
type planInput struct {
	now         time.Time
	hosts       []string
	validity    time.Duration // of a serving certificate issued now
	renewBefore time.Duration
}

// decision is plan's answer. The zero decision keeps everything.
type decision struct {
	newCA     bool // issue a new CA (and so a new serving certificate)
	newCert   bool // issue a new serving certificate
	keepOldCA bool // keep trusting the replaced CA, which is still healthy but expiring
	reason    string
	message   string
}

// keep reports whether the Secret is fine as it is.
func (d decision) keep() bool { return !d.newCert }

// check is one reason to replace certificates: failed is true when b has
// the problem, with a reason constant and a message for people.
type check func(b bundle, in planInput) (reason, message string, failed bool)

// plan decides whether b can keep serving in.hosts at in.now. Checks run in
// order and the first that fails decides, as in cert-manager's issuing
// policy chain: CA checks first, since a new CA means a new serving
// certificate anyway. A serving certificate that covers more than in.hosts
// is kept: during a rolling update that adds a host, old replicas would
// otherwise replace the new replicas' certificate and the two would take
// turns. A removed host disappears at the next renewal.
func plan(b bundle, in planInput) decision {
	for _, c := range []check{caMissing, caKeyMismatch, caNotCA, caNotYetValid, caExpiring} {
		if reason, msg, failed := c(b, in); failed {
			return decision{newCA: true, newCert: true, keepOldCA: reason == reasonCAExpiring, reason: reason, message: msg}
		}
	}
	for _, c := range []check{certMissing, certKeyMismatch, certNotYetValid, certExpiring, certNotSignedByCA, certMissingHosts} {
		if reason, msg, failed := c(b, in); failed {
			return decision{newCert: true, reason: reason, message: msg}
		}
	}
	return decision{}
}

// renewalTime is when plan stops keeping b, if nothing else changes: when
// the serving certificate enters its renewal window or the CA can no longer
// outlive a serving certificate issued then, whichever comes first. b must
// be a bundle plan keeps.
func renewalTime(b bundle, in planInput) time.Time {
	certDue := b.cert.NotAfter.Add(-in.renewBefore)
	caDue := b.ca.NotAfter.Add(-in.validity)
	if caDue.Before(certDue) {
		return caDue
	}
	return certDue
}

func caMissing(b bundle, _ planInput) (string, string, bool) {
	if b.ca == nil || b.caKey == nil {
		return reasonCAMissing, "the Secret has no usable CA certificate and key", true
	}
	return "", "", false
}

func caKeyMismatch(b bundle, _ planInput) (string, string, bool) {
	if !keyMatches(b.ca, b.caKey) {
		return reasonCAKeyMismatch, "the CA key does not belong to the CA certificate", true
	}
	return "", "", false
}

func caNotCA(b bundle, _ planInput) (string, string, bool) {
	if !b.ca.IsCA || b.ca.KeyUsage&x509.KeyUsageCertSign == 0 {
		return reasonCANotCA, fmt.Sprintf("the CA certificate %q may not sign certificates", b.ca.Subject.CommonName), true
	}
	return "", "", false
}

func caNotYetValid(b bundle, in planInput) (string, string, bool) {
	if in.now.Before(b.ca.NotBefore) {
		return reasonCANotYetValid, fmt.Sprintf("the CA is valid only from %s", b.ca.NotBefore.UTC().Format(time.RFC3339)), true
	}
	return "", "", false
}

// caExpiring keeps a CA only if it outlives a serving certificate issued
// now, so no serving certificate ever outlives its CA.
func caExpiring(b bundle, in planInput) (string, string, bool) {
	if !in.now.Add(in.validity).Before(b.ca.NotAfter) {
		return reasonCAExpiring, fmt.Sprintf("the CA expires at %s, before a certificate issued now would", b.ca.NotAfter.UTC().Format(time.RFC3339)), true
	}
	return "", "", false
}

func certMissing(b bundle, _ planInput) (string, string, bool) {
	if b.cert == nil || b.key == nil {
		return reasonCertMissing, "the Secret has no usable serving certificate and key", true
	}
	return "", "", false
}

func certKeyMismatch(b bundle, _ planInput) (string, string, bool) {
	if !keyMatches(b.cert, b.key) {
		return reasonCertKeyMismatch, "tls.key does not belong to tls.crt", true
	}
	return "", "", false
}

func certNotYetValid(b bundle, in planInput) (string, string, bool) {
	if in.now.Before(b.cert.NotBefore) {
		return reasonCertNotYetValid, fmt.Sprintf("the serving certificate is valid only from %s", b.cert.NotBefore.UTC().Format(time.RFC3339)), true
	}
	return "", "", false
}

func certExpiring(b bundle, in planInput) (string, string, bool) {
	if !in.now.Before(b.cert.NotAfter.Add(-in.renewBefore)) {
		return reasonCertExpiring, fmt.Sprintf("the serving certificate expires at %s, within %s", b.cert.NotAfter.UTC().Format(time.RFC3339), in.renewBefore), true
	}
	return "", "", false
}

func certNotSignedByCA(b bundle, in planInput) (string, string, bool) {
	roots := x509.NewCertPool()
	roots.AddCert(b.ca)
	_, err := b.cert.Verify(x509.VerifyOptions{
		Roots:       roots,
		CurrentTime: in.now,
		KeyUsages:   []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return reasonCertNotSignedByCA, "the serving certificate does not verify against the CA: " + err.Error(), true
	}
	return "", "", false
}

func certMissingHosts(b bundle, in planInput) (string, string, bool) {
	if missing := missingHosts(b.cert, in.hosts); len(missing) > 0 {
		return reasonCertMissingHosts, "the serving certificate is not valid for " + strings.Join(missing, ", "), true
	}
	return "", "", false
}

// missingHosts returns the hosts that cert names neither as a DNS name nor
// as an IP address. Names are compared exactly (ignoring case), not as
// wildcards: this package never issues wildcards.
func missingHosts(cert *x509.Certificate, hosts []string) []string {
	var missing []string
	for _, h := range hosts {
		if !hasHost(cert, h) {
			missing = append(missing, h)
		}
	}
	return missing
}

func hasHost(cert *x509.Certificate, host string) bool {
	if ip := net.ParseIP(host); ip != nil {
		for _, certIP := range cert.IPAddresses {
			if certIP.Equal(ip) {
				return true
			}
		}
		return false
	}
	for _, name := range cert.DNSNames {
		if strings.EqualFold(name, host) {
			return true
		}
	}
	return false
}
