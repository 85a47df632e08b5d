package notify

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/profilesecret"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

var env *testutil.Env

func TestMain(m *testing.M) { testutil.Main(m, &env) }

const namespace = "pitstop-notify"

// sender returns a Sender against the test API server, in a fresh
// namespace holding one Secret with the given keys, opted in for profiles.
func sender(t *testing.T, secret map[string]string) *Sender {
	t.Helper()
	ns := testutil.Namespace(t, env.Client, namespace+"-"+strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")))
	createSecret(t, ns, "notify", map[string]string{pitstopv1alpha1.LabelUsableByProfiles: "true"}, secret)
	return &Sender{Secrets: env.Client, Client: env.Client, Namespace: ns, HTTP: &http.Client{Timeout: 5 * time.Second}}
}

func createSecret(t *testing.T, namespace, name string, labels, keys map[string]string) {
	t.Helper()
	data := map[string][]byte{}
	for k, v := range keys {
		data[k] = []byte(v)
	}
	testutil.Create(t, env.Client, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels}, Data: data})
}

func ref(key string) pitstopv1alpha1.SecretKeyRef {
	return pitstopv1alpha1.SecretKeyRef{Name: "notify", Key: key}
}

// localServers allows the test servers, all on 127.0.0.1, as mail servers.
func localServers(t *testing.T) *profilesecret.Hosts {
	t.Helper()
	h, err := profilesecret.ParseHosts([]string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	return &h
}

// message compiles inst, with the test servers allowed, and renders it for
// the sample node.
func message(t *testing.T, inst pitstopv1alpha1.NotificationInstance) Message {
	t.Helper()
	return messageWith(t, inst, localServers(t))
}

// messageWith compiles inst with mailServers allowed and renders it for
// the sample node.
func messageWith(t *testing.T, inst pitstopv1alpha1.NotificationInstance, mailServers *profilesecret.Hosts) Message {
	t.Helper()
	inst.Schedule = pitstopv1alpha1.NotificationSchedule{Oneshot: &pitstopv1alpha1.OneshotSchedule{}}
	n, err := Compile(inst, mailServers)
	if err != nil {
		t.Fatal(err)
	}
	d := sample
	d.Profile = Profiles{Current: "os-updates", Last: "os-updates"}
	m, err := n.Render("os-updates", d)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// recorder is an HTTP endpoint that keeps what it was sent.
type recorder struct {
	mu       sync.Mutex
	requests []recorded
	reply    func(w http.ResponseWriter, r recorded)
}

type recorded struct {
	Path, ContentType string
	Body              []byte
	Form              url.Values
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	got := recorded{Path: r.URL.Path, ContentType: r.Header.Get("Content-Type"), Body: body}
	got.Form, _ = url.ParseQuery(string(body))
	rec.mu.Lock()
	rec.requests = append(rec.requests, got)
	rec.mu.Unlock()
	if rec.reply != nil {
		rec.reply(w, got)
	}
}

func (rec *recorder) all() []recorded {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]recorded(nil), rec.requests...)
}

