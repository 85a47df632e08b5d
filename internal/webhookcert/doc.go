// Package webhookcert gives pitstop's validating admission webhook a serving
// certificate without cert-manager or OLM. It owns one Secret (a private CA
// and a serving certificate signed by it, shared by every replica), the
// tls.crt and tls.key files that controller-runtime's webhook server reads
// from its CertDir, and one ValidatingWebhookConfiguration whose webhooks
// carry the CA bundle. Replicas coordinate only through the API server's
// optimistic concurrency, so it needs no leader election.
//
// It must not serve the webhook, decide what the webhook admits, or touch
// any other object: the handler and the manager wiring live elsewhere.
package webhookcert

// The Secret lives in pitstop's own namespace; the webhook configuration is
// cluster-scoped. Updates to the configuration are first sent as dry runs
// (still the update verb) so that nothing is written when nothing differs.
//
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create;update,namespace=pitstop-system
//
// The install's webhook configuration is the only one pitstop may read or
// write in a cluster: the chart and pitstop.yaml fix its name. A manager
// outside the cluster that registers its own (Options.Installed false) runs
// with its user's permissions, not these.
//
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=get;update,resourceNames=pitstop-validating-webhook
