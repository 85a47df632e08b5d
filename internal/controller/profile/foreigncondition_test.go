package profile_test

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/controller/profile"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// staleProfile is a client whose Get of one profile answers an old copy
// of it, as a cache that has not seen the latest write yet does.
type staleProfile struct {
	client.Client
	old *pitstopv1alpha1.MaintenanceProfile
}

func (s staleProfile) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if p, ok := obj.(*pitstopv1alpha1.MaintenanceProfile); ok && key.Name == s.old.Name {
		s.old.DeepCopyInto(p)
		return nil
	}
	return s.Client.Get(ctx, key, obj, opts...)
}

// TestStatusKeepsAConditionOfAnotherWriter: a profile's conditions have
// other writers (the seed file applies SeedConfigCurrent). The status
// controller, reading the profile from before such a write, must not
// write its stale list over it: its write is refused as a conflict and
// made again from a fresh read, which keeps the other condition beside
// Valid and Ready.
func TestStatusKeepsAConditionOfAnotherWriter(t *testing.T) {
	const name = "foreign-condition"
	p := rollingProfile(name, name, 1)
	p.Finalizers = []string{pitstopv1alpha1.FinalizerMaintenanceProfile} // as the controller adds it first
	testutil.Create(t, env.Client, p)
	t.Cleanup(func() {
		held := &pitstopv1alpha1.MaintenanceProfile{}
		if env.Client.Get(context.Background(), client.ObjectKey{Name: name}, held) == nil {
			held.Finalizers = nil
			_ = env.Client.Update(context.Background(), held)
			_ = env.Client.Delete(context.Background(), held)
		}
	})
	old := &pitstopv1alpha1.MaintenanceProfile{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: name}, old); err != nil {
		t.Fatal(err)
	}

	other := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": []any{map[string]any{
		"type": pitstopv1alpha1.ConditionSeedConfigCurrent, "status": "True", "reason": pitstopv1alpha1.ReasonApplied,
		"message": "written by another writer", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
	}}}}}
	other.SetAPIVersion(pitstopv1alpha1.GroupVersion.String())
	other.SetKind("MaintenanceProfile")
	other.SetName(name)
	if err := env.Client.Status().Apply(t.Context(), client.ApplyConfigurationFromUnstructured(other), client.FieldOwner("another-writer")); err != nil {
		t.Fatal(err)
	}

	req := ctrl.Request{NamespacedName: client.ObjectKey{Name: name}}
	if _, err := profile.NewStatusReconciler(staleProfile{Client: env.Client, old: old}).Reconcile(t.Context(), req); err != nil {
		t.Fatalf("a status write from a stale read is an error, want a requeue: %v", err)
	}
	assertConditions(t, name, pitstopv1alpha1.ConditionSeedConfigCurrent)

	if _, err := profile.NewStatusReconciler(env.Client).Reconcile(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	assertConditions(t, name, pitstopv1alpha1.ConditionSeedConfigCurrent, pitstopv1alpha1.ConditionValid, pitstopv1alpha1.ConditionReady)
}

// assertConditions checks that the profile has each condition type of
// want.
func assertConditions(t *testing.T, name string, want ...string) {
	t.Helper()
	got := &pitstopv1alpha1.MaintenanceProfile{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: name}, got); err != nil {
		t.Fatal(err)
	}
	for _, typ := range want {
		if meta.FindStatusCondition(got.Status.Conditions, typ) == nil {
			t.Errorf("no condition %s in %+v", typ, got.Status.Conditions)
		}
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, pitstopv1alpha1.ConditionSeedConfigCurrent); c != nil && c.Status != metav1.ConditionTrue {
		t.Errorf("the other writer's condition changed: %+v", c)
	}
}
