package importer

import (
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

// notifyDef is a seed notification instance converted to pitstop's form.
// What the seed holds in clear (a webhook URL, a token, a password) goes
// into the import's Secret, and the instance refers to it by key.
type notifyDef struct {
	instance
	ok   bool
	spec pitstopv1alpha1.NotificationInstance
	// secrets are the instance's Secret keys and values.
	secrets map[string]string
}

// notifyPlugin converts the config of one seed notification plugin type.
type notifyPlugin struct {
	fields []string
	// secret are the fields whose values go into the Secret.
	secret  []string
	convert func(c *converter, p *pluginConfig, d *notifyDef)
}

// notifyPlugins are the seed's notification plugins, by type.
var notifyPlugins = map[string]notifyPlugin{
	"slack": {[]string{"hook", "channel", "message"}, []string{"hook"}, func(c *converter, p *pluginConfig, d *notifyDef) {
		d.spec.Slack = &pitstopv1alpha1.SlackNotification{
			WebhookURL: c.secretRef(p, d, "hook"), Channel: p.str("channel", false), Message: p.str("message", true),
		}
	}},
	"slackThread": {[]string{"token", "channel", "title", "message", "leaseName", "leaseNamespace", "period"}, []string{"token"}, convertSlackThread},
	"mail":        {[]string{"auth", "address", "from", "identity", "subject", "message", "password", "to", "user"}, []string{"password"}, convertMail},
}

// notifyInstance converts a seed notification instance. Its name becomes a
// pitstop name as a trigger's does (notification chains are split at &&
// only).
func (c *converter) notifyInstance(inst *instance, cfg, schedule *yaml.Node) *notifyDef {
	d := &notifyDef{instance: *inst, spec: pitstopv1alpha1.NotificationInstance{Name: triggerName(inst.name)}, secrets: map[string]string{}}
	plugin, known := notifyPlugins[inst.typ]
	if !known {
		c.errorf(inst.typeNode, "%s: unknown plugin type %q (known: mail, slack, slackThread)", inst.what(), inst.typ)
		return d
	}
	before := len(c.errs)
	c.expandConfig(cfg, plugin.secret)
	c.expand(schedule)
	if inst.unexpanded || len(c.errs) > before {
		return d // an unset variable: said already
	}
	if len(d.spec.Name) > maxNameLength {
		c.errorf(inst.node, "%s: a notification name must be at most %d characters", inst.what(), maxNameLength)
		return d
	}
	if d.spec.Name != inst.name {
		c.notef(inst.node, "%s is named %s: pitstop's notification names are letters, digits and _", inst.what(), d.spec.Name)
	}
	plugin.convert(c, c.pluginConfig(inst, cfg, plugin.fields...), d)
	d.spec.Schedule = c.schedule(inst, schedule)
	d.ok = len(c.errs) == before
	return d
}

// expandConfig expands environment variables in a notification's config,
// except in its secret fields when they come from an existing Secret: then
// their variables need not be set.
func (c *converter) expandConfig(cfg *yaml.Node, secret []string) {
	if cfg == nil || cfg.Kind != yaml.MappingNode {
		c.expand(cfg)
		return
	}
	for i := 0; i+1 < len(cfg.Content); i += 2 {
		if c.existingSecret && slices.Contains(secret, cfg.Content[i].Value) {
			continue
		}
		c.expand(cfg.Content[i+1])
	}
}

// secretRef moves a secret field's value into the import's Secret, under
// the key "<notification>.<field>", and refers to it.
func (c *converter) secretRef(p *pluginConfig, d *notifyDef, field string) pitstopv1alpha1.SecretKeyRef {
	key := d.spec.Name + "." + field
	if !c.existingSecret {
		d.secrets[key] = p.str(field, true)
	}
	return pitstopv1alpha1.SecretKeyRef{Name: c.secretName, Key: key}
}

// seedLeaseName is what a seed Lease name becomes under pitstop's
// required prefix: lower case, other characters than letters, digits, -
// and . made -.
var seedLeaseName = regexp.MustCompile(`[^a-z0-9.-]+`)

func convertSlackThread(c *converter, p *pluginConfig, d *notifyDef) {
	t := &pitstopv1alpha1.SlackThreadNotification{
		Token: c.secretRef(p, d, "token"), Channel: p.str("channel", true),
		Title: p.str("title", true), Message: p.str("message", true), Period: p.duration("period", true),
	}
	// The seed keeps the thread in the Lease leaseNamespace/leaseName, so
	// that every instance (and profile) naming it shares the thread; so
	// does pitstop, in its own namespace, under its prefix.
	if lease := p.str("leaseName", true); lease != "" {
		name := strings.Trim(seedLeaseName.ReplaceAllString(strings.ToLower(lease), "-"), "-.")
		t.LeaseName = strings.TrimRight(("pitstop-slack-" + name)[:min(len("pitstop-slack-"+name), 253)], "-.")
		if ns := p.str("leaseNamespace", true); ns != "" {
			p.notef("leaseNamespace", "the thread's Lease is %s in pitstop's namespace (not %s/%s): pitstop writes Leases there only", t.LeaseName, ns, lease)
		}
	}
	d.spec.SlackThread = t
}

func convertMail(c *converter, p *pluginConfig, d *notifyDef) {
	m := &pitstopv1alpha1.MailNotification{
		Address: p.str("address", true), From: p.str("from", true), To: p.list("to", true),
		Subject: p.str("subject", false), Message: p.str("message", true),
	}
	if m.Subject == "" {
		m.Subject = "{{ .Node.Name }} is {{ .State }}"
		p.notef("subject", "has no subject, which pitstop requires: the subject is %q", m.Subject)
	}
	if p.boolean("auth") {
		m.Auth = &pitstopv1alpha1.MailAuth{Username: p.str("user", false), Password: c.secretRef(p, d, "password"), Identity: p.str("identity", false)}
		if m.Auth.Username == "" {
			p.errorf("user", "is required with auth: true (pitstop logs in with a user name)")
		}
	} else {
		// Go's SMTP client, which the seed uses, upgrades to TLS when the
		// server offers STARTTLS and sends in clear otherwise; pitstop's
		// default refuses a server that does not offer it.
		m.TLS = "StartTLS"
		p.warnf("address", "mail without auth: pitstop sends only over STARTTLS (tls: StartTLS) and refuses a server that does not offer it, where the seed sent in clear; set tls: None in the profile for a server on a trusted network without TLS")
		for _, f := range []string{"user", "password", "identity"} {
			if p.has(f) {
				p.notef(f, "is not used without auth: true, as in the seed")
			}
		}
	}
	d.spec.Mail = m
}

// schedule converts a notification's schedule {type, config}.
func (c *converter) schedule(inst *instance, n *yaml.Node) pitstopv1alpha1.NotificationSchedule {
	var out pitstopv1alpha1.NotificationSchedule
	what := inst.what() + ": schedule"
	if isNull(n) {
		c.errorf(inst.node, "%s is required (oneshot, periodic or scheduled), as in the seed", what)
		return out
	}
	f, _ := c.fields(n, what, "type", "config")
	typ, _ := c.text(f["type"].value, what+": type")
	sched := &instance{kind: inst.kind, name: inst.name + " schedule", node: n}
	cfg := f["config"].value
	switch typ {
	case "oneshot":
		p := c.pluginConfig(sched, cfg, "delay")
		// Without them, the seed waits a minute and repeats every hour.
		out.Oneshot = &pitstopv1alpha1.OneshotSchedule{Delay: p.durationOr("delay", time.Minute)}
	case "periodic":
		p := c.pluginConfig(sched, cfg, "interval")
		out.Periodic = &pitstopv1alpha1.PeriodicSchedule{Interval: p.durationOr("interval", time.Hour)}
	case "scheduled":
		p := c.pluginConfig(sched, cfg, "instant", "weekdays")
		s := &pitstopv1alpha1.ScheduledSchedule{Weekdays: p.weekdays("weekdays", true)}
		if t, ok := p.clock("instant"); ok {
			s.At = t.Format("15:04")
		}
		out.Scheduled = s
	case "":
		c.errorf(n, "%s: type is missing (oneshot, periodic or scheduled)", what)
	default:
		c.errorf(f["type"].value, "%s: unknown type %q (oneshot, periodic or scheduled)", what, typ)
	}
	return out
}
