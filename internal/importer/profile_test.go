package importer

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

// enterFile has enter chains on in-maintenance and operational,
// transitions into both from other states, a transition from
// maintenance-required straight back to operational, and one from
// in-maintenance into itself.
var enterFile = seedFile(
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

// TestEnterChainsBecomeTheStatesEnterTriggers: each state's enter chain is
// its enter list, in order, and the transitions keep their own triggers
// alone; nothing about it needs a note.
func TestEnterChainsBecomeTheStatesEnterTriggers(t *testing.T) {
	r, err := Import(enterFile, Options{})
	if err != nil {
		t.Fatalf("Import: %v", err)
	}
	states := r.Profiles[0].Spec.States
	tests := []struct {
		name      string
		got, want []string
	}{
		{name: "operational's enter chain", got: states.Operational.Enter, want: []string{"uncordon", "unmark"}},
		{name: "in-maintenance's enter chain", got: states.InMaintenance.Enter, want: []string{"drain"}},
		{name: "a state without one", got: states.MaintenanceRequired.Enter, want: nil},
		{name: "a transition into a state with an enter chain keeps its own triggers", got: states.MaintenanceRequired.Transitions[0].Triggers, want: []string{"note"}},
		{name: "a transition without triggers gets none", got: states.MaintenanceRequired.Transitions[1].Triggers, want: nil},
		{name: "a transition into its own state keeps its own", got: states.InMaintenance.Transitions[1].Triggers, want: []string{"retry"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !slices.Equal(tc.got, tc.want) {
				t.Errorf("triggers = %v, want %v", tc.got, tc.want)
			}
		})
	}
	for _, n := range r.Notes {
		if strings.Contains(n.String(), "enter") {
			t.Errorf("note about the enter chains: %s", n)
		}
	}
	want := "maintenance.yaml:25: warning: profile \"p\": in-maintenance: transitions[1]: leads back into in-maintenance"
	if !hasNote(r.Notes, want) {
		t.Errorf("no note starting with %q in\n%s", want, notesText(r.Notes))
	}
}

// TestEnterChainWithoutTransitionsIntoItIsKept: a state no transition
// leads into never runs its enter chain, in either controller; it is
// imported as written.
func TestEnterChainWithoutTransitionsIntoItIsKept(t *testing.T) {
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
	if got := r.Profiles[0].Spec.States.InMaintenance.Enter; !slices.Equal(got, []string{"drain"}) {
		t.Errorf("in-maintenance enter = %v, want [drain]", got)
	}
	if got := r.Profiles[0].Spec.Triggers; len(got) != 1 || got[0].Name != "drain" {
		t.Errorf("triggers = %+v, want the drain", got)
	}
}

// TestNotificationsAreImportedWithTheirSecrets: every seed notification
// plugin and schedule becomes pitstop's, a state's notify chain its notify
// list, and what the seed held in clear goes into one Secret that the
// notifications refer to; an instance two profiles use is in both, its
// secret once, and a slackThread's Lease stays shared.
func TestNotificationsAreImportedWithTheirSecrets(t *testing.T) {
	data := seedFile(
		"instances:",
		"  notify:",
		"  - type: mail",
		"    name: mail_ops",
		"    config: {auth: true, user: ops, password: s3cret, identity: id, address: smtp:587, from: a@b, subject: \"{{ .Node.Name }}\", message: hi, to: [c@d, e@f]}",
		"    schedule: {type: scheduled, config: {instant: \"9:00\", weekdays: [monday, Fri]}}",
		"  - type: slack",
		"    name: chat",
		"    config: {hook: \"https://hooks.slack.com/services/T/B/X\", channel: \"#ops\", message: \"{{ .Node.Name }} is {{ .State }}\"}",
		"    schedule: {type: oneshot, config: {delay: 5m}}",
		"  - type: slackThread",
		"    name: thread",
		"    config: {token: xoxb-1, channel: \"#ops\", title: t, message: m, leaseName: Ops_Thread, leaseNamespace: kube-system, period: 12h}",
		"    schedule: {type: periodic, config: {interval: 1h}}",
		"  check:",
		"  - {type: hasLabel, name: a, config: {key: a}}",
		"profiles:",
		"- name: p",
		"  operational:",
		"    notify: mail_ops",
		"    transitions:",
		"    - {check: a, next: maintenance-required}",
		"  maintenance-required:",
		"    notify: chat && thread",
		"- name: q",
		"  in-maintenance:",
		"    notify: thread",
	)
	r, err := Import(data, Options{SecretName: "imported", SecretNamespace: "ops"})
	if err != nil {
		t.Fatalf("Import: %v", err)
	}
	p, q := r.Profiles[0].Spec, r.Profiles[1].Spec
	if got := p.States.Operational.Notify; !reflect.DeepEqual(got, []string{"mail_ops"}) {
		t.Errorf("operational notify %v, want mail_ops", got)
	}
	if got := p.States.MaintenanceRequired.Notify; !reflect.DeepEqual(got, []string{"chat", "thread"}) {
		t.Errorf("maintenance-required notify %v, want chat and thread", got)
	}
	want := []pitstopv1alpha1.NotificationInstance{
		{Name: "mail_ops", Schedule: pitstopv1alpha1.NotificationSchedule{Scheduled: &pitstopv1alpha1.ScheduledSchedule{At: "09:00", Weekdays: []pitstopv1alpha1.Weekday{"Mon", "Fri"}}},
			Mail: &pitstopv1alpha1.MailNotification{Address: "smtp:587", From: "a@b", To: []string{"c@d", "e@f"}, Subject: "{{ .Node.Name }}", Message: "hi",
				Auth: &pitstopv1alpha1.MailAuth{Username: "ops", Identity: "id", Password: pitstopv1alpha1.SecretKeyRef{Name: "imported", Key: "mail_ops.password"}}}},
		{Name: "chat", Schedule: pitstopv1alpha1.NotificationSchedule{Oneshot: &pitstopv1alpha1.OneshotSchedule{Delay: pitstopv1alpha1.Duration{Duration: 5 * time.Minute}}},
			Slack: &pitstopv1alpha1.SlackNotification{WebhookURL: pitstopv1alpha1.SecretKeyRef{Name: "imported", Key: "chat.hook"}, Channel: "#ops", Message: "{{ .Node.Name }} is {{ .State }}"}},
		{Name: "thread", Schedule: pitstopv1alpha1.NotificationSchedule{Periodic: &pitstopv1alpha1.PeriodicSchedule{Interval: pitstopv1alpha1.Duration{Duration: time.Hour}}},
			SlackThread: &pitstopv1alpha1.SlackThreadNotification{Token: pitstopv1alpha1.SecretKeyRef{Name: "imported", Key: "thread.token"}, Channel: "#ops", Title: "t", Message: "m",
				Period: pitstopv1alpha1.Duration{Duration: 12 * time.Hour}, LeaseName: "pitstop-slack-ops-thread"}},
	}
	if !reflect.DeepEqual(p.Notifications, want) {
		t.Errorf("notifications\n%+v\nwant\n%+v", p.Notifications, want)
	}
	if len(q.Notifications) != 1 || !reflect.DeepEqual(q.Notifications[0], want[2]) || !reflect.DeepEqual(q.States.InMaintenance.Notify, []string{"thread"}) {
		t.Errorf("profile q notifications %+v notify %v, want the same thread", q.Notifications, q.States.InMaintenance.Notify)
	}
	sec := r.Secret
	if sec == nil || sec.Name != "imported" || sec.Namespace != "ops" || sec.Labels[pitstopv1alpha1.LabelUsableByProfiles] != "true" ||
		!reflect.DeepEqual(sec.StringData, map[string]string{"mail_ops.password": "s3cret", "chat.hook": "https://hooks.slack.com/services/T/B/X", "thread.token": "xoxb-1"}) {
		t.Errorf("Secret %+v, want imported in ops, usable by profiles, with the three secrets", sec)
	}
	for _, n := range r.Notes {
		if n.Warning {
			t.Errorf("warning %s, want none", n)
		}
	}
	if want := `maintenance.yaml:13: note: notification instance "thread": the thread's Lease is pitstop-slack-ops-thread in pitstop's namespace`; !hasNote(r.Notes, want) {
		t.Errorf("no note starting with %q in\n%s", want, notesText(r.Notes))
	}
	for i := range r.Profiles {
		build(t, &r.Profiles[i])
	}
}

// TestMailWithoutAuthWarnsAboutTLS: the seed sent mail in clear to a server
// without STARTTLS; pitstop does not, and says so.
func TestMailWithoutAuthWarnsAboutTLS(t *testing.T) {
	data := seedFile(
		"instances:",
		"  notify:",
		"  - type: mail",
		"    name: mail_ops",
		"    config: {auth: false, address: smtp:25, from: a@b, message: hi, to: [c@d]}",
		"    schedule: {type: periodic, config: {interval: 1h}}",
		"profiles:",
		"- name: p",
		"  maintenance-required:",
		"    notify: mail_ops",
	)
	r, err := Import(data, Options{})
	if err != nil {
		t.Fatalf("Import: %v", err)
	}
	m := r.Profiles[0].Spec.Notifications[0].Mail
	if m.Auth != nil || m.TLS != "StartTLS" || m.Subject == "" {
		t.Errorf("mail %+v, want no auth, StartTLS and a subject", m)
	}
	if r.Secret != nil {
		t.Errorf("Secret %+v for a notification without secrets", r.Secret)
	}
	for _, want := range []string{
		`maintenance.yaml:5: warning: notification instance "mail_ops": mail without auth: pitstop sends only over STARTTLS`,
		// A note about a field the file leaves out points at the instance.
		`maintenance.yaml:5: note: notification instance "mail_ops": has no subject`,
	} {
		if !hasNote(r.Notes, want) {
			t.Errorf("no note starting with %q in\n%s", want, notesText(r.Notes))
		}
	}
}

// TestSchedulesWithoutTheirDurationGetTheSeedsDefaults: the seed's oneshot
// waits a minute and its periodic repeats every hour when the file says
// nothing; the import writes those.
func TestSchedulesWithoutTheirDurationGetTheSeedsDefaults(t *testing.T) {
	data := seedFile(
		"instances:",
		"  notify:",
		"  - {type: slack, name: once, config: {hook: h, channel: c, message: m}, schedule: {type: oneshot}}",
		"  - {type: slack, name: again, config: {hook: h, channel: c, message: m}, schedule: {type: periodic, config: {}}}",
		"profiles:",
		"- name: p",
		"  maintenance-required:",
		"    notify: once && again",
	)
	r, err := Import(data, Options{})
	if err != nil {
		t.Fatalf("Import: %v", err)
	}
	n := r.Profiles[0].Spec.Notifications
	if len(n) != 2 || n[0].Schedule.Oneshot == nil || n[0].Schedule.Oneshot.Delay.Duration != time.Minute ||
		n[1].Schedule.Periodic == nil || n[1].Schedule.Periodic.Interval.Duration != time.Hour {
		t.Errorf("schedules %+v, want a oneshot after 1m and a periodic every 1h", n)
	}
	for i := range r.Profiles {
		build(t, &r.Profiles[i])
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

// TestTheDefaultProfileSelectsNodesWithoutAProfileLabel: as the seed gives
// the profile "default" to every node without the profile label, the
// imported profile "default" selects exactly those (and, by the label,
// the nodes labelled default).
func TestTheDefaultProfileSelectsNodesWithoutAProfileLabel(t *testing.T) {
	data := seedFile(
		"instances:",
		"  check:",
		"  - {type: hasLabel, name: a, config: {key: a}}",
		"profiles:",
		"- name: default",
		"  operational:",
		"    transitions:",
		"    - {check: a, next: maintenance-required}",
	)
	r, err := Import(data, Options{})
	if err != nil {
		t.Fatalf("Import: %v", err)
	}
	sel, err := metav1.LabelSelectorAsSelector(r.Profiles[0].Spec.NodeSelector)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		labels labels.Set
		want   bool
	}{
		{labels.Set{}, true},
		{labels.Set{"topology.kubernetes.io/zone": "a"}, true},
		{labels.Set{pitstopv1alpha1.LabelSeedProfile: "os-patching"}, false},
	} {
		if got := sel.Matches(tc.labels); got != tc.want {
			t.Errorf("selector %s matches %v: %v, want %v", sel, tc.labels, got, tc.want)
		}
	}
	for _, n := range r.Notes {
		if n.Warning {
			t.Errorf("warning %s", n)
		}
	}
}

// TestRequeueBecomesEachProfilesRecheck: the seed's intervals.requeue is
// each profile's spec.recheck, at least 1s: the README's 200ms becomes 1s,
// with a note saying so.
func TestRequeueBecomesEachProfilesRecheck(t *testing.T) {
	for _, tc := range []struct {
		requeue string
		want    time.Duration
		note    string
	}{
		{"90s", 90 * time.Second, "intervals.requeue becomes each profile's spec.recheck"},
		{"200ms", time.Second, "intervals.requeue 200ms becomes each profile's spec.recheck 1s, the least it may be"},
	} {
		t.Run(tc.requeue, func(t *testing.T) {
			data := seedFile(
				"intervals: {requeue: "+tc.requeue+"}",
				"profiles:",
				"- name: p",
				"- name: q",
			)
			r, err := Import(data, Options{})
			if err != nil {
				t.Fatalf("Import: %v", err)
			}
			if len(r.Profiles) != 2 {
				t.Fatalf("%d profiles, want 2", len(r.Profiles))
			}
			for i := range r.Profiles {
				p := &r.Profiles[i]
				if p.Spec.Recheck == nil || p.Spec.Recheck.Duration != tc.want {
					t.Errorf("profile %s: spec.recheck %v, want %s", p.Name, p.Spec.Recheck, tc.want)
				}
				build(t, p)
			}
			var notes []string
			for _, n := range r.Notes {
				notes = append(notes, n.Message)
			}
			if !slices.ContainsFunc(notes, func(n string) bool { return strings.Contains(n, tc.note) }) {
				t.Errorf("notes %q, want one saying %q", notes, tc.note)
			}
		})
	}
}
