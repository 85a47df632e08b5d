package webhookcert

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// maxAttempts bounds the read-decide-write loops. Each lost race means
// another replica wrote what it wanted, so the next read normally agrees
// with it; running out of attempts means writers keep disagreeing.
const maxAttempts = 5

// managedByLabels mark the objects this package creates. It returns a new
// map each time: the client decodes the server's answer into the object.
func managedByLabels() map[string]string {
	return map[string]string{"app.kubernetes.io/managed-by": "pitstop"}
}

// ensureSecret makes the Secret hold a CA and serving certificate that plan
// keeps, and returns them. Replicas race through the API server's optimistic
// concurrency: Create fails with AlreadyExists and Update (which carries the
// resourceVersion that was read) with Conflict when another replica wrote
// first; the loser reads again and, since every replica has the same
// Options, keeps what the winner wrote instead of replacing it.
func (m *Manager) ensureSecret(ctx context.Context) (bundle, error) {
	key := client.ObjectKey{Namespace: m.opts.Namespace, Name: m.opts.SecretName}
	for range maxAttempts {
		var secret corev1.Secret
		found := true
		if err := m.c.Get(ctx, key, &secret); apierrors.IsNotFound(err) {
			found = false
		} else if err != nil {
			return bundle{}, fmt.Errorf("reading Secret %s: %w", key, err)
		}
		b := parseBundle(secret.Data)
		in := m.planInput()
		d := plan(b, in)
		if d.keep() {
			return b, nil
		}
		next, err := issue(b, d, in)
		if err != nil {
			return bundle{}, err
		}
		logf.FromContext(ctx).Info("Issuing webhook serving certificate", "secret", klog.KRef(key.Namespace, key.Name), "reason", d.reason, "message", d.message, "newCA", d.newCA)
		if !found {
			secret = corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: managedByLabels()},
				Type:       corev1.SecretTypeTLS,
				Data:       next.secretData(),
			}
			err = m.c.Create(ctx, &secret)
			if apierrors.IsAlreadyExists(err) {
				continue // another replica created it since we read: read theirs
			}
		} else {
			if secret.Data == nil {
				secret.Data = map[string][]byte{}
			}
			maps.Copy(secret.Data, next.secretData())
			err = m.c.Update(ctx, &secret)
			if isLostRace(err) {
				continue // another replica updated or deleted it since we read
			}
		}
		if err != nil {
			return bundle{}, fmt.Errorf("writing Secret %s: %w", key, err)
		}
		return next, nil
	}
	return bundle{}, fmt.Errorf("writing Secret %s: lost the race to other writers %d times", key, maxAttempts)
}

// readCABundle returns the CA bundle the Secret holds now, nil if none.
func (m *Manager) readCABundle(ctx context.Context) ([]byte, error) {
	key := client.ObjectKey{Namespace: m.opts.Namespace, Name: m.opts.SecretName}
	var secret corev1.Secret
	if err := m.c.Get(ctx, key, &secret); apierrors.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("reading Secret %s: %w", key, err)
	}
	return secret.Data[caCertKey], nil
}
