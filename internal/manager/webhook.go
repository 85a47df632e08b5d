package manager

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/controller/medik8s"
	"github.com/pitstop-dev/pitstop/internal/controller/nodemaintenance"
	"github.com/pitstop-dev/pitstop/internal/controller/profile"
	"github.com/pitstop-dev/pitstop/internal/plugin/check"
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
	// pitstop then registers a webhook configuration of its own, which the
	// API server ignores when the manager does not answer, and removes it
	// when it stops.
	URL string
	// ServiceSet says that Service was chosen explicitly, not left at its
	// default: a manager outside the cluster trusts that the API server
	// reaches it through that Service.
	ServiceSet bool
	// ConfigName names the ValidatingWebhookConfiguration that carries the
	// CA bundle: the install's (the chart's or pitstop.yaml's), or, with
	// URL, the one pitstop registers.
	ConfigName string
	// ManageCertificate makes pitstop create and renew the serving
	// certificate (in the Secret SecretName) and write its CA into the
	// webhook configuration. Without it, pitstop serves the tls.crt and
	// tls.key that something else (cert-manager) puts in CertDir, and
	// touches neither the Secret nor the configuration.
	ManageCertificate bool
	// SecretName names the Secret, in the leader-election namespace, that
	// holds the CA and serving certificate all replicas share.
	SecretName string
}

// DefaultWebhookOptions serve on :9443 behind Service
// pitstop-system/pitstop-webhook.
func DefaultWebhookOptions() WebhookOptions {
	return WebhookOptions{
		Port:              9443,
		CertDir:           filepath.Join(os.TempDir(), "pitstop-webhook-certs"),
		Service:           "pitstop-system/pitstop-webhook",
		ConfigName:        "pitstop-validating-webhook",
		SecretName:        "pitstop-webhook-cert",
		ManageCertificate: true,
	}
}

// ErrWebhookUnreachable says that the API server cannot call the webhook of
// a manager that runs outside the cluster.
var ErrWebhookUnreachable = errors.New("the API server cannot reach the admission webhook of a pitstop running outside the cluster")