// TestSlackWebhookPayload: the incoming webhook gets the JSON Slack
// documents, {"channel", "text"}, at the URL from the Secret.
func TestSlackWebhookPayload(t *testing.T) {
	rec := &recorder{reply: func(w http.ResponseWriter, _ recorded) { io.WriteString(w, "ok") }}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	s := sender(t, map[string]string{"url": srv.URL + "/services/T000/B000/XXXX\n"})
	m := message(t, pitstopv1alpha1.NotificationInstance{Name: "chat", Slack: &pitstopv1alpha1.SlackNotification{
		WebhookURL: ref("url"), Channel: "#ops", Message: "{{ .Node.Name }} is {{ .State }}"}})
	if err := s.Send(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	reqs := rec.all()
	if len(reqs) != 1 || reqs[0].Path != "/services/T000/B000/XXXX" || reqs[0].ContentType != "application/json" {
		t.Fatalf("requests %+v, want one JSON POST to the webhook's path", reqs)
	}
	want := `{"channel":"#ops","text":"node-1 is maintenance-required","replace_original":false,"delete_original":false}`
	if string(reqs[0].Body) != want {
		t.Errorf("payload %s, want %s", reqs[0].Body, want)
	}
}

// TestSlackThreadGroupsRepliesPerPeriod: the first message of a period
// opens a thread with the title (chat.postMessage with the bot token, in
// the form as Slack's client library sends it),
// every message is a reply in it (thread_ts), the thread lives in a Lease,
// and a message after the period opens a new thread.
func TestSlackThreadGroupsRepliesPerPeriod(t *testing.T) {
	var mu sync.Mutex
	ts := 0
	rec := &recorder{reply: func(w http.ResponseWriter, r recorded) {
		mu.Lock()
		ts++
		n := ts
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"ok": true, "channel": "C0123", "ts": "1700000000.00000" + string(rune('0'+n))})
	}}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	s := sender(t, map[string]string{"token": "xoxb-test-token"})
	s.SlackAPIURL = srv.URL + "/api/"
	inst := pitstopv1alpha1.NotificationInstance{Name: "ops_thread", SlackThread: &pitstopv1alpha1.SlackThreadNotification{
		Token: ref("token"), Channel: "C0123", Title: "Maintenance of profile {{ .Profile.Current }}",
		Message: "{{ .Node.Name }}: {{ .State }}", Period: pitstopv1alpha1.Duration{Duration: 2 * time.Second}}}
	m := message(t, inst)
	for range 3 {
		if err := s.Send(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	reqs := rec.all()
	if len(reqs) != 4 {
		t.Fatalf("%d calls to Slack, want 4 (the title and three replies): %+v", len(reqs), reqs)
	}
	for i, r := range reqs {
		if r.Path != "/api/chat.postMessage" || r.Form.Get("token") != "xoxb-test-token" || r.Form.Get("channel") != "C0123" {
			t.Errorf("call %d: %s with %v; want chat.postMessage with the bot token to C0123", i, r.Path, r.Form)
		}
	}
	if reqs[0].Form.Get("text") != "Maintenance of profile os-updates" || reqs[0].Form.Has("thread_ts") {
		t.Errorf("first call %v, want the title outside any thread", reqs[0].Form)
	}
	for _, r := range reqs[1:] {
		if r.Form.Get("text") != "node-1: maintenance-required" || r.Form.Get("thread_ts") != "1700000000.000001" {
			t.Errorf("reply %v, want the message in thread 1700000000.000001", r.Form)
		}
	}
	lease := &coordinationv1.Lease{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: s.Namespace, Name: "pitstop-slack-os-updates-ops-thread"}, lease); err != nil {
		t.Fatal(err)
	}
	if lease.Annotations[pitstopv1alpha1.AnnotationSlackThread] != "1700000000.000001" || *lease.Spec.LeaseDurationSeconds != 2 {
		t.Errorf("Lease %v %v, want the thread and the period", lease.Annotations, lease.Spec)
	}

	time.Sleep(2100 * time.Millisecond) // the period ends
	if err := s.Send(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	reqs = rec.all()
	if len(reqs) != 6 || reqs[4].Form.Has("thread_ts") || reqs[5].Form.Get("thread_ts") != "1700000000.000005" {
		t.Fatalf("after the period: %+v, want a new title and a reply in its thread", reqs[4:])
	}
}

// TestWebhookBody: the generic webhook gets text plus the node's facts.
func TestWebhookBody(t *testing.T) {
	rec := &recorder{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	s := sender(t, map[string]string{"url": srv.URL + "/hooks/abc"})
	m := message(t, pitstopv1alpha1.NotificationInstance{Name: "teams", Webhook: &pitstopv1alpha1.WebhookNotification{
		URL: ref("url"), Message: "{{ .Node.Name }} waits"}})
	// A state's notification is about no scheduled event.
	atRisk := m
	m.Data.Event = Event{}
	if err := s.Send(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	// A deadlineAtRisk one says which.
	if err := s.Send(t.Context(), atRisk); err != nil {
		t.Fatal(err)
	}
	reqs := rec.all()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	want := `{"text":"node-1 waits","node":"node-1","profile":"os-updates","state":"maintenance-required","previous":"operational","since":"2026-01-01T00:00:00Z","blocking":["window: closed"]}`
	if string(reqs[0].Body) != want || reqs[0].ContentType != "application/json" {
		t.Errorf("body %s (%s), want %s", reqs[0].Body, reqs[0].ContentType, want)
	}
	want = strings.TrimSuffix(want, "}") + `,"event":{"object":"openshift-machine-api/worker-1-instance-retirement-1","code":"instance-retirement","instance":"i-0123456789abcdef0","machine":"worker-1",` +
		`"notBefore":"2026-01-02T00:00:00Z","latestSafeStart":"2026-01-01T22:30:00Z","reason":"NoTurnInTime","message":"no transition of node node-1's profiles passes now, and none can before 2026-01-02T06:00:00Z"}}`
	if string(reqs[1].Body) != want {
		t.Errorf("deadlineAtRisk body %s, want %s", reqs[1].Body, want)
	}
}

// TestErrorsNameTheSecretAndHideTheURL: a missing key names the Secret and
// the key; a failed request never shows the URL, which holds a token.
func TestErrorsNameTheSecretAndHideTheURL(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	secretURL := "http://" + l.Addr().String() + "/hooks/secret-token"
	l.Close() // nothing listens: the request fails
	s := sender(t, map[string]string{"url": secretURL})
	m := message(t, pitstopv1alpha1.NotificationInstance{Name: "teams", Webhook: &pitstopv1alpha1.WebhookNotification{URL: ref("url"), Message: "x"}})
	err = s.Send(t.Context(), m)
	if err == nil || strings.Contains(err.Error(), "secret-token") || !strings.Contains(err.Error(), "<url from Secret>") {
		t.Errorf("Send to nowhere: %v, want an error without the URL", err)
	}
	m = message(t, pitstopv1alpha1.NotificationInstance{Name: "teams", Webhook: &pitstopv1alpha1.WebhookNotification{URL: ref("nope"), Message: "x"}})
	if err := s.Send(t.Context(), m); err == nil || !strings.Contains(err.Error(), "Secret "+s.Namespace+`/notify has no key "nope"`) {
		t.Errorf("Send with a missing key: %v, want an error naming the Secret and the key", err)
	}
}

// smtpServer is a real SMTP server (go-smtp) with STARTTLS and PLAIN
// login, keeping what it receives.
type smtpServer struct {
	addr string
	// roots trust its certificate.
	roots *tls.Config
	mu    sync.Mutex
	mails []receivedMail
	// sessions counts the connections it was sent.
	sessions int
}

type receivedMail struct {
	from, user string
	to         []string
	data       string
}

func startSMTP(t *testing.T, startTLS bool) *smtpServer {
	t.Helper()
	// httptest's TLS server carries a certificate for 127.0.0.1 and a
	// client configuration that trusts it; the SMTP server borrows both.
	certs := httptest.NewTLSServer(http.NotFoundHandler())
	t.Cleanup(certs.Close)
	s := &smtpServer{roots: certs.Client().Transport.(*http.Transport).TLSClientConfig}
	srv := smtp.NewServer(backend{s})
	srv.Domain = "localhost"
	if startTLS {
		srv.TLSConfig = &tls.Config{Certificates: certs.TLS.Certificates}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = l.Addr().String()
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return s
}

type backend struct{ s *smtpServer }

func (b backend) NewSession(*smtp.Conn) (smtp.Session, error) {
	b.s.mu.Lock()
	b.s.sessions++
	b.s.mu.Unlock()
	return &session{s: b.s}, nil
}

type session struct {
	s    *smtpServer
	mail receivedMail
}

func (s *session) AuthMechanisms() []string { return []string{sasl.Plain} }

func (s *session) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(identity, user, password string) error {
		if user != "pitstop" || password != "s3cret" {
			return errors.New("invalid credentials")
		}
		s.mail.user = user
		return nil
	}), nil
}

func (s *session) Mail(from string, _ *smtp.MailOptions) error { s.mail.from = from; return nil }
func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.mail.to = append(s.mail.to, to)
	return nil
}
func (s *session) Data(r io.Reader) error {
	data, err := io.ReadAll(r)
	s.mail.data = string(data)
	s.s.mu.Lock()
	s.s.mails = append(s.s.mails, s.mail)
	s.s.mu.Unlock()
	return err
}
func (s *session) Reset()        { s.mail = receivedMail{} }
func (s *session) Logout() error { return nil }

func (s *smtpServer) connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions
}

