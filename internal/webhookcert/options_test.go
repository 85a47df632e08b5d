package webhookcert

import (
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/utils/ptr"
)

func validOptions() Options {
	return Options{
		Namespace:         "pitstop-system",
		SecretName:        "pitstop-webhook-cert",
		CertDir:           "/tmp/k8s-webhook-server/serving-certs",
		Hosts:             []string{testHost, "127.0.0.1"},
		WebhookConfigName: "pitstop-validating-webhook",
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "vnodemaintenance.pitstop.dev",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{
				Service: &admissionregistrationv1.ServiceReference{Namespace: "pitstop-system", Name: "pitstop-webhook", Path: ptr.To("/validate")},
			},
		}},
	}
}

func TestOptionsValidate(t *testing.T) {
	if err := validOptions().Validate(); err != nil {
		t.Fatalf("valid options: %v", err)
	}
	for _, tc := range []struct {
		name  string
		edit  func(*Options)
		field string
	}{
		{"refuses an empty namespace", func(o *Options) { o.Namespace = "" }, "Namespace="},
		{"refuses a Secret name that is not a DNS name", func(o *Options) { o.SecretName = "Webhook_Cert" }, "SecretName="},
		{"refuses an empty cert dir", func(o *Options) { o.CertDir = "" }, "CertDir="},
		{"refuses no hosts", func(o *Options) { o.Hosts = nil }, "Hosts="},
		{"refuses a host that is neither a DNS name nor an IP", func(o *Options) { o.Hosts = append(o.Hosts, "https://x") }, "Hosts[2]="},
		{"refuses an empty webhook configuration name", func(o *Options) { o.WebhookConfigName = "" }, "WebhookConfigName="},
		{"refuses no webhooks", func(o *Options) { o.Webhooks = nil }, "Webhooks="},
		{"refuses a webhook without a name", func(o *Options) { o.Webhooks[0].Name = "" }, "Webhooks[0].Name="},
		{"refuses two webhooks with one name", func(o *Options) { o.Webhooks = append(o.Webhooks, o.Webhooks[0]) }, "Webhooks[1].Name="},
		{"refuses a webhook with neither a service nor a URL", func(o *Options) { o.Webhooks[0].ClientConfig.Service = nil }, "Webhooks[0].ClientConfig="},
		{"refuses a webhook with both a service and a URL", func(o *Options) { o.Webhooks[0].ClientConfig.URL = ptr.To("https://127.0.0.1:9443/validate") }, "Webhooks[0].ClientConfig="},
		{"refuses a negative validity", func(o *Options) { o.Validity = -time.Hour }, "Validity="},
		{"refuses a negative renewal window", func(o *Options) { o.RenewBefore = -time.Hour }, "RenewBefore="},
		{"refuses a validity as long as the CA's", func(o *Options) { o.Validity = caValidity }, "Validity="},
		{"refuses a renewal window as long as the validity", func(o *Options) { o.Validity, o.RenewBefore = 24*time.Hour, 24*time.Hour }, "RenewBefore="},
		{"refuses a renewal window longer than the default validity", func(o *Options) { o.RenewBefore = 2 * year }, "RenewBefore="},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := validOptions()
			tc.edit(&o)
			err := o.Validate()
			if err == nil || !strings.Contains(err.Error(), " "+tc.field) {
				t.Fatalf("Validate() = %v, want an error naming %s", err, strings.TrimSuffix(tc.field, "="))
			}
			if _, err := New(nil, o); err == nil {
				t.Fatalf("New accepted options that Validate refuses")
			}
		})
	}
}

func TestNewCopiesOptions(t *testing.T) {
	o := validOptions()
	m, err := New(env.Client, o)
	if err != nil {
		t.Fatal(err)
	}
	o.Hosts[0] = "changed.svc"
	o.Webhooks[0].Name = "changed"
	o.Webhooks[0].ClientConfig.Service.Name = "changed"
	if m.opts.Hosts[0] != testHost || m.opts.Webhooks[0].Name == "changed" || m.opts.Webhooks[0].ClientConfig.Service.Name == "changed" {
		t.Fatalf("the Manager follows changes to the caller's Options: %+v", m.opts)
	}
	if m.opts.Validity != defaultValidity || m.opts.RenewBefore != defaultRenewBefore {
		t.Fatalf("durations %s and %s, want the defaults", m.opts.Validity, m.opts.RenewBefore)
	}
	if _, err := New(nil, validOptions()); err == nil {
		t.Fatal("New accepted a nil client")
	}
}
