package seedfile

import (
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/importer"
)

// FieldManager owns, in server-side apply, what the seed file writes:
// the profiles' specs and labels, their SeedConfigCurrent condition, and
// the notifications' Secret.
const FieldManager = "pitstop-seed-file"

// plan is what a good edit of the file changes: the objects to apply, in
// the order kubectl apply would take them from `pitstop import` (the
// Secret first, so that no profile names a missing one), and what the
// file made that it no longer lists.
type plan struct {
	// secret is the notifications' Secret; nil when the import makes none.
	secret *unstructured.Unstructured
	// profiles are the file's profiles, in its order.
	profiles []*unstructured.Unstructured
	// stale are the profiles the file made and no longer lists.
	stale []pitstopv1alpha1.MaintenanceProfile
	// staleSecret is the Secret the file made when the import makes none
	// any more.
	staleSecret *corev1.Secret
	// waiting names the profiles the file lists that are still being
	// deleted: they are applied once they are gone.
	waiting []string
}

// isManaged says the seed file made obj: only those it updates or deletes.
func isManaged(obj metav1.Object) bool {
	return obj.GetLabels()[pitstopv1alpha1.LabelManagedBy] == pitstopv1alpha1.ManagedBySeedFile
}

// managed are the profiles of existing that the seed file made.
func managed(existing []pitstopv1alpha1.MaintenanceProfile) []pitstopv1alpha1.MaintenanceProfile {
	var out []pitstopv1alpha1.MaintenanceProfile
	for _, p := range existing {
		if isManaged(&p) {
			out = append(out, p)
		}
	}
	return out
}

// newPlan compares an import with the cluster: existing are all the
// MaintenanceProfiles, and secret the notifications' Secret (nil when
// there is none). An error is an edit that cannot be applied without
// writing over what people made: a profile, or the Secret, of the name
// the file gives, without the seed file's label.
func newPlan(r *importer.Result, existing []pitstopv1alpha1.MaintenanceProfile, secret *corev1.Secret) (*plan, error) {
	byName := map[string]*pitstopv1alpha1.MaintenanceProfile{}
	for i := range existing {
		byName[existing[i].Name] = &existing[i]
	}
	p := &plan{}
	var theirs []string
	listed := map[string]bool{}
	for i := range r.Profiles {
		want := &r.Profiles[i]
		listed[want.Name] = true
		if have, ok := byName[want.Name]; ok {
			switch {
			case !isManaged(have):
				theirs = append(theirs, want.Name)
				continue
			case !have.DeletionTimestamp.IsZero():
				p.waiting = append(p.waiting, want.Name)
				continue
			}
		}
		obj, err := profileObject(want)
		if err != nil {
			return nil, err
		}
		p.profiles = append(p.profiles, obj)
	}
	if len(theirs) > 0 {
		return nil, fmt.Errorf("the file lists MaintenanceProfiles that exist without the label %s=%s, made by someone else, which pitstop does not write over: %s; delete them, rename them in the file, or label them to hand them to the file",
			pitstopv1alpha1.LabelManagedBy, pitstopv1alpha1.ManagedBySeedFile, strings.Join(theirs, ", "))
	}
	for _, have := range managed(existing) {
		if !listed[have.Name] && have.DeletionTimestamp.IsZero() {
			p.stale = append(p.stale, have)
		}
	}
	switch {
	case r.Secret != nil && secret != nil && !isManaged(secret):
		return nil, fmt.Errorf("the file's notifications need the Secret %s/%s, which exists without the label %s=%s, made by someone else, which pitstop does not write over; delete it, or label it to hand it to the file",
			secret.Namespace, secret.Name, pitstopv1alpha1.LabelManagedBy, pitstopv1alpha1.ManagedBySeedFile)
	case r.Secret != nil:
		p.secret = secretObject(r.Secret)
	case secret != nil && isManaged(secret) && secret.DeletionTimestamp.IsZero():
		p.staleSecret = secret
	}
	return p, nil
}

// withLabel is labels with the seed file's.
func withLabel(labels map[string]string) map[string]string {
	out := maps.Clone(labels)
	if out == nil {
		out = map[string]string{}
	}
	out[pitstopv1alpha1.LabelManagedBy] = pitstopv1alpha1.ManagedBySeedFile
	return out
}

// profileObject is what the seed file applies of an imported profile:
// its name, labels, annotations and spec, as `pitstop import` prints them
// for kubectl apply (every field the importer's typed spec serialises,
// which server-side apply then owns).
func profileObject(p *pitstopv1alpha1.MaintenanceProfile) (*unstructured.Unstructured, error) {
	spec, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&p.Spec)
	if err != nil {
		return nil, fmt.Errorf("converting profile %s: %w", p.Name, err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion(pitstopv1alpha1.GroupVersion.String())
	u.SetKind("MaintenanceProfile")
	u.SetName(p.Name)
	u.SetLabels(withLabel(p.Labels))
	if len(p.Annotations) > 0 {
		u.SetAnnotations(p.Annotations)
	}
	return u, nil
}

// secretObject is what the seed file applies of the import's Secret: its
// values as data, not stringData, which the API server does not keep, so
// that server-side apply owns each key and drops one the file no longer
// has.
func secretObject(s *corev1.Secret) *unstructured.Unstructured {
	data := map[string]any{}
	for _, k := range slices.Sorted(maps.Keys(s.Data)) {
		data[k] = base64.StdEncoding.EncodeToString(s.Data[k])
	}
	for _, k := range slices.Sorted(maps.Keys(s.StringData)) {
		data[k] = base64.StdEncoding.EncodeToString([]byte(s.StringData[k]))
	}
	u := &unstructured.Unstructured{Object: map[string]any{"data": data, "type": string(corev1.SecretTypeOpaque)}}
	u.SetAPIVersion("v1")
	u.SetKind("Secret")
	u.SetNamespace(s.Namespace)
	u.SetName(s.Name)
	u.SetLabels(withLabel(s.Labels))
	return u
}