func (s *smtpServer) received() []receivedMail {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]receivedMail(nil), s.mails...)
}

func mailInstance(address string) pitstopv1alpha1.NotificationInstance {
	return pitstopv1alpha1.NotificationInstance{Name: "ops_mail", Mail: &pitstopv1alpha1.MailNotification{
		Address: address, From: "pitstop@example.com", To: []string{"ops@example.com", "oncall@example.com"},
		Subject: "{{ .Node.Name }} is {{ .State }}", Message: "Node {{ .Node.Name }} waits:\n{{ range .Blocking }}- {{ . }}\n{{ end }}",
		Auth: &pitstopv1alpha1.MailAuth{Username: "pitstop", Password: ref("password")}}}
}

// TestMailThroughSTARTTLSWithLogin sends through a real SMTP server:
// STARTTLS, PLAIN login with the password from the Secret, both
// recipients, the rendered subject and body.
func TestMailThroughSTARTTLSWithLogin(t *testing.T) {
	srv := startSMTP(t, true)
	s := sender(t, map[string]string{"password": "s3cret"})
	s.MailTLS = srv.roots
	if err := s.Send(t.Context(), message(t, mailInstance(srv.addr))); err != nil {
		t.Fatal(err)
	}
	mails := srv.received()
	if len(mails) != 1 {
		t.Fatalf("%d mails received, want 1", len(mails))
	}
	m := mails[0]
	if m.user != "pitstop" || m.from != "pitstop@example.com" || strings.Join(m.to, ",") != "ops@example.com,oncall@example.com" {
		t.Errorf("mail from %q to %v as %q", m.from, m.to, m.user)
	}
	for _, want := range []string{"Subject: node-1 is maintenance-required", "Node node-1 waits:\r\n- window: closed"} {
		if !strings.Contains(m.data, want) {
			t.Errorf("mail does not contain %q:\n%s", want, m.data)
		}
	}
}

