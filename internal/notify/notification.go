// Package notify sends a maintenance profile's notifications: it compiles
// each notification instance (its templates and schedule), says when one
// is due for a node, and delivers it through Slack (incoming webhook or bot
// token with threads), SMTP mail or a generic JSON webhook. Secrets are read
// from the API server at send time, never cached or logged, and only those
// labelled pitstop.dev/usable-by-profiles=true (package profilesecret); a
// mail password goes only to an SMTP server an administrator allowed.
package notify

import (
	"errors"
	"fmt"
	"text/template"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/profilesecret"
)

// ErrDestinationNotAllowed says that a notification would send a Secret's
// value to a server no administrator allowed. Retrying does not help: the
// profile or pitstop's --notify-host-allow must change.
var ErrDestinationNotAllowed = errors.New("refusing to send a Secret to a server not allowed")

// Data is what a notification's templates see.
type Data struct {
	// Node is the node, as pitstop last read it.
	Node *corev1.Node
	// State is the node's state in the profile, Previous the one before,
	// Since when it entered State.
	State    string
	Previous string
	Since    time.Time
	// Profile names the profile sending (Current) and the profile whose
	// transition was the node's most recent (Last).
	Profile Profiles
	// Blocking says what keeps the node where it is: failed checks with
	// their reasons, what a trigger waits for (the drain's blockers).
	Blocking []string
	// Checks are the node's last check results in the profile.
	Checks map[string]bool
	// Event is the scheduled cloud event a deadlineAtRisk notification is
	// about; zero in the others.
	Event Event
}

// Event is a scheduled cloud event found at risk of missing its deadline
// (the webhook plugin sends it as "event").
type Event struct {
	// Object is its MachineMaintenance, "namespace/name".
	Object string `json:"object"`
	// Code is the provider's event code (instance-retirement, ...),
	// Instance the instance, Machine the Machine ("" when none).
	Code     string `json:"code"`
	Instance string `json:"instance"`
	Machine  string `json:"machine,omitempty"`
	// NotBefore is when the provider may act; LatestSafeStart when
	// pitstop must start at the latest to be done in time.
	NotBefore       time.Time `json:"notBefore"`
	LatestSafeStart time.Time `json:"latestSafeStart"`
	// Reason and Message are the DeadlineAtRisk condition's: NoProfile,
	// NoTurnInTime or PastLatestSafeStart, and what it means.
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// Profiles are the profile names a template can use.
type Profiles struct {
	Current string
	Last    string
}

// Plugin names, as in metrics and Events.
const (
	PluginSlack       = "slack"
	PluginSlackThread = "slackThread"
	PluginMail        = "mail"
	PluginWebhook     = "webhook"
)

// Notification is a compiled notification instance.
type Notification struct {
	Name   string
	Plugin string
	spec   pitstopv1alpha1.NotificationInstance
	when   schedule
	texts  map[string]*template.Template // by field: message, title, subject
}

// Compile checks a notification instance and parses its templates. Errors
// name the field under the instance ("slack.message: ..."). A mail
// notification that logs in with a password from a Secret is refused
// unless its server is one of mailServers (--notify-host-allow): the
// profile names the server, so any profile author could otherwise have
// the password sent to a server of their own. mailServers nil: this
// process sends no notification (pitstop explain), nothing is checked.
func Compile(inst pitstopv1alpha1.NotificationInstance, mailServers *profilesecret.Hosts) (*Notification, error) {
	n := &Notification{Name: inst.Name, spec: inst, texts: map[string]*template.Template{}}
	var texts map[string]string
	switch {
	case inst.Slack != nil:
		n.Plugin = PluginSlack
		texts = map[string]string{"message": inst.Slack.Message}
	case inst.SlackThread != nil:
		n.Plugin = PluginSlackThread
		texts = map[string]string{"title": inst.SlackThread.Title, "message": inst.SlackThread.Message}
		if inst.SlackThread.Period.Duration <= 0 {
			return nil, fmt.Errorf("slackThread.period: must be positive, got %s", inst.SlackThread.Period.Duration)
		}
	case inst.Mail != nil:
		n.Plugin = PluginMail
		texts = map[string]string{"subject": inst.Mail.Subject, "message": inst.Mail.Message}
		host, port, err := mailServer(inst.Mail.Address)
		if err != nil {
			return nil, fmt.Errorf("mail.address: %w", err)
		}
		if a := inst.Mail.Auth; a != nil && mailServers != nil && !mailServers.Allows(host, port) {
			return nil, fmt.Errorf("mail.address %q: %w: mail.auth.password (Secret %s, key %q) would be sent to %s, which is not among the SMTP servers an administrator allowed (--notify-host-allow, chart value notifyHostAllow: %s)",
				inst.Mail.Address, ErrDestinationNotAllowed, a.Password.Name, a.Password.Key, host, mailServers)
		}
	case inst.Webhook != nil:
		n.Plugin = PluginWebhook
		texts = map[string]string{"message": inst.Webhook.Message}
	default:
		return nil, fmt.Errorf("no plugin set: set one of slack, slackThread, mail, webhook")
	}
	for field, text := range texts {
		t, err := parseTemplate(text)
		if err != nil {
			return nil, fmt.Errorf("%s.%s: %w", n.Plugin, field, err)
		}
		n.texts[field] = t
	}
	when, err := newSchedule(inst.Schedule)
	if err != nil {
		return nil, fmt.Errorf("schedule.%w", err)
	}
	n.when = when
	return n, nil
}

// sample is what templates are tried on when a profile is compiled.
var sample = Data{
	Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: "node-1", Labels: map[string]string{"kubernetes.io/hostname": "node-1"}, Annotations: map[string]string{},
	}},
	State: string(pitstopv1alpha1.StateMaintenanceRequired), Previous: string(pitstopv1alpha1.StateOperational),
	Since: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Profile: Profiles{Current: "profile", Last: "profile"},
	Blocking: []string{"window: closed"}, Checks: map[string]bool{"window": false},
	Event: Event{
		Object: "openshift-machine-api/worker-1-instance-retirement-1", Code: "instance-retirement", Instance: "i-0123456789abcdef0", Machine: "worker-1",
		NotBefore: time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC), LatestSafeStart: time.Date(2026, 1, 1, 22, 30, 0, 0, time.UTC),
		Reason: "NoTurnInTime", Message: "no transition of node node-1's profiles passes now, and none can before 2026-01-02T06:00:00Z",
	},
}

