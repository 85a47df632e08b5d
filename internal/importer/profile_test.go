package importer

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

// foldFile has enter chains on in-maintenance (line 22) and operational
// (line 15), transitions into both from other states, a transition from
// maintenance-required straight back to operational, and one from
// in-maintenance into itself.
var foldFile = seedFile(
	"instances:",
	"  check:",
	"  - {type: hasLabel, name: a, config: {key: a}}",
	"  trigger:",
	"  - {type: alterLabel, name: mark, config: {key: m, value: x}}",
	"  - {type: alterLabel, name: unmark, config: {key: m, remove: true}}",
	"  - {type: eviction, name: drain, config: {action: drain}}",
	"  - {type: eviction, name: uncordon, config: {action: uncordon}}",
	"  - {type: alterLabel, name: note, config: {key: n, value: x}}",
	"  - {type: alterLabel, name: retry, config: {key: r, value: x}}",
	"profiles:",
	"- name: p",
	"  operational:",
	"    enter: uncordon && unmark",
	"    transitions:",
	"    - {check: a, trigger: mark, next: maintenance-required}",
	"  maintenance-required:",
	"    transitions:",
	"    - {check: a, trigger: note, next: in-maintenance}",
	"    - {check: '!a', next: operational}",
	"  in-maintenance:",
	"    enter: drain",
	"    transitions:",
	"    - {check: '!a', next: operational}",
	"    - {check: a, trigger: retry, next: in-maintenance}",
)

func TestEnterChainsFoldIntoTransitionsIntoTheirState(t *testing.T) {
	r, err := Import(foldFile, Options{})
	if err != nil {
		t.Fatalf("Import: %v", err)
	}
	states := r.Profiles[0].Spec.States
	tests := []struct {
		name string
		got  pitstopv1alpha1.Transition
		want []string
	}{
		{name: "a transition into a state without an enter chain keeps its triggers", got: states.Operational.Transitions[0], want: []string{"mark"}},
		{name: "the enter triggers run after the transition's own", got: states.MaintenanceRequired.Transitions[0], want: []string{"note", "drain"}},
		{name: "a transition without triggers gets the enter triggers, in order", got: states.MaintenanceRequired.Transitions[1], want: []string{"uncordon", "unmark"}},
		{name: "every transition into the state gets them", got: states.InMaintenance.Transitions[0], want: []string{"uncordon", "unmark"}},
		{name: "a transition into its own state gets none: the seed never enters a state it is in", got: states.InMaintenance.Transitions[1], want: []string{"retry"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !slices.Equal(tc.got.Triggers, tc.want) {
				t.Errorf("triggers = %v, want %v", tc.got.Triggers, tc.want)
			}
		})
	}
	for _, want := range []string{
		"maintenance.yaml:14: note: profile \"p\": operational: pitstop has no enter chains: uncordon, unmark now run last in each transition into operational (lines 20, 24)",
		"maintenance.yaml:22: note: profile \"p\": in-maintenance: pitstop has no enter chains: drain now runs last in each transition into in-maintenance (line 19)",
		"maintenance.yaml:25: warning: profile \"p\": in-maintenance: transitions[1]: leads back into in-maintenance",
	} {
		if !hasNote(r.Notes, want) {
			t.Errorf("no note starting with %q in\n%s", want, notesText(r.Notes))
		}
	}
}

func TestEnterChainWithoutTransitionsIntoItIsDropped(t *testing.T) {
	data := seedFile(
		"instances:",
		"  trigger:",
		"  - {type: eviction, name: drain, config: {action: drain}}",
		"profiles:",
		"- name: p",
		"  in-maintenance:",
		"    enter: drain",
	)
	r, err := Import(data, Options{})
	if err != nil {
		t.Fatalf("Import: %v", err)
	}
	if got := r.Profiles[0].Spec.Triggers; len(got) != 0 {
		t.Errorf("triggers = %+v, want none: only the dropped enter chain used the drain", got)
	}
	want := `maintenance.yaml:7: note: profile "p": in-maintenance: enter: no transition leads into in-maintenance from another state, so its enter chain never runs`
	if !hasNote(r.Notes, want) {
		t.Errorf("no note starting with %q in\n%s", want, notesText(r.Notes))
	}
}

