package webhookcert

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ErrConfigurationMissing says that the install's webhook configuration
// does not exist, so the API server does not call the webhook at all.
var ErrConfigurationMissing = errors.New("the ValidatingWebhookConfiguration does not exist: the API server calls no pitstop webhook; install pitstop with its Helm chart or pitstop.yaml, which define it")

// IsConfigurationMissing reports whether err says that the install's
// webhook configuration does not exist.
func IsConfigurationMissing(err error) bool { return errors.Is(err, ErrConfigurationMissing) }

// desiredWebhooks returns a copy of the configured webhooks with caBundle.
func (m *Manager) desiredWebhooks(caBundle []byte) []admissionregistrationv1.ValidatingWebhook {
	webhooks := make([]admissionregistrationv1.ValidatingWebhook, len(m.opts.Webhooks))
	for i := range m.opts.Webhooks {
		m.opts.Webhooks[i].DeepCopyInto(&webhooks[i])
		webhooks[i].ClientConfig.CABundle = bytes.Clone(caBundle)
	}
	return webhooks
}

// ensureWebhookConfiguration makes the ValidatingWebhookConfiguration hold
// exactly the configured webhooks, each with caBundle, writing only when
// something differs.
//
// The API server fills in defaults (failurePolicy, matchPolicy, selectors,
// timeoutSeconds, rule scope, service port), so what it stores never equals
// Options.Webhooks field for field. Rather than copy its defaulting, the
// desired webhooks are first sent as a dry-run update, which returns the
// object as it would be stored without storing it; only if that differs
// from what is stored is the update sent for real.
func (m *Manager) ensureWebhookConfiguration(ctx context.Context, caBundle []byte) error {
	if m.opts.Installed {
		return m.ensureCABundle(ctx, caBundle)
	}
	key := client.ObjectKey{Name: m.opts.WebhookConfigName}
	for range maxAttempts {
		var current admissionregistrationv1.ValidatingWebhookConfiguration
		if err := m.c.Get(ctx, key, &current); apierrors.IsNotFound(err) {
			created := &admissionregistrationv1.ValidatingWebhookConfiguration{
				ObjectMeta: metav1.ObjectMeta{Name: key.Name, Labels: managedByLabels()},
				Webhooks:   m.desiredWebhooks(caBundle),
			}
			err := m.c.Create(ctx, created)
			if apierrors.IsAlreadyExists(err) {
				continue // another replica created it first: compare with theirs
			}
			if err != nil {
				return fmt.Errorf("creating ValidatingWebhookConfiguration %s: %w", key.Name, err)
			}
			return nil
		} else if err != nil {
			return fmt.Errorf("reading ValidatingWebhookConfiguration %s: %w", key.Name, err)
		}

		trial := current.DeepCopy()
		trial.Webhooks = m.desiredWebhooks(caBundle)
		if err := m.c.Update(ctx, trial, client.DryRunAll); isLostRace(err) {
			continue
		} else if err != nil {
			return fmt.Errorf("updating ValidatingWebhookConfiguration %s (dry run): %w", key.Name, err)
		}
		if equality.Semantic.DeepEqual(trial.Webhooks, current.Webhooks) {
			return nil
		}

		updated := current.DeepCopy()
		updated.Webhooks = m.desiredWebhooks(caBundle)
		if err := m.c.Update(ctx, updated); isLostRace(err) {
			continue
		} else if err != nil {
			return fmt.Errorf("updating ValidatingWebhookConfiguration %s: %w", key.Name, err)
		}
		return nil
	}
	return fmt.Errorf("updating ValidatingWebhookConfiguration %s: lost the race to other writers %d times", key.Name, maxAttempts)
}

// isLostRace reports whether a write failed because the object changed or
// went away since it was read; the caller reads it again.
func isLostRace(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsNotFound(err)
}

// ensureCABundle writes caBundle into every webhook of the install's
// configuration that does not carry it yet, and changes nothing else.
func (m *Manager) ensureCABundle(ctx context.Context, caBundle []byte) error {
	key := client.ObjectKey{Name: m.opts.WebhookConfigName}
	for range maxAttempts {
		var current admissionregistrationv1.ValidatingWebhookConfiguration
		if err := m.c.Get(ctx, key, &current); apierrors.IsNotFound(err) {
			return fmt.Errorf("ValidatingWebhookConfiguration %s: %w", key.Name, ErrConfigurationMissing)
		} else if err != nil {
			return fmt.Errorf("reading ValidatingWebhookConfiguration %s: %w", key.Name, err)
		}
		updated := current.DeepCopy()
		changed := false
		for i := range updated.Webhooks {
			if !bytes.Equal(updated.Webhooks[i].ClientConfig.CABundle, caBundle) {
				updated.Webhooks[i].ClientConfig.CABundle = bytes.Clone(caBundle)
				changed = true
			}
		}
		if !changed {
			return nil
		}
		if err := m.c.Update(ctx, updated); isLostRace(err) {
			continue
		} else if err != nil {
			return fmt.Errorf("writing the CA bundle into ValidatingWebhookConfiguration %s: %w", key.Name, err)
		}
		return nil
	}
	return fmt.Errorf("writing the CA bundle into ValidatingWebhookConfiguration %s: lost the race to other writers %d times", key.Name, maxAttempts)
}

// removeWebhookConfiguration deletes the configuration this package
// registered, so that a manager that stops leaves no webhook behind that
// the API server would call in vain. It never deletes the install's.
func (m *Manager) removeWebhookConfiguration(ctx context.Context) error {
	if m.opts.Installed {
		return nil
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: m.opts.WebhookConfigName}}
	if err := m.c.Delete(ctx, vwc); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("removing ValidatingWebhookConfiguration %s: %w", vwc.Name, err)
	}
	return nil
}