// Message is a notification rendered for one node, ready to send.
type Message struct {
	Profile      string
	Notification string
	Plugin       string
	Node         string
	// Texts are the rendered templates by field (message, title, subject).
	Texts map[string]string
	Data  Data
	spec  pitstopv1alpha1.NotificationInstance
}

// Render fills the templates for one node. A template that goes past a
// bound (see MaxRenderedSize) is stopped, and the error wraps
// ErrTemplateLimit.
func (n *Notification) Render(profile string, d Data) (Message, error) {
	m := Message{Profile: profile, Notification: n.Name, Plugin: n.Plugin, Node: d.Node.Name, Texts: map[string]string{}, Data: d, spec: n.spec}
	for field, t := range n.texts {
		text, err := execute(t, d)
		if err != nil {
			return m, fmt.Errorf("notification %s: %s: %w", n.Name, field, err)
		}
		m.Texts[field] = text
	}
	return m, nil
}

// OnDeadlineAtRisk says the notification is sent when a scheduled event
// of the node is found at risk (schedule deadlineAtRisk), not by state.
func (n *Notification) OnDeadlineAtRisk() bool {
	return n.spec.Schedule.DeadlineAtRisk != nil
}

// Due says whether the notification is due for a node that entered its
// state at since and was last sent this notification at lastSent (zero:
// never), and when it is next due if not now (zero: not by itself).
func (n *Notification) Due(state pitstopv1alpha1.MaintenanceState, since, lastSent, now time.Time) (bool, time.Time) {
	return n.when.due(state, since, lastSent, now)
}
