package seedfile_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// personsProfile is a MaintenanceProfile someone made with kubectl.
func personsProfile(name string) *pitstopv1alpha1.MaintenanceProfile {
	return &pitstopv1alpha1.MaintenanceProfile{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"team": "platform"}},
		Spec: pitstopv1alpha1.MaintenanceProfileSpec{
			Checks: []pitstopv1alpha1.CheckInstance{{Name: "wanted", HasAnnotation: &pitstopv1alpha1.KeyValueCheck{Key: "reboot-needed"}}},
			States: pitstopv1alpha1.StatesSpec{Operational: pitstopv1alpha1.StateSpec{Transitions: []pitstopv1alpha1.Transition{
				{Check: "wanted", Next: pitstopv1alpha1.StateMaintenanceRequired},
			}}},
		},
	}
}

// assertUntouched checks that a person's profile is as they made it: no
// label of the seed file, the same spec and generation.
func assertUntouched(t *testing.T, want *pitstopv1alpha1.MaintenanceProfile) {
	t.Helper()
	got := getProfile(t, want.Name)
	switch {
	case got == nil:
		t.Errorf("%s's own profile was deleted", want.Name)
	case got.Labels[pitstopv1alpha1.LabelManagedBy] != "" || got.Generation != want.Generation || !equality.Semantic.DeepEqual(got.Spec, want.Spec):
		t.Errorf("a person's profile was changed: labels %v, generation %d (want %d)", got.Labels, got.Generation, want.Generation)
	}
}

// TestAppliesTheFileAndFollowsItsEdits: the file's profiles appear,
// labelled as the seed file's and current; an edit of a budget changes the
// profile; an edit that drops a profile deletes it. A profile a person
// made is never touched, and the profile controller's conditions and the
// seed file's stand side by side.
func TestAppliesTheFileAndFollowsItsEdits(t *testing.T) {
	theirs := personsProfile("follow-theirs")
	testutil.Create(t, env.Client, theirs)
	path := newFile(t, maintenanceYAML(1, "follow-a", "follow-b"))
	start(t, path)
	t.Cleanup(func() { deleteAndWait(t, theirs) }) // while the profile controller runs, to release it

	for _, name := range []string{"follow-a", "follow-b"} {
		awaitProfile(t, name, hasBudget(1))
		p := awaitProfile(t, name, hasCondition(metav1.ConditionTrue, pitstopv1alpha1.ReasonApplied, path))
		awaitEvent(t, "MaintenanceProfile", name, pitstopv1alpha1.EventSeedConfigApplied, "created")
		if p.Spec.Recheck == nil || p.Spec.Recheck.Duration != time.Minute {
			t.Errorf("profile %s spec.recheck %v, want the file's intervals.requeue 60s", name, p.Spec.Recheck)
		}
	}
	// Two writers of the conditions: neither erases the other's.
	awaitProfile(t, "follow-a", func(p *pitstopv1alpha1.MaintenanceProfile) error {
		for _, typ := range []string{pitstopv1alpha1.ConditionValid, pitstopv1alpha1.ConditionReady, pitstopv1alpha1.ConditionSeedConfigCurrent} {
			if !meta.IsStatusConditionTrue(p.Status.Conditions, typ) {
				return fmt.Errorf("conditions %+v, want %s True", p.Status.Conditions, typ)
			}
		}
		return nil
	})

	writeFile(t, path, maintenanceYAML(3, "follow-a", "follow-b"))
	awaitProfile(t, "follow-a", hasBudget(3))
	awaitProfile(t, "follow-b", hasBudget(3))
	awaitEvent(t, "MaintenanceProfile", "follow-a", pitstopv1alpha1.EventSeedConfigApplied, "updated")

	writeFile(t, path, maintenanceYAML(3, "follow-a"))
	awaitEvent(t, "MaintenanceProfile", "follow-b", pitstopv1alpha1.EventSeedConfigProfileDeleted, path)
	testutil.Eventually(t, wait, 50*time.Millisecond, func() error {
		if getProfile(t, "follow-b") != nil {
			return fmt.Errorf("follow-b, which the file no longer lists, still exists")
		}
		return nil
	})
	awaitProfile(t, "follow-a", hasBudget(3))
	assertUntouched(t, theirs)
	// Still there after a few more reads of the file.
	time.Sleep(500 * time.Millisecond)
	assertUntouched(t, theirs)
}

