package webhookcert

import (
	"fmt"
	"net"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

const (
	// defaultValidity is the serving certificate's lifetime when
	// Options.Validity is zero.
	defaultValidity = 365 * 24 * time.Hour
	// defaultRenewBefore is how long before expiry the serving certificate
	// is replaced when Options.RenewBefore is zero.
	defaultRenewBefore = 30 * 24 * time.Hour
	// caValidity is the CA's lifetime. It is replaced once less than one
	// serving-certificate lifetime remains.
	caValidity = 10 * 365 * 24 * time.Hour
)

// Options says where the serving certificate lives and which webhook
// configuration carries its CA. Every replica must be given the same Options.
type Options struct {
	// Namespace is the namespace of the Secret.
	Namespace string
	// SecretName names the Secret (type kubernetes.io/tls plus "ca.crt" and
	// "ca.key") that holds the CA and the serving certificate, shared by all
	// replicas.
	SecretName string
	// CertDir is the directory where tls.crt and tls.key are written for
	// controller-runtime's webhook server.
	CertDir string
	// Hosts are the DNS names and IP addresses the serving certificate must
	// be valid for, e.g. "pitstop-webhook.pitstop-system.svc" or "127.0.0.1".
	Hosts []string
	// WebhookConfigName names the ValidatingWebhookConfiguration that
	// carries the CA bundle.
	WebhookConfigName string
	// Installed says the webhook configuration belongs to the install (the
	// Helm chart or pitstop.yaml), which creates it and removes it on
	// uninstall: this package then only writes the CA bundle into its
	// webhooks, and never creates, reshapes or deletes it. Otherwise this
	// package registers Webhooks itself and removes the configuration when
	// Start returns.
	Installed bool
	// Webhooks are the full webhook definitions, with a ClientConfig that
	// names a Service or a URL. Their CABundle is filled in by this package.
	// They are required unless Installed is set, and unused if it is.
	Webhooks []admissionregistrationv1.ValidatingWebhook
	// Validity is the serving certificate's lifetime: one year when zero.
	// The CA lives ten years.
	Validity time.Duration
	// RenewBefore is how long before expiry the serving certificate is
	// replaced: 30 days when zero.
	RenewBefore time.Duration
}

// Validate returns an error naming the first field that cannot work.
func (o Options) Validate() error {
	if errs := validation.IsDNS1123Label(o.Namespace); len(errs) > 0 {
		return optionError("Namespace", o.Namespace, errs[0])
	}
	if errs := validation.IsDNS1123Subdomain(o.SecretName); len(errs) > 0 {
		return optionError("SecretName", o.SecretName, errs[0])
	}
	if o.CertDir == "" {
		return optionError("CertDir", o.CertDir, "must not be empty")
	}
	if len(o.Hosts) == 0 {
		return optionError("Hosts", "", "must name at least one DNS name or IP address")
	}
	for i, h := range o.Hosts {
		if net.ParseIP(h) != nil {
			continue
		}
		if errs := validation.IsDNS1123Subdomain(h); len(errs) > 0 {
			return optionError(fmt.Sprintf("Hosts[%d]", i), h, "must be an IP address or a DNS name: "+errs[0])
		}
	}
	if errs := validation.IsDNS1123Subdomain(o.WebhookConfigName); len(errs) > 0 {
		return optionError("WebhookConfigName", o.WebhookConfigName, errs[0])
	}
	if o.Installed {
		if len(o.Webhooks) > 0 {
			return optionError("Webhooks", o.Webhooks[0].Name, "must be empty when Installed is set: the install defines the webhooks")
		}
	} else if err := validateWebhooks(o.Webhooks); err != nil {
		return err
	}
	return validateDurations(o)
}

func validateWebhooks(webhooks []admissionregistrationv1.ValidatingWebhook) error {
	if len(webhooks) == 0 {
		return optionError("Webhooks", "", "must hold at least one webhook")
	}
	seen := make(map[string]bool, len(webhooks))
	for i, w := range webhooks {
		field := fmt.Sprintf("Webhooks[%d]", i)
		if w.Name == "" {
			return optionError(field+".Name", "", "must not be empty")
		}
		if seen[w.Name] {
			return optionError(field+".Name", w.Name, "is used by an earlier webhook; names must be unique")
		}
		seen[w.Name] = true
		if (w.ClientConfig.Service == nil) == (w.ClientConfig.URL == nil) {
			return optionError(field+".ClientConfig", w.Name, "must set exactly one of Service and URL")
		}
	}
	return nil
}

func validateDurations(o Options) error {
	if o.Validity < 0 {
		return optionError("Validity", o.Validity.String(), "must not be negative")
	}
	if o.RenewBefore < 0 {
		return optionError("RenewBefore", o.RenewBefore.String(), "must not be negative")
	}
	d := o.withDefaults()
	if d.Validity >= caValidity {
		return optionError("Validity", d.Validity.String(), "must be shorter than the CA's lifetime ("+caValidity.String()+")")
	}
	// Otherwise every freshly issued certificate would already be due for
	// renewal, and replicas would replace it on every check.
	if d.RenewBefore >= d.Validity {
		return optionError("RenewBefore", d.RenewBefore.String(), "must be shorter than Validity ("+d.Validity.String()+")")
	}
	return nil
}

func optionError(field, value, reason string) error {
	return fmt.Errorf("invalid webhookcert option %s=%q: %s", field, value, reason)
}

// withDefaults fills in the zero durations.
func (o Options) withDefaults() Options {
	if o.Validity == 0 {
		o.Validity = defaultValidity
	}
	if o.RenewBefore == 0 {
		o.RenewBefore = defaultRenewBefore
	}
	return o
}

// clone copies the slices, so a caller that changes its Options after New
// does not change a running Manager.
func (o Options) clone() Options {
	o.Hosts = append([]string(nil), o.Hosts...)
	webhooks := make([]admissionregistrationv1.ValidatingWebhook, len(o.Webhooks))
	for i := range o.Webhooks {
		o.Webhooks[i].DeepCopyInto(&webhooks[i])
	}
	o.Webhooks = webhooks
	return o
}