// CheckReachable returns an error naming --webhook-url and --webhook-port=0
// when the webhook is on and the API server has no way to call it: the
// manager runs outside the cluster (inCluster false) and neither a URL nor
// a Service of the user's choice says where the API server finds it. The
// default Service leads to the pods of an in-cluster install, not here, and
// a webhook the API server cannot call refuses every NodeMaintenance.
func (o WebhookOptions) CheckReachable(inCluster bool) error {
	if inCluster || o.Port == 0 || o.URL != "" || o.ServiceSet {
		return nil
	}
	return fmt.Errorf("%w (Service %s leads to pods in the cluster, not to this process): run it with --webhook-url=https://<address the API server reaches>:%d, or with --webhook-port=0 to run without the webhook",
		ErrWebhookUnreachable, o.Service, o.Port)
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

// Webhooks are pitstop's validating webhooks as the install defines them,
// reached through the Service namespace/name on port 443, with medik8s'
// NodeMaintenance webhook when medik8s (--medik8s-compat). The chart's
// template renders the same (a test compares them).
func Webhooks(namespace, name string, medik8s bool) []admissionregistrationv1.ValidatingWebhook {
	o := WebhookOptions{Service: namespace + "/" + name}
	return webhooks(o, admissionregistrationv1.Fail, medik8s)
}

// webhooks are pitstop's validating webhooks reached as o says, failing as
// policy says when no replica answers.
func webhooks(o WebhookOptions, policy admissionregistrationv1.FailurePolicyType, withMedik8s bool) []admissionregistrationv1.ValidatingWebhook {
	nmCC, _ := o.clientConfig(nodemaintenance.WebhookPath)
	profileCC, _ := o.clientConfig(profile.WebhookPath)
	hooks := []admissionregistrationv1.ValidatingWebhook{
		validatingWebhook("nodemaintenances", nmCC, policy),
		validatingWebhook("maintenanceprofiles", profileCC, policy),
	}
	if withMedik8s {
		cc, _ := o.clientConfig(medik8s.WebhookPath)
		hook := validatingWebhook("nodemaintenances", cc, policy)
		hook.Name = "nodemaintenances." + medik8s.GroupVersionKind.Group
		hook.Rules[0].APIGroups = []string{medik8s.GroupVersionKind.Group}
		hook.Rules[0].APIVersions = []string{medik8s.GroupVersionKind.Version}
		hooks = append(hooks, hook)
		// The kubevirt.io kind is named after its node: only creates are
		// judged, since a name cannot change.
		cc, _ = o.clientConfig(medik8s.KubevirtWebhookPath)
		hook = validatingWebhook("nodemaintenances", cc, policy)
		hook.Name = "nodemaintenances." + medik8s.KubevirtGroupVersionKind.Group
		hook.Rules[0].APIGroups = []string{medik8s.KubevirtGroupVersionKind.Group}
		hook.Rules[0].APIVersions = []string{medik8s.KubevirtGroupVersionKind.Version}
		hook.Rules[0].Operations = []admissionregistrationv1.OperationType{admissionregistrationv1.Create}
		hook.MatchConditions = onlyWhenTheSpecChanges[:1:1] // not-being-deleted
		hooks = append(hooks, hook)
	}
	return hooks
}

// onlyWhenTheSpecChanges keeps the API server from calling the webhook for
// what it does not judge: an object being deleted, and updates that leave
// the spec as it was (finalizers, labels, annotations). So while no replica
// answers, finalizers can still be removed and objects deleted.
var onlyWhenTheSpecChanges = []admissionregistrationv1.MatchCondition{
	{Name: "not-being-deleted", Expression: "!has(object.metadata.deletionTimestamp)"},
	{Name: "spec-changed", Expression: "request.operation == 'CREATE' || object.spec != oldObject.spec"},
}

// validatingWebhook is the configuration of the webhook that judges
// creates of one pitstop.dev resource and changes of its spec.
func validatingWebhook(resource string, cc admissionregistrationv1.WebhookClientConfig, policy admissionregistrationv1.FailurePolicyType) admissionregistrationv1.ValidatingWebhook {
	return admissionregistrationv1.ValidatingWebhook{
		Name:                    resource + "." + pitstopv1alpha1.GroupVersion.Group,
		ClientConfig:            cc,
		AdmissionReviewVersions: []string{"v1"},
		SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
		FailurePolicy:           ptr.To(policy),
		MatchPolicy:             ptr.To(admissionregistrationv1.Equivalent),
		TimeoutSeconds:          ptr.To[int32](5),
		MatchConditions:         onlyWhenTheSpecChanges,
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
func setupWebhook(ctx context.Context, mgr ctrl.Manager, cfg *rest.Config, opts Options, checks check.Deps, log logr.Logger) error {
	if err := nodemaintenance.SetupWebhook(mgr, opts.NodeMaintenance.AllowSingleControlPlane); err != nil {
		return fmt.Errorf("setting up the NodeMaintenance webhook: %w", err)
	}
	if err := profile.SetupWebhook(mgr, checks); err != nil {
		return fmt.Errorf("setting up the MaintenanceProfile webhook: %w", err)
	}
	if opts.Medik8sCompat {
		medik8s.SetupWebhook(mgr, opts.NodeMaintenance.AllowSingleControlPlane)
	}
	if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
		return err
	}
	if !opts.Webhook.ManageCertificate {
		return nil // cert-manager writes CertDir and the CA bundle
	}
	_, hosts := opts.Webhook.clientConfig(nodemaintenance.WebhookPath)
	// The metrics and an exposed dashboard serve the same certificate.
	hosts = append(hosts, opts.servingHosts()...)
	// A live client: the manager's cache does not run before Start.
	live, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	certOpts := webhookcert.Options{
		Namespace:         opts.LeaderElectionNamespace,
		SecretName:        opts.Webhook.SecretName,
		CertDir:           opts.Webhook.CertDir,
		Hosts:             hosts,
		WebhookConfigName: opts.Webhook.ConfigName,
		Installed:         true,
	}
	if opts.Webhook.URL != "" {
		// A manager outside the cluster registers its own webhooks. They fail
		// open: when it stops without removing them (killed, or its host
		// gone), the cluster goes on with the API server's own validation
		// instead of refusing every create.
		certOpts.Installed = false
		certOpts.Webhooks = webhooks(opts.Webhook, admissionregistrationv1.Ignore, opts.Medik8sCompat)
	}
	certs, err := webhookcert.New(live, certOpts)
	if err != nil {
		return err
	}
	if err := certs.Ensure(ctx); webhookcert.IsConfigurationMissing(err) {
		log.Error(err, "The API server does not call the webhook until its configuration is installed; retrying", "webhookConfiguration", opts.Webhook.ConfigName)
	} else if err != nil {
		return fmt.Errorf("preparing the webhook's serving certificate: %w", err)
	}
	return mgr.Add(certs)
}
