package importer

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

// DefaultFile names the input in errors and notes when Options.File is
// empty: the seed reads ./config/maintenance.yaml.
const DefaultFile = "maintenance.yaml"

// maxErrors bounds how many problems an ErrorList spells out, so the
// message stays readable on one line.
const maxErrors = 10

// Options tune Import.
type Options struct {
	// File names the input in errors and notes; DefaultFile when empty.
	File string
	// Env looks up the environment variables that ${NAME} refers to. With
	// nil, every variable is unset.
	Env func(name string) (string, bool)
	// SecretName names the Secret holding the notifications' webhook URLs,
	// tokens and passwords (DefaultSecretName when empty), and
	// SecretNamespace its namespace, pitstop's (DefaultSecretNamespace
	// when empty).
	SecretName, SecretNamespace string
	// ExistingSecret says the Secret exists already, with the keys the
	// notifications name: the import returns no Secret, and the secret
	// values (and their variables) are not read.
	ExistingSecret bool
}

// Defaults of Options.
const (
	DefaultSecretName      = "pitstop-notifications"
	DefaultSecretNamespace = "pitstop-system"
)

// Result is an import: the profiles, in the order of the seed's profiles,
// and the notes on what changed on the way, in line order.
type Result struct {
	Profiles []pitstopv1alpha1.MaintenanceProfile
	// Secret holds what the seed's notifications kept in clear (webhook
	// URLs, tokens, passwords), labelled for profiles to read; nil when no
	// profile sends a notification, or with Options.ExistingSecret.
	Secret *corev1.Secret
	Notes  []Note
}

// Note is a remark on one line of the input that did not stop the import.
type Note struct {
	File string
	Line int
	// Warning marks something pitstop will do differently from the seed,
	// usually because an option was dropped. Other notes describe a rewrite
	// that keeps the behaviour, or input that only the seed needed.
	Warning bool
	Message string
}

// String formats the note as compilers do:
// "maintenance.yaml:12: warning: ...".
func (n Note) String() string {
	kind := "note"
	if n.Warning {
		kind = "warning"
	}
	return position(n.File, n.Line) + ": " + kind + ": " + n.Message
}

// Error is a problem at one line of the input.
type Error struct {
	File    string
	Line    int
	Message string
}

// Error formats the problem as "maintenance.yaml:42: message".
func (e *Error) Error() string { return position(e.File, e.Line) + ": " + e.Message }

// ErrorList is every problem an import found, in line order. Its message is
// one line, the problems joined with "; ", so that a command can print it
// as it prints any other error.
type ErrorList []*Error

// Error joins the first problems with "; ".
func (l ErrorList) Error() string {
	msgs := make([]string, 0, min(len(l), maxErrors)+1)
	for i, e := range l {
		if i == maxErrors {
			msgs = append(msgs, fmt.Sprintf("and %d more", len(l)-maxErrors))
			break
		}
		msgs = append(msgs, e.Error())
	}
	return strings.Join(msgs, "; ")
}

// Unwrap returns the problems, for errors.As.
func (l ErrorList) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

func position(file string, line int) string {
	if line > 0 {
		return fmt.Sprintf("%s:%d", file, line)
	}
	return file
}

// Convert reads a maintenance-controller configuration and returns the
// equivalent MaintenanceProfiles. env looks up the variables that ${NAME}
// refers to. It returns an ErrorList naming every line pitstop cannot
// import; the notes of a successful import are dropped (Import returns
// them).
func Convert(data []byte, env func(string) (string, bool)) ([]pitstopv1alpha1.MaintenanceProfile, error) {
	r, err := Import(data, Options{Env: env})
	if err != nil {
		return nil, err
	}
	return r.Profiles, nil
}

// Import is Convert with options, returning the notes too.
func Import(data []byte, opts Options) (*Result, error) {
	c := &converter{file: cmp.Or(opts.File, DefaultFile), env: opts.Env,
		secretName: cmp.Or(opts.SecretName, DefaultSecretName), existingSecret: opts.ExistingSecret}
	if c.env == nil {
		c.env = func(string) (string, bool) { return "", false }
	}
	var profiles []pitstopv1alpha1.MaintenanceProfile
	var secrets map[string]string
	if seed := c.parse(data); seed != nil {
		profiles, secrets = c.convert(seed)
	}
	if len(c.errs) > 0 {
		slices.SortStableFunc(c.errs, func(a, b *Error) int { return cmp.Compare(a.Line, b.Line) })
		return nil, c.errs
	}
	slices.SortStableFunc(c.notes, func(a, b Note) int { return cmp.Compare(a.Line, b.Line) })
	r := &Result{Profiles: profiles, Notes: c.notes}
	if len(secrets) > 0 {
		r.Secret = &corev1.Secret{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: metav1.ObjectMeta{
				Name: c.secretName, Namespace: cmp.Or(opts.SecretNamespace, DefaultSecretNamespace),
				Labels: map[string]string{pitstopv1alpha1.LabelUsableByProfiles: "true"},
			},
			StringData: secrets,
		}
	}
	return r, nil
}
