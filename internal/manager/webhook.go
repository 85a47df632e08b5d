package manager

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/controller/nodemaintenance"
	"github.com/pitstop-dev/pitstop/internal/controller/profile"
	"github.com/pitstop-dev/pitstop/internal/scheme"
	"github.com/pitstop-dev/pitstop/internal/webhookcert"
)

// WebhookOptions configure the admission webhook server and how the API
// server reaches it.
type WebhookOptions struct {
	// Host and Port are where the webhook server listens; Port 0 turns the
	// webhook off.
	Host string
	Port int
	// CertDir receives the serving certificate pitstop manages.
	CertDir string
	// Service is "namespace/name" of the Service in front of the manager's
	// pods; the API server calls the webhook through it.
	Service string
	// URL, when set, is the base URL the API server calls instead of the
	// Service, for a manager running outside the cluster (https://host:port).
	URL string
	// ConfigName names the ValidatingWebhookConfiguration pitstop writes.
	ConfigName string
	// SecretName names the Secret, in the leader-election namespace, that
	// holds the CA and serving certificate all replicas share.
	SecretName string
}

// DefaultWebhookOptions serve on :9443 behind Service
// pitstop-system/pitstop-webhook.
func DefaultWebhookOptions() WebhookOptions {
	return WebhookOptions{
		Port:       9443,
		CertDir:    filepath.Join(os.TempDir(), "pitstop-webhook-certs"),
		Service:    "pitstop-system/pitstop-webhook",
		ConfigName: "pitstop-validating-webhook",
		SecretName: "pitstop-webhook-cert",
	}
}

func (o WebhookOptions) validate() error {
	if o.Port < 0 || o.Port > 65535 {
		return &FlagError{"webhook-port", strconv.Itoa(o.Port), "must be from 0 (off) to 65535"}
	}
	if o.Port == 0 {
		return nil
	}
	if o.URL != "" {
		u, err := url.Parse(o.URL)
		if err != nil || u.Scheme != "https" || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return &FlagError{"webhook-url", o.URL, "must be https://host[:port] with no path"}
		}
		return nil
	}
	ns, name, ok := strings.Cut(o.Service, "/")
	if !ok || ns == "" || name == "" {
		return &FlagError{"webhook-service", o.Service, "must be namespace/name"}
	}
	return nil
}

func (o WebhookOptions) server() webhook.Server {
	if o.Port == 0 {
		return nil
	}
	return webhook.NewServer(webhook.Options{Host: o.Host, Port: o.Port, CertDir: o.CertDir})
}

// clientConfig is how the API server reaches a webhook path, and the names
// the serving certificate must cover.
func (o WebhookOptions) clientConfig(path string) (admissionregistrationv1.WebhookClientConfig, []string) {
	if o.URL != "" {
		u, _ := url.Parse(o.URL)
		host := u.Hostname()
		return admissionregistrationv1.WebhookClientConfig{URL: ptr.To(strings.TrimSuffix(o.URL, "/") + path)}, []string{host}
	}
	ns, name, _ := strings.Cut(o.Service, "/")
	return admissionregistrationv1.WebhookClientConfig{
			Service: &admissionregistrationv1.ServiceReference{Namespace: ns, Name: name, Path: ptr.To(path)},
		}, []string{
			name + "." + ns + ".svc",
			name + "." + ns + ".svc.cluster.local",
		}
}

// validatingWebhook is the configuration of the webhook that judges
// creates and updates of one pitstop.dev resource.
func validatingWebhook(resource string, cc admissionregistrationv1.WebhookClientConfig) admissionregistrationv1.ValidatingWebhook {
	return admissionregistrationv1.ValidatingWebhook{
		Name:                    resource + "." + pitstopv1alpha1.GroupVersion.Group,
		ClientConfig:            cc,
		AdmissionReviewVersions: []string{"v1"},
		SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
		FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
		TimeoutSeconds:          ptr.To[int32](5),
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule: admissionregistrationv1.Rule{
				APIGroups:   []string{pitstopv1alpha1.GroupVersion.Group},
				APIVersions: []string{pitstopv1alpha1.GroupVersion.Version},
				Resources:   []string{resource},
			},
		}},
	}
}

// setupWebhook registers the webhook handlers, puts the serving certificate
// in CertDir (the server reads it when it starts) and keeps it renewed.
func setupWebhook(ctx context.Context, mgr ctrl.Manager, cfg *rest.Config, opts Options) error {
	if err := nodemaintenance.SetupWebhook(mgr); err != nil {
		return fmt.Errorf("setting up the NodeMaintenance webhook: %w", err)
	}
	if err := profile.SetupWebhook(mgr); err != nil {
		return fmt.Errorf("setting up the MaintenanceProfile webhook: %w", err)
	}
	cc, hosts := opts.Webhook.clientConfig(nodemaintenance.WebhookPath)
	profileCC, _ := opts.Webhook.clientConfig(profile.WebhookPath)
	// A live client: the manager's cache does not run before Start.
	live, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	certs, err := webhookcert.New(live, webhookcert.Options{
		Namespace:         opts.LeaderElectionNamespace,
		SecretName:        opts.Webhook.SecretName,
		CertDir:           opts.Webhook.CertDir,
		Hosts:             hosts,
		WebhookConfigName: opts.Webhook.ConfigName,
		// Both webhooks fail closed: a NodeMaintenance that might break quorum
		// or a profile that might not compile is refused while no replica
		// answers, and can be applied again; deletes are never judged.
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			validatingWebhook("nodemaintenances", cc),
			validatingWebhook("maintenanceprofiles", profileCC),
		},
	})
	if err != nil {
		return err
	}
	if err := certs.Ensure(ctx); err != nil {
		return fmt.Errorf("preparing the webhook's serving certificate: %w", err)
	}
	if err := mgr.Add(certs); err != nil {
		return err
	}
	return mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker())
}
