package profilesecret

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

// ErrNotUsable says that a profile names a Secret not opted in with
// pitstopv1alpha1.LabelUsableByProfiles. Retrying does not help: the Secret must be
// labelled.
var ErrNotUsable = errors.New("refusing to read a Secret that profiles may not use")

// Read returns one key of a Secret in namespace (pitstop's own), if the
// Secret is opted in for profiles, with surrounding white space trimmed (a
// file's final newline). The label is checked before the key, so that a
// profile cannot learn which keys another Secret holds. reader should read
// from the API server, not a cache, so that pitstop needs no watch on
// Secrets.
func Read(ctx context.Context, reader client.Reader, namespace string, ref pitstopv1alpha1.SecretKeyRef) (string, error) {
	sec := &corev1.Secret{}
	if err := reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, sec); err != nil {
		return "", fmt.Errorf("reading Secret %s/%s (key %q): %w", namespace, ref.Name, ref.Key, err)
	}
	if sec.Labels[pitstopv1alpha1.LabelUsableByProfiles] != "true" {
		return "", fmt.Errorf("%w: Secret %s/%s (key %q) is not labelled %s=true", ErrNotUsable, namespace, ref.Name, ref.Key, pitstopv1alpha1.LabelUsableByProfiles)
	}
	v, ok := sec.Data[ref.Key]
	if !ok || len(v) == 0 {
		return "", fmt.Errorf("Secret %s/%s has no key %q", namespace, ref.Name, ref.Key)
	}
	return strings.TrimSpace(string(v)), nil
}