// TestMailRefusesAServerWithoutTLS: by default a server that cannot
// STARTTLS gets neither the password nor the mail.
func TestMailRefusesAServerWithoutTLS(t *testing.T) {
	srv := startSMTP(t, false)
	s := sender(t, map[string]string{"password": "s3cret"})
	err := s.Send(t.Context(), message(t, mailInstance(srv.addr)))
	if err == nil || len(srv.received()) != 0 {
		t.Fatalf("Send: %v with %d mails received, want a refusal and nothing sent", err, len(srv.received()))
	}
	if !strings.Contains(err.Error(), "sending mail through "+srv.addr) {
		t.Errorf("error %q does not name the server", err)
	}
}

// TestSlackThreadLeavesOtherLeasesAlone names, as a slackThread's
// leaseName, a Lease the sender did not create (as the leader election's or
// a budget slot's would be): the sender refuses it, says why, and neither
// posts nor changes the Lease. The API server refuses such names outside
// pitstop-slack-* in the first place.
func TestSlackThreadLeavesOtherLeasesAlone(t *testing.T) {
	rec := &recorder{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	s := sender(t, map[string]string{"token": "xoxb-test-token"})
	s.SlackAPIURL = srv.URL + "/api/"
	foreign := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: "pitstop-slack-taken"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("replica-a"), LeaseDurationSeconds: ptr.To[int32](15)},
	}
	testutil.Create(t, env.Client, foreign)
	inst := pitstopv1alpha1.NotificationInstance{Name: "ops", SlackThread: &pitstopv1alpha1.SlackThreadNotification{
		Token: ref("token"), Channel: "C0123", Title: "t", Message: "m", Period: pitstopv1alpha1.Duration{Duration: time.Hour}, LeaseName: "pitstop-slack-taken"}}
	err := s.Send(t.Context(), message(t, inst))
	if !errors.Is(err, ErrForeignLease) || !strings.Contains(err.Error(), "pitstop-slack-taken") {
		t.Fatalf("Send: got %v, want a refusal naming the Lease", err)
	}
	if n := len(rec.all()); n != 0 {
		t.Errorf("%d calls to Slack, want none", n)
	}
	got := &coordinationv1.Lease{}
	if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(foreign), got); err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != foreign.ResourceVersion {
		t.Errorf("the sender changed a Lease it did not create: %+v", got)
	}

	for _, name := range []string{"pitstop-manager", "pitstop-budget-x", "pitstop-slack-"} {
		profile := &pitstopv1alpha1.MaintenanceProfile{
			ObjectMeta: metav1.ObjectMeta{Name: "lease-" + strings.TrimSuffix(name, "-")},
			Spec: pitstopv1alpha1.MaintenanceProfileSpec{Notifications: []pitstopv1alpha1.NotificationInstance{{
				Name: "ops", Schedule: pitstopv1alpha1.NotificationSchedule{Oneshot: &pitstopv1alpha1.OneshotSchedule{}},
				SlackThread: &pitstopv1alpha1.SlackThreadNotification{Token: ref("token"), Channel: "C0123", Title: "t", Message: "m",
					Period: pitstopv1alpha1.Duration{Duration: time.Hour}, LeaseName: name}}}},
		}
		err := env.Client.Create(t.Context(), profile)
		if err == nil || !strings.Contains(err.Error(), "leaseName") {
			t.Errorf("a profile whose slackThread.leaseName is %q: got %v, want the API server's refusal naming leaseName", name, err)
			_ = env.Client.Delete(t.Context(), profile)
		}
	}
}

