// Package profilesecret reads the Secrets that maintenance profiles name:
// the tokens, passwords and URLs of notifications and of prometheusInstant
// checks. It reads only Secrets of pitstop's namespace that are opted in
// with the pitstop.dev/usable-by-profiles label, and never says what a Secret holds: its
// errors name the Secret and the key, not the value. It does not cache:
// each caller decides how long it keeps what it read. Hosts are the servers
// an administrator allows profiles to send such Secrets to, where the
// profile, not the Secret, names the server (a mail notification's SMTP
// server).
//
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get,namespace=pitstop-system
package profilesecret
