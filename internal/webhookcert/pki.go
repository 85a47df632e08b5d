package webhookcert

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Keys of the Secret besides corev1.TLSCertKey and corev1.TLSPrivateKeyKey.
const (
	// caCertKey holds the CA bundle: the signing CA first, then at most one
	// previous CA, kept trusted while replicas that have not yet picked up
	// the new certificate still serve one it signed. It stays until the
	// next CA replacement; once expired it verifies nothing.
	caCertKey = "ca.crt"
	// caKeyKey holds the signing CA's private key.
	caKeyKey = "ca.key"
)

// backdate is how far in the past certificates start, so that a replica or
// API server whose clock lags a little still accepts a certificate issued a
// moment ago.
const backdate = time.Hour

// bundle is the Secret's content, parsed. A part that is missing, cannot be
// parsed or is of the wrong kind is nil; plan then decides what to replace.
type bundle struct {
	ca    *x509.Certificate // signs serving certificates; first in ca.crt
	caKey crypto.Signer
	cert  *x509.Certificate // the serving certificate (leaf of tls.crt)
	key   crypto.Signer
	// The PEM data as stored, written back unchanged when kept. caPEM is
	// the CA bundle that webhook clients trust.
	caPEM, caKeyPEM, certPEM, keyPEM []byte
}

// parseBundle reads Secret data. It never fails: what cannot be used is left
// nil, to be replaced.
func parseBundle(data map[string][]byte) bundle {
	b := bundle{
		caPEM:    data[caCertKey],
		caKeyPEM: data[caKeyKey],
		certPEM:  data[corev1.TLSCertKey],
		keyPEM:   data[corev1.TLSPrivateKeyKey],
	}
	if cas := parseCertificates(b.caPEM); len(cas) > 0 {
		b.ca = cas[0]
	}
	b.caKey = parsePrivateKey(b.caKeyPEM)
	if certs := parseCertificates(b.certPEM); len(certs) > 0 {
		b.cert = certs[0]
	}
	b.key = parsePrivateKey(b.keyPEM)
	return b
}

// secretData is the inverse of parseBundle, for the keys this package owns.
func (b bundle) secretData() map[string][]byte {
	return map[string][]byte{
		caCertKey:               b.caPEM,
		caKeyKey:                b.caKeyPEM,
		corev1.TLSCertKey:       b.certPEM,
		corev1.TLSPrivateKeyKey: b.keyPEM,
	}
}

// parseCertificates returns every certificate in PEM data that parses,
// skipping anything else.
func parseCertificates(data []byte) []*x509.Certificate {
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return certs
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if c, err := x509.ParseCertificate(block.Bytes); err == nil {
			certs = append(certs, c)
		}
	}
}

// parsePrivateKey reads the first PEM block as a PKCS#8, SEC 1 (EC) or
// PKCS#1 (RSA) private key, so a Secret provisioned by other tools still
// works; nil when it is none of these.
func parsePrivateKey(data []byte) crypto.Signer {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil
	}
	if k, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
		if s, ok := k.(crypto.Signer); ok {
			return s
		}
		return nil
	}
	if k, err := x509.ParseECPrivateKey(block.Bytes); err == nil {
		return k
	}
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return k
	}
	return nil
}

// keyMatches reports whether key is the private half of cert's public key.
func keyMatches(cert *x509.Certificate, key crypto.Signer) bool {
	pub, ok := cert.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	return ok && pub.Equal(key.Public())
}

// keyPair is a freshly issued certificate and its key.
type keyPair struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
	keyPEM  []byte
}

// newCA issues a self-signed CA valid from now (backdated) for caValidity.
func newCA(now time.Time) (keyPair, error) {
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "pitstop-webhook-ca"},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	return sign(tmpl, nil, nil)
}

// newServingCert issues a serving certificate for hosts, signed by ca, valid
// from now (backdated) for validity.
func newServingCert(ca *x509.Certificate, caKey crypto.Signer, hosts []string, now time.Time, validity time.Duration) (keyPair, error) {
	tmpl := &x509.Certificate{
		NotBefore:   now.Add(-backdate),
		NotAfter:    now.Add(validity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	// Clients check the subject alternative names; the common name is only
	// for people, and X.509 allows at most 64 characters in it.
	if len(hosts[0]) <= 64 {
		tmpl.Subject.CommonName = hosts[0]
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return sign(tmpl, ca, caKey)
}

// sign makes a P-256 key and a certificate for it from tmpl, signed by
// parent and parentKey, or self-signed when parent is nil.
func sign(tmpl, parent *x509.Certificate, parentKey crypto.Signer) (keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, fmt.Errorf("generating key: %w", err)
	}
	// RFC 5280 allows up to 20 octets; 128 random bits make collisions
	// between replicas issuing at the same moment practically impossible.
	if tmpl.SerialNumber, err = rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128)); err != nil {
		return keyPair{}, fmt.Errorf("generating serial number: %w", err)
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		return keyPair{}, fmt.Errorf("signing certificate %q: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return keyPair{}, fmt.Errorf("parsing new certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return keyPair{}, fmt.Errorf("encoding private key: %w", err)
	}
	return keyPair{
		cert:    cert,
		key:     key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// encodeCertificate returns cert as PEM.
func encodeCertificate(cert *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
}

// issue returns the bundle that carries out d: a new serving
// certificate for in.hosts, signed by the stored CA or, when d.newCA, by a
// new CA. When d.keepOldCA the stored CA stays in the bundle after the new
// one, so replicas still serving certificates it signed keep being trusted
// until they pick up the new certificate.
func issue(b bundle, d decision, in planInput) (bundle, error) {
	if !d.newCert {
		return bundle{}, errors.New("issue called for a decision that keeps the certificate")
	}
	if d.newCA {
		ca, err := newCA(in.now)
		if err != nil {
			return bundle{}, fmt.Errorf("issuing CA: %w", err)
		}
		caPEM := ca.certPEM
		if d.keepOldCA && b.ca != nil && in.now.Before(b.ca.NotAfter) {
			caPEM = append(bytes.Clone(caPEM), encodeCertificate(b.ca)...)
		}
		b.ca, b.caKey, b.caPEM, b.caKeyPEM = ca.cert, ca.key, caPEM, ca.keyPEM
	}
	cert, err := newServingCert(b.ca, b.caKey, in.hosts, in.now, in.validity)
	if err != nil {
		return bundle{}, fmt.Errorf("issuing serving certificate: %w", err)
	}
	b.cert, b.key, b.certPEM, b.keyPEM = cert.cert, cert.key, cert.certPEM, cert.keyPEM
	return b, nil
}
