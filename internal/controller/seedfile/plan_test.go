package seedfile

import (
	"encoding/base64"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/importer"
)

func profileNamed(name string, opts ...func(*pitstopv1alpha1.MaintenanceProfile)) pitstopv1alpha1.MaintenanceProfile {
	p := pitstopv1alpha1.MaintenanceProfile{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, o := range opts {
		o(&p)
	}
	return p
}

func fromFile(p *pitstopv1alpha1.MaintenanceProfile) {
	p.Labels = map[string]string{pitstopv1alpha1.LabelManagedBy: pitstopv1alpha1.ManagedBySeedFile}
}

func deleting(p *pitstopv1alpha1.MaintenanceProfile) {
	p.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	p.Finalizers = []string{pitstopv1alpha1.FinalizerMaintenanceProfile}
}

func notifications(labels map[string]string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "pitstop-system", Name: importer.DefaultSecretName, Labels: labels}}
}

var fileLabel = map[string]string{pitstopv1alpha1.LabelManagedBy: pitstopv1alpha1.ManagedBySeedFile}

func names(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetName())
	}
	return out
}

func profileNames(ps []pitstopv1alpha1.MaintenanceProfile) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}

func TestPlan(t *testing.T) {
	for _, tc := range []struct {
		name     string
		file     []pitstopv1alpha1.MaintenanceProfile
		secret   *corev1.Secret // what the import makes
		existing []pitstopv1alpha1.MaintenanceProfile
		have     *corev1.Secret // the Secret in the cluster
		// want
		apply, stale, waiting []string
		applySecret           bool
		staleSecret           bool
		refused               string
	}{
		{name: "applies the file's profiles in its order, the first time",
			file: []pitstopv1alpha1.MaintenanceProfile{profileNamed("b"), profileNamed("a")}, apply: []string{"b", "a"}},
		{name: "applies again a profile the file made",
			file: []pitstopv1alpha1.MaintenanceProfile{profileNamed("a")}, existing: []pitstopv1alpha1.MaintenanceProfile{profileNamed("a", fromFile)}, apply: []string{"a"}},
		{name: "refuses to write over a profile a person made under a name the file gives",
			file:     []pitstopv1alpha1.MaintenanceProfile{profileNamed("a"), profileNamed("theirs")},
			existing: []pitstopv1alpha1.MaintenanceProfile{profileNamed("theirs")}, refused: "theirs"},
		{name: "deletes the file's profiles it no longer lists, never a person's",
			file:     []pitstopv1alpha1.MaintenanceProfile{profileNamed("a")},
			existing: []pitstopv1alpha1.MaintenanceProfile{profileNamed("a", fromFile), profileNamed("gone", fromFile), profileNamed("theirs")},
			apply:    []string{"a"}, stale: []string{"gone"}},
		{name: "does not delete again a profile already being deleted",
			existing: []pitstopv1alpha1.MaintenanceProfile{profileNamed("gone", fromFile, deleting)}},
		{name: "waits for a profile the file lists again to be gone before making it",
			file:     []pitstopv1alpha1.MaintenanceProfile{profileNamed("a"), profileNamed("back")},
			existing: []pitstopv1alpha1.MaintenanceProfile{profileNamed("back", fromFile, deleting)},
			apply:    []string{"a"}, waiting: []string{"back"}},
		{name: "applies the notifications' Secret first",
			file: []pitstopv1alpha1.MaintenanceProfile{profileNamed("a")}, secret: notifications(nil), apply: []string{"a"}, applySecret: true},
		{name: "refuses to write over a Secret a person made",
			file: []pitstopv1alpha1.MaintenanceProfile{profileNamed("a")}, secret: notifications(nil), have: notifications(nil), refused: "Secret pitstop-system/pitstop-notifications"},
		{name: "deletes the file's Secret once no notification needs it",
			file: []pitstopv1alpha1.MaintenanceProfile{profileNamed("a")}, have: notifications(fileLabel), apply: []string{"a"}, staleSecret: true},
		{name: "never deletes a person's Secret",
			file: []pitstopv1alpha1.MaintenanceProfile{profileNamed("a")}, have: notifications(nil), apply: []string{"a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := newPlan(&importer.Result{Profiles: tc.file, Secret: tc.secret}, tc.existing, tc.have)
			if tc.refused != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refused) || !strings.Contains(err.Error(), pitstopv1alpha1.LabelManagedBy) {
					t.Fatalf("got %v, want a refusal naming %s and the label", err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := names(p.profiles); !slices.Equal(got, tc.apply) {
				t.Errorf("applies %v, want %v", got, tc.apply)
			}
			for _, obj := range p.profiles {
				if obj.GetLabels()[pitstopv1alpha1.LabelManagedBy] != pitstopv1alpha1.ManagedBySeedFile {
					t.Errorf("profile %s applied without the label: %v", obj.GetName(), obj.GetLabels())
				}
			}
			if got := profileNames(p.stale); !slices.Equal(got, tc.stale) {
				t.Errorf("deletes %v, want %v", got, tc.stale)
			}
			if !slices.Equal(p.waiting, tc.waiting) {
				t.Errorf("waits for %v, want %v", p.waiting, tc.waiting)
			}
			if (p.secret != nil) != tc.applySecret || (p.staleSecret != nil) != tc.staleSecret {
				t.Errorf("Secret applied %v, deleted %v; want %v, %v", p.secret != nil, p.staleSecret != nil, tc.applySecret, tc.staleSecret)
			}
			if tc.applySecret && p.objects()[0] != p.secret {
				t.Errorf("the Secret is not applied first: %v", names(p.objects()))
			}
		})
	}
}

// TestTheSecretIsAppliedAsData: stringData is not kept by the API server,
// so a key the file drops would stay; as data, server-side apply owns and
// drops it.
func TestTheSecretIsAppliedAsData(t *testing.T) {
	s := notifications(map[string]string{pitstopv1alpha1.LabelUsableByProfiles: "true"})
	s.StringData = map[string]string{"started.hook": "https://hooks.example/x"}
	obj := secretObject(s)
	data, _, _ := unstructured.NestedStringMap(obj.Object, "data")
	if _, has := obj.Object["stringData"]; has || data["started.hook"] != base64.StdEncoding.EncodeToString([]byte("https://hooks.example/x")) {
		t.Errorf("applied %v, want the value as data", obj.Object)
	}
	if l := obj.GetLabels(); l[pitstopv1alpha1.LabelUsableByProfiles] != "true" || l[pitstopv1alpha1.LabelManagedBy] != pitstopv1alpha1.ManagedBySeedFile {
		t.Errorf("labels %v, want the import's and the seed file's", l)
	}
}

// TestTheConditionKeepsItsTransitionTime: lastTransitionTime moves only
// when the status does.
func TestTheConditionKeepsItsTransitionTime(t *testing.T) {
	then := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	now := then.Add(time.Hour)
	p := profileNamed("a", func(p *pitstopv1alpha1.MaintenanceProfile) {
		p.Status.Conditions = []metav1.Condition{{Type: pitstopv1alpha1.ConditionSeedConfigCurrent, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(then)}}
	})
	since := func(obj *unstructured.Unstructured) string {
		conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
		return conds[0].(map[string]any)["lastTransitionTime"].(string)
	}
	if got := since(setCurrentCondition(&p, metav1.ConditionTrue, pitstopv1alpha1.ReasonApplied, "", 2, now)); got != then.Format(time.RFC3339) {
		t.Errorf("still True: lastTransitionTime %s, want %s", got, then.Format(time.RFC3339))
	}
	if got := since(setCurrentCondition(&p, metav1.ConditionFalse, pitstopv1alpha1.ReasonRefused, "", 2, now)); got != now.Format(time.RFC3339) {
		t.Errorf("now False: lastTransitionTime %s, want %s", got, now.Format(time.RFC3339))
	}
}

// TestANoteIsBoundedAtACharacter: an Event's note stays within what the
// API server accepts, and valid UTF-8.
func TestANoteIsBoundedAtACharacter(t *testing.T) {
	for _, n := range []int{maxNote - 2, maxNote - 1, maxNote, maxNote + 1} {
		msg := strings.Repeat("a", n%3) + strings.Repeat("é", n/2)
		got := bounded(msg)
		if len(got) > maxNote || !utf8.ValidString(got) || (len(msg) <= maxNote && got != msg) {
			t.Errorf("bounded(%d bytes) = %d bytes, valid %v", len(msg), len(got), utf8.ValidString(got))
		}
	}
}