// refuseProfile makes the API server refuse the MaintenanceProfile name,
// as a cluster's own admission policy may, until the test ends.
func refuseProfile(t *testing.T, name string) {
	t.Helper()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "refuse-" + name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"pitstop.dev"}, APIVersions: []string{"*"}, Resources: []string{"maintenanceprofiles"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "object.metadata.name != '" + name + "'", Message: name + " is not allowed by policy"}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policy.Name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	testutil.Create(t, env.Client, policy, binding)
	t.Cleanup(func() { deleteAndWait(t, binding); deleteAndWait(t, policy) })
	// The API server applies a new policy after a moment.
	testutil.Eventually(t, wait, 100*time.Millisecond, func() error {
		probe := personsProfile(name)
		if err := env.Client.Create(t.Context(), probe, client.DryRunAll); err == nil || !strings.Contains(err.Error(), "not allowed by policy") {
			return fmt.Errorf("the policy does not refuse yet: %v", err)
		}
		return nil
	})
}

// TestARefusedEditChangesNothing: an edit that is not YAML, one the
// importer refuses, and one the API server refuses for one of its
// profiles each leave every profile as it was, and say why, with the
// file's line, in a Warning Event and a False SeedConfigCurrent on each
// profile. The next good edit applies and makes them current again.
func TestARefusedEditChangesNothing(t *testing.T) {
	refuseProfile(t, "refuse-policy")
	good := maintenanceYAML(1, "refuse-a", "refuse-b")
	path := newFile(t, good)
	start(t, path)
	before := map[string]*pitstopv1alpha1.MaintenanceProfile{}
	for _, name := range []string{"refuse-a", "refuse-b"} {
		before[name] = awaitProfile(t, name, hasCondition(metav1.ConditionTrue, pitstopv1alpha1.ReasonApplied))
	}
	assertUnchanged := func(edit string) {
		t.Helper()
		for name, was := range before {
			now := getProfile(t, name)
			if now == nil || now.Generation != was.Generation || !equality.Semantic.DeepEqual(now.Spec, was.Spec) {
				t.Errorf("after %s, profile %s changed: %+v", edit, name, now)
			}
		}
	}

	for _, tc := range []struct {
		edit, content string
		says          []string
	}{
		{"an edit that is not YAML", strings.Replace(maintenanceYAML(2, "refuse-a", "refuse-b"), "instances:", "instances: [", 1),
			[]string{path + ":4: not valid YAML"}},
		{"an edit the importer refuses", strings.Replace(maintenanceYAML(2, "refuse-a", "refuse-b"), "type: maxMaintenance", "type: noSuchCheck", 1),
			[]string{path + `:10: check instance "count": unknown plugin type "noSuchCheck"`}},
		{"an edit the API server refuses", maintenanceYAML(2, "refuse-a", "refuse-b", "refuse-policy"),
			[]string{"MaintenanceProfile refuse-policy", "not allowed by policy"}},
	} {
		writeFile(t, path, tc.content)
		for name := range before {
			awaitProfile(t, name, hasCondition(metav1.ConditionFalse, pitstopv1alpha1.ReasonRefused, tc.says...))
			awaitEvent(t, "MaintenanceProfile", name, pitstopv1alpha1.EventSeedConfigRefused, tc.says...)
		}
		assertUnchanged(tc.edit)
		if getProfile(t, "refuse-policy") != nil {
			t.Errorf("after %s, the profile the API server refuses exists", tc.edit)
		}
	}

	writeFile(t, path, maintenanceYAML(2, "refuse-a", "refuse-b"))
	for name := range before {
		awaitProfile(t, name, hasCondition(metav1.ConditionTrue, pitstopv1alpha1.ReasonApplied))
		awaitProfile(t, name, hasBudget(2))
	}
}

// TestAnEditNamingAPersonsProfileIsRefused: the file may not take over a
// profile someone made: the edit is refused, naming it, and neither that
// profile nor the file's change.
func TestAnEditNamingAPersonsProfileIsRefused(t *testing.T) {
	theirs := personsProfile("person-theirs")
	testutil.Create(t, env.Client, theirs)
	path := newFile(t, maintenanceYAML(1, "person-a"))
	start(t, path)
	t.Cleanup(func() { deleteAndWait(t, theirs) }) // while the profile controller runs, to release it
	awaitProfile(t, "person-a", hasCondition(metav1.ConditionTrue, pitstopv1alpha1.ReasonApplied))

	writeFile(t, path, maintenanceYAML(4, "person-a", "person-theirs"))
	awaitProfile(t, "person-a", hasCondition(metav1.ConditionFalse, pitstopv1alpha1.ReasonRefused, "person-theirs", pitstopv1alpha1.LabelManagedBy))
	awaitEvent(t, "MaintenanceProfile", "person-a", pitstopv1alpha1.EventSeedConfigRefused, "person-theirs")
	awaitProfile(t, "person-a", hasBudget(1))
	assertUntouched(t, theirs)
}