// TestOnlySecretsOptedInForProfilesAreRead: a notification naming a Secret
// of pitstop's namespace that is not labelled
// pitstop.dev/usable-by-profiles=true (here the webhook's serving key, as
// the mail password for a server of the profile author's choosing) is
// refused before anything is sent, with an error naming the Secret, the
// key and the label; so is one labelled otherwise than "true". The Secret
// opted in is read.
func TestOnlySecretsOptedInForProfilesAreRead(t *testing.T) {
	rec := &recorder{reply: func(w http.ResponseWriter, _ recorded) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok": true, "channel": "C0123", "ts": "1700000000.000001"}`)
	}}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	mailSrv := startSMTP(t, true)
	s := sender(t, map[string]string{"url": srv.URL + "/hook", "token": "xoxb-test-token", "password": "s3cret"})
	s.SlackAPIURL = srv.URL + "/api/"
	s.MailTLS = mailSrv.roots
	createSecret(t, s.Namespace, "pitstop-webhook-cert", nil, map[string]string{"tls.key": "-----BEGIN PRIVATE KEY-----", "url": srv.URL + "/hook"})
	createSecret(t, s.Namespace, "half-opted", map[string]string{pitstopv1alpha1.LabelUsableByProfiles: "yes"}, map[string]string{"url": srv.URL + "/hook"})
	secretRef := func(name, key string) pitstopv1alpha1.SecretKeyRef {
		return pitstopv1alpha1.SecretKeyRef{Name: name, Key: key}
	}
	instances := func(ref func(key string) pitstopv1alpha1.SecretKeyRef) map[string]pitstopv1alpha1.NotificationInstance {
		mail := mailInstance(mailSrv.addr)
		mail.Mail.Auth.Password = ref("password")
		return map[string]pitstopv1alpha1.NotificationInstance{
			"slack":       {Name: "chat", Slack: &pitstopv1alpha1.SlackNotification{WebhookURL: ref("url"), Message: "m"}},
			"slackThread": {Name: "thread", SlackThread: &pitstopv1alpha1.SlackThreadNotification{Token: ref("token"), Channel: "C0123", Title: "t", Message: "m", Period: pitstopv1alpha1.Duration{Duration: time.Hour}}},
			"mail":        mail,
			"webhook":     {Name: "hook", Webhook: &pitstopv1alpha1.WebhookNotification{URL: ref("url"), Message: "m"}},
		}
	}

	for _, refused := range []struct{ secret, key string }{{"pitstop-webhook-cert", "tls.key"}, {"half-opted", "url"}} {
		for plugin, inst := range instances(func(string) pitstopv1alpha1.SecretKeyRef { return secretRef(refused.secret, refused.key) }) {
			err := s.Send(t.Context(), message(t, inst))
			want := fmt.Sprintf(`Secret %s/%s (key %q) is not labelled pitstop.dev/usable-by-profiles=true`, s.Namespace, refused.secret, refused.key)
			if !errors.Is(err, profilesecret.ErrNotUsable) || !strings.Contains(err.Error(), want) {
				t.Errorf("%s naming Secret %s: got %v, want an error containing %q", plugin, refused.secret, err, want)
			}
		}
	}
	if n, c := len(rec.all()), mailSrv.connections(); n != 0 || c != 0 {
		t.Fatalf("%d HTTP requests and %d SMTP connections with Secrets not opted in, want none", n, c)
	}

	for plugin, inst := range instances(ref) {
		if err := s.Send(t.Context(), message(t, inst)); err != nil {
			t.Errorf("%s naming the Secret opted in: %v", plugin, err)
		}
	}
	if n, mails := len(rec.all()), len(mailSrv.received()); n != 4 || mails != 1 {
		t.Errorf("%d HTTP requests and %d mails with the Secret opted in, want 4 (slack, the thread's title and reply, webhook) and 1", n, mails)
	}
}