func TestNotificationsAreDroppedWithWarnings(t *testing.T) {
	data := seedFile(
		"instances:",
		"  notify:",
		"  - type: mail",
		"    name: mail_ops",
		"    config: {auth: false, address: smtp:25, from: a@b, message: hi, to: [c@d]}",
		"    schedule: {type: scheduled, config: {instant: \"09:00\", weekdays: [monday]}}",
		"  check:",
		"  - {type: hasLabel, name: a, config: {key: a}}",
		"profiles:",
		"- name: p",
		"  operational:",
		"    notify: mail_ops",
		"    transitions:",
		"    - {check: a, next: maintenance-required}",
	)
	r, err := Import(data, Options{})
	if err != nil {
		t.Fatalf("Import: %v; want the checks and transitions imported without the notifications", err)
	}
	if got := r.Profiles[0].Spec.States.Operational.Transitions; len(got) != 1 || got[0].Check != "a" {
		t.Errorf("operational transitions = %+v, want the one on a", got)
	}
	for _, want := range []string{
		`maintenance.yaml:3: warning: notification instance "mail_ops" (mail) is not imported: its hook, token or password would have to move into a Secret labelled pitstop.dev/usable-by-profiles=true; add it to the profile by hand (docs/profiles.md, Notifications)`,
		`maintenance.yaml:12: warning: profile "p": operational: notify "mail_ops" is dropped`,
	} {
		if !hasNote(r.Notes, want) {
			t.Errorf("no note starting with %q in\n%s", want, notesText(r.Notes))
		}
	}
}

func TestProfilesGetOnlyTheInstancesTheyUse(t *testing.T) {
	data := seedFile(
		"instances:",
		"  check:",
		"  - {type: hasLabel, name: a, config: {key: a}}",
		"  - {type: hasLabel, name: b, config: {key: b}}",
		"  - {type: hasLabel, name: c, config: {key: c}}",
		"  trigger:",
		"  - {type: alterLabel, name: t, config: {key: t, value: x}}",
		"  - {type: alterLabel, name: u, config: {key: u, value: x}}",
		"profiles:",
		"- name: one",
		"  operational:",
		"    transitions:",
		"    - {check: b && a, trigger: u, next: maintenance-required}",
		"- name: two",
		"  operational:",
		"    transitions:",
		"    - {check: b, next: maintenance-required}",
	)
	r, err := Import(data, Options{})
	if err != nil {
		t.Fatalf("Import: %v", err)
	}
	got := map[string][]string{}
	for _, p := range r.Profiles {
		for _, c := range p.Spec.Checks {
			got[p.Name+" checks"] = append(got[p.Name+" checks"], c.Name)
		}
		for _, tr := range p.Spec.Triggers {
			got[p.Name+" triggers"] = append(got[p.Name+" triggers"], tr.Name)
		}
	}
	want := map[string][]string{"one checks": {"a", "b"}, "one triggers": {"u"}, "two checks": {"b"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("instances per profile = %v, want %v (in the file's order)", got, want)
	}
	for _, want := range []string{
		`maintenance.yaml:5: note: check instance "c" is used by no profile, so it is not imported`,
		`maintenance.yaml:7: note: trigger instance "t" is used by no profile, so it is not imported`,
	} {
		if !hasNote(r.Notes, want) {
			t.Errorf("no note starting with %q in\n%s", want, notesText(r.Notes))
		}
	}
}

func hasNote(notes []Note, prefix string) bool {
	return slices.ContainsFunc(notes, func(n Note) bool { return strings.HasPrefix(n.String(), prefix) })
}

func notesText(notes []Note) string {
	var b strings.Builder
	for _, n := range notes {
		b.WriteString(n.String() + "\n")
	}
	return b.String()
}
