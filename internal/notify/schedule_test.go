package notify

import (
	"strings"
	"testing"
	"time"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

func TestSchedules(t *testing.T) {
	const (
		required    = pitstopv1alpha1.StateMaintenanceRequired
		operational = pitstopv1alpha1.StateOperational
	)
	berlin, _ := time.LoadLocation("Europe/Berlin")
	// Wednesday 2026-11-18 10:00 UTC (11:00 in Berlin).
	since := time.Date(2026, 11, 18, 10, 0, 0, 0, time.UTC)
	never := time.Time{}
	oneshot := func(d time.Duration) pitstopv1alpha1.NotificationSchedule {
		return pitstopv1alpha1.NotificationSchedule{Oneshot: &pitstopv1alpha1.OneshotSchedule{Delay: pitstopv1alpha1.Duration{Duration: d}}}
	}
	periodic := pitstopv1alpha1.NotificationSchedule{Periodic: &pitstopv1alpha1.PeriodicSchedule{Interval: pitstopv1alpha1.Duration{Duration: time.Hour}}}
	daily9 := pitstopv1alpha1.NotificationSchedule{Scheduled: &pitstopv1alpha1.ScheduledSchedule{At: "09:00", TimeZone: "Europe/Berlin"}}
	weekdays := pitstopv1alpha1.NotificationSchedule{Scheduled: &pitstopv1alpha1.ScheduledSchedule{At: "09:00", Weekdays: []pitstopv1alpha1.Weekday{"Mon", "Fri"}}}

	for _, tc := range []struct {
		name      string
		schedule  pitstopv1alpha1.NotificationSchedule
		state     pitstopv1alpha1.MaintenanceState
		lastSent  time.Time
		now       time.Time
		wantDue   bool
		wantNext  time.Time
		wantNever bool
	}{
		{name: "oneshot on entry", schedule: oneshot(0), state: required, lastSent: never, now: since, wantDue: true},
		{name: "deadlineAtRisk is never due by state", schedule: pitstopv1alpha1.NotificationSchedule{DeadlineAtRisk: &pitstopv1alpha1.DeadlineAtRiskSchedule{}},
			state: required, lastSent: never, now: since, wantNever: true},
		{name: "oneshot sent for this entry", schedule: oneshot(0), state: required, lastSent: since.Add(time.Second), now: since.Add(time.Hour), wantNever: true},
		{name: "oneshot sent for an earlier entry", schedule: oneshot(0), state: required, lastSent: since.Add(-time.Hour), now: since, wantDue: true},
		{name: "oneshot waits for its delay", schedule: oneshot(10 * time.Minute), state: required, lastSent: never, now: since.Add(time.Minute), wantNext: since.Add(10 * time.Minute)},
		{name: "oneshot after its delay", schedule: oneshot(10 * time.Minute), state: required, lastSent: never, now: since.Add(10 * time.Minute), wantDue: true},
		{name: "oneshot in operational", schedule: oneshot(0), state: operational, lastSent: never, now: since, wantDue: true},

		{name: "periodic on entry", schedule: periodic, state: required, lastSent: since.Add(-2 * time.Hour), now: since, wantDue: true, wantNext: since.Add(time.Hour)},
		{name: "periodic before the interval", schedule: periodic, state: required, lastSent: since, now: since.Add(30 * time.Minute), wantNext: since.Add(time.Hour)},
		{name: "periodic after the interval", schedule: periodic, state: required, lastSent: since, now: since.Add(61 * time.Minute), wantDue: true, wantNext: since.Add(121 * time.Minute)},
		{name: "periodic on entry into operational, once", schedule: periodic, state: operational, lastSent: since.Add(-2 * time.Hour), now: since, wantDue: true, wantNever: true},
		{name: "periodic not again in operational", schedule: periodic, state: operational, lastSent: since, now: since.Add(2 * time.Hour), wantNever: true},

		// 09:00 in Berlin is 08:00 UTC in November.
		{name: "scheduled: entered after today's time is sent the same day", schedule: daily9, state: required, lastSent: never, now: since.Add(time.Hour), wantDue: true,
			wantNext: time.Date(2026, 11, 19, 9, 0, 0, 0, berlin)},
		{name: "scheduled: entered after today's time, sent today already", schedule: daily9, state: required, lastSent: time.Date(2026, 11, 18, 8, 0, 30, 0, time.UTC),
			now: since.Add(time.Hour), wantNext: time.Date(2026, 11, 19, 9, 0, 0, 0, berlin)},
		{name: "scheduled: entered on a day it does not send waits for the next one", schedule: weekdays, state: required, lastSent: never,
			now: since.Add(time.Hour), wantNext: time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)},
		{name: "scheduled: at tomorrow's time", schedule: daily9, state: required, lastSent: never, now: time.Date(2026, 11, 19, 8, 0, 30, 0, time.UTC), wantDue: true,
			wantNext: time.Date(2026, 11, 20, 9, 0, 0, 0, berlin)},
		{name: "scheduled: sent at today's time already", schedule: daily9, state: required, lastSent: time.Date(2026, 11, 19, 8, 0, 30, 0, time.UTC),
			now: time.Date(2026, 11, 19, 15, 0, 0, 0, time.UTC), wantNext: time.Date(2026, 11, 20, 9, 0, 0, 0, berlin)},
		{name: "scheduled: only on its weekdays", schedule: weekdays, state: required, lastSent: never, now: time.Date(2026, 11, 19, 9, 30, 0, 0, time.UTC),
			wantNext: time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)},
		{name: "scheduled: a day it was down is made up once", schedule: weekdays, state: required, lastSent: never, now: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC), wantDue: true,
			wantNext: time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := Compile(pitstopv1alpha1.NotificationInstance{Name: "n", Schedule: tc.schedule,
				Webhook: &pitstopv1alpha1.WebhookNotification{Message: "hi", URL: pitstopv1alpha1.SecretKeyRef{Name: "s", Key: "k"}}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			due, next := n.Due(tc.state, since, tc.lastSent, tc.now)
			if due != tc.wantDue {
				t.Errorf("due = %v, want %v", due, tc.wantDue)
			}
			switch {
			case tc.wantNever && !next.IsZero():
				t.Errorf("next = %v, want never", next)
			case !tc.wantNext.IsZero() && !next.Equal(tc.wantNext):
				t.Errorf("next = %v, want %v", next, tc.wantNext)
			}
		})
	}
}