// TestUntrustedMailLoginOnlyToAllowed: a profile author
// names a mail notification's SMTP server, and may name any opted-in
// Secret as its password. Such a notification is refused unless an
// administrator allowed the server (--notify-host-allow; none by default),
// with an error naming the field, the server and the flag, and the server
// is never contacted. A mail without a password still goes to any server,
// and an allowed server gets the login.
func TestUntrustedMailLoginOnlyToAllowed(t *testing.T) {
	srv := startSMTP(t, true)
	s := sender(t, map[string]string{"password": "s3cret"})
	s.MailTLS = srv.roots
	inst := mailInstance(srv.addr)
	inst.Schedule = pitstopv1alpha1.NotificationSchedule{Oneshot: &pitstopv1alpha1.OneshotSchedule{}}
	elsewhere, err := profilesecret.ParseHosts([]string{"smtp.example.com", "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	for name, allowed := range map[string]profilesecret.Hosts{"no server allowed (the default)": {}, "other servers allowed": elsewhere} {
		t.Run(name, func(t *testing.T) {
			_, err := Compile(inst, &allowed)
			if !errors.Is(err, ErrDestinationNotAllowed) {
				t.Fatalf("Compile: got %v, want %v", err, ErrDestinationNotAllowed)
			}
			for _, want := range []string{`mail.address "` + srv.addr + `"`, "mail.auth.password (Secret notify", "sent to 127.0.0.1", "--notify-host-allow"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
	if n := srv.connections(); n != 0 {
		t.Fatalf("the server not allowed had %d connections, want none", n)
	}

	// Without a password, no Secret goes anywhere: any server, as before.
	open := inst
	open.Mail = inst.Mail.DeepCopy()
	open.Mail.Auth = nil
	if err := s.Send(t.Context(), messageWith(t, open, &profilesecret.Hosts{})); err != nil {
		t.Fatalf("a mail without a password: %v", err)
	}
	// The allowed server gets the login and the mail.
	port := srv.addr[strings.LastIndex(srv.addr, ":")+1:]
	allowed, err := profilesecret.ParseHosts([]string{"127.0.0.1:" + port})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(t.Context(), messageWith(t, mailInstance(srv.addr), &allowed)); err != nil {
		t.Fatal(err)
	}
	mails := srv.received()
	if len(mails) != 2 || mails[0].user != "" || mails[1].user != "pitstop" {
		t.Fatalf("received %+v, want a mail without login, then one logged in as pitstop", mails)
	}
}
