package notify

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/slack-go/slack"
	mail "github.com/wneessen/go-mail"
	"github.com/wneessen/go-mail/smtp"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/profilesecret"
)

// sendTimeout bounds one delivery attempt.
const sendTimeout = 30 * time.Second

// Sender delivers rendered messages.
type Sender struct {
	// Secrets reads the Secrets notifications refer to, only those opted
	// in (profilesecret); it should read from the API server, not a cache,
	// so that pitstop needs no watch on Secrets.
	Secrets client.Reader
	// Client reads and writes the Leases that hold Slack threads.
	Client client.Client
	// Namespace is where the Secrets and Leases are: pitstop's own.
	Namespace string
	// HTTP sends Slack and webhook requests.
	HTTP *http.Client
	// SlackAPIURL is the Slack Web API's base URL (slack.APIURL unless
	// set).
	SlackAPIURL string
	// MailTLS is the TLS configuration for SMTP (the system's roots unless
	// set); the server name is filled in.
	MailTLS *tls.Config
}

// Send delivers one message.
func (s *Sender) Send(ctx context.Context, m Message) error {
	ctx, cancel := context.WithTimeout(ctx, sendTimeout)
	defer cancel()
	switch spec := m.spec; {
	case spec.Slack != nil:
		return s.slack(ctx, m, spec.Slack)
	case spec.SlackThread != nil:
		return s.slackThread(ctx, m, spec.SlackThread)
	case spec.Mail != nil:
		return s.mail(ctx, m, spec.Mail)
	case spec.Webhook != nil:
		return s.webhook(ctx, m, spec.Webhook)
	}
	return fmt.Errorf("notification %s has no plugin", m.Notification)
}

// secret reads one key of an opted-in Secret in pitstop's namespace
// (profilesecret.Read).
func (s *Sender) secret(ctx context.Context, ref pitstopv1alpha1.SecretKeyRef) (string, error) {
	return profilesecret.Read(ctx, s.Secrets, s.Namespace, ref)
}

func (s *Sender) slack(ctx context.Context, m Message, spec *pitstopv1alpha1.SlackNotification) error {
	hook, err := s.secret(ctx, spec.WebhookURL)
	if err != nil {
		return err
	}
	msg := &slack.WebhookMessage{Channel: spec.Channel, Text: m.Texts["message"]}
	if err := slack.PostWebhookCustomHTTPContext(ctx, hook, s.HTTP, msg); err != nil {
		return redact(err, hook)
	}
	return nil
}

// mail sends through SMTP: STARTTLS required unless the instance says
// otherwise, PLAIN login when configured.
func (s *Sender) mail(ctx context.Context, m Message, spec *pitstopv1alpha1.MailNotification) error {
	host, port, err := mailServer(spec.Address)
	if err != nil {
		return err
	}
	msg := mail.NewMsg()
	if err := msg.From(spec.From); err != nil {
		return fmt.Errorf("from %q: %w", spec.From, err)
	}
	if err := msg.To(spec.To...); err != nil {
		return fmt.Errorf("to: %w", err)
	}
	msg.Subject(m.Texts["subject"])
	msg.SetBodyString(mail.TypeTextPlain, m.Texts["message"])

	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.MailTLS != nil {
		tlsConfig = s.MailTLS.Clone()
	}
	tlsConfig.ServerName = host
	opts := []mail.Option{mail.WithPort(port), mail.WithTimeout(sendTimeout), mail.WithTLSConfig(tlsConfig)}
	switch spec.TLS {
	case "TLS":
		opts = append(opts, mail.WithSSL())
	case "None":
		opts = append(opts, mail.WithTLSPolicy(mail.NoTLS))
	default:
		opts = append(opts, mail.WithTLSPolicy(mail.TLSMandatory))
	}
	if spec.Auth != nil {
		password, err := s.secret(ctx, spec.Auth.Password)
		if err != nil {
			return err
		}
		// Plain login only over TLS, or to a server on this machine.
		opts = append(opts, mail.WithSMTPAuthCustom(smtp.PlainAuth(spec.Auth.Identity, spec.Auth.Username, password, host, false)))
	}
	c, err := mail.NewClient(host, opts...)
	if err != nil {
		return fmt.Errorf("mail server %s: %w", spec.Address, err)
	}
	if err := c.DialAndSendWithContext(ctx, msg); err != nil {
		return fmt.Errorf("sending mail through %s: %w", spec.Address, err)
	}
	return nil
}

// mailServer splits an SMTP server address into host and port.
func mailServer(address string) (string, int, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil || host == "" {
		return "", 0, fmt.Errorf("%q is not host:port", address)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return "", 0, fmt.Errorf("%q: port must be a number from 1 to 65535", address)
	}
	return host, n, nil
}

// webhookBody is what the webhook plugin POSTs.
type webhookBody struct {
	Text     string    `json:"text"`
	Node     string    `json:"node"`
	Profile  string    `json:"profile"`
	State    string    `json:"state"`
	Previous string    `json:"previous,omitempty"`
	Since    time.Time `json:"since"`
	Blocking []string  `json:"blocking,omitempty"`
	// Event is set in a deadlineAtRisk notification.
	Event *Event `json:"event,omitempty"`
}

func (s *Sender) webhook(ctx context.Context, m Message, spec *pitstopv1alpha1.WebhookNotification) error {
	target, err := s.secret(ctx, spec.URL)
	if err != nil {
		return err
	}
	b := webhookBody{
		Text: m.Texts["message"], Node: m.Node, Profile: m.Profile, State: m.Data.State,
		Previous: m.Data.Previous, Since: m.Data.Since, Blocking: m.Data.Blocking,
	}
	if e := m.Data.Event; e.Object != "" {
		b.Event = &e
	}
	body, err := json.Marshal(b)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return redact(err, target)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.HTTP.Do(req)
	if err != nil {
		return redact(err, target)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("webhook answered %s", resp.Status)
	}
	return nil
}

// redact keeps a secret URL out of an error (and so out of logs and
// Events): the URL of a request error is replaced, and so is the URL
// anywhere else in the message.
func redact(err error, secret string) error {
	const hidden = "<url from Secret>"
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		err = fmt.Errorf("%s %s: %w", ue.Op, hidden, ue.Err)
	}
	if secret != "" && strings.Contains(err.Error(), secret) {
		err = errors.New(strings.ReplaceAll(err.Error(), secret, hidden))
	}
	return err
}