func TestCompileRefusesWhatCannotWork(t *testing.T) {
	hook := func(msg string) *pitstopv1alpha1.WebhookNotification {
		return &pitstopv1alpha1.WebhookNotification{Message: msg, URL: pitstopv1alpha1.SecretKeyRef{Name: "s", Key: "k"}}
	}
	oneshot := pitstopv1alpha1.NotificationSchedule{Oneshot: &pitstopv1alpha1.OneshotSchedule{}}
	for _, tc := range []struct {
		name string
		inst pitstopv1alpha1.NotificationInstance
		want string
	}{
		{"template syntax", pitstopv1alpha1.NotificationInstance{Webhook: hook("{{ .Node.Name "), Schedule: oneshot}, "webhook.message: template: :1: unclosed action"},
		{"unknown field", pitstopv1alpha1.NotificationInstance{Webhook: hook("{{ .Node.Nmae }}"), Schedule: oneshot}, `webhook.message: template: :1:8: executing "" at <.Node.Nmae>: can't evaluate field Nmae`},
		{"unknown function", pitstopv1alpha1.NotificationInstance{Webhook: hook("{{ shout .State }}"), Schedule: oneshot}, `webhook.message: template: :1: function "shout" not defined`},
		{"mail subject", pitstopv1alpha1.NotificationInstance{Schedule: oneshot, Mail: &pitstopv1alpha1.MailNotification{
			Address: "mail:25", From: "a@b", To: []string{"c@d"}, Subject: "{{ .Profile.Nope }}", Message: "m"}}, "mail.subject: template"},
		{"mail address", pitstopv1alpha1.NotificationInstance{Schedule: oneshot, Mail: &pitstopv1alpha1.MailNotification{
			Address: "mail.example.com", From: "a@b", To: []string{"c@d"}, Subject: "s", Message: "m"}}, `mail.address: "mail.example.com" is not host:port`},
		{"thread period", pitstopv1alpha1.NotificationInstance{Schedule: oneshot, SlackThread: &pitstopv1alpha1.SlackThreadNotification{Title: "t", Message: "m", Channel: "c"}}, "slackThread.period: must be positive"},
		{"scheduled time", pitstopv1alpha1.NotificationInstance{Webhook: hook("x"), Schedule: pitstopv1alpha1.NotificationSchedule{Scheduled: &pitstopv1alpha1.ScheduledSchedule{At: "25:00"}}}, `schedule.scheduled.at: "25:00" is not a time of day`},
		{"scheduled time zone", pitstopv1alpha1.NotificationInstance{Webhook: hook("x"), Schedule: pitstopv1alpha1.NotificationSchedule{Scheduled: &pitstopv1alpha1.ScheduledSchedule{At: "09:00", TimeZone: "Mars/Olympus"}}}, `schedule.scheduled.timeZone: unknown time zone "Mars/Olympus"`},
		{"periodic interval", pitstopv1alpha1.NotificationInstance{Webhook: hook("x"), Schedule: pitstopv1alpha1.NotificationSchedule{Periodic: &pitstopv1alpha1.PeriodicSchedule{}}}, "schedule.periodic.interval: must be positive"},
		{"no plugin", pitstopv1alpha1.NotificationInstance{Schedule: oneshot}, "no plugin set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile(tc.inst, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Compile: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestRenderSeesTheNodeAndWhatBlocksIt(t *testing.T) {
	n, err := Compile(pitstopv1alpha1.NotificationInstance{Name: "n", Schedule: pitstopv1alpha1.NotificationSchedule{Oneshot: &pitstopv1alpha1.OneshotSchedule{}},
		Webhook: &pitstopv1alpha1.WebhookNotification{URL: pitstopv1alpha1.SecretKeyRef{Name: "s", Key: "k"},
			Message: `{{ .Node.Name }} is {{ .State }} (was {{ .Previous }}) in {{ .Profile.Current }}, last moved by {{ .Profile.Last }}{{ range .Blocking }}; {{ . }}{{ end }}`}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := sample
	d.Blocking = []string{"window: opens at 22:00", "budget: 2 of 2 slots taken"}
	m, err := n.Render("os", d)
	if err != nil {
		t.Fatal(err)
	}
	want := "node-1 is maintenance-required (was operational) in profile, last moved by profile; window: opens at 22:00; budget: 2 of 2 slots taken"
	if m.Texts["message"] != want {
		t.Errorf("rendered %q, want %q", m.Texts["message"], want)
	}
}
