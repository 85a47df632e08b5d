package importer

import (
	"strings"
	"testing"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

func TestExpandString(t *testing.T) {
	env := envOf(map[string]string{"HOST": "prometheus", "PORT": "9090", "EMPTY": ""})
	tests := []struct {
		name, in, want, wantErr string
	}{
		{name: "leaves a value without references alone", in: "value <= 1", want: "value <= 1"},
		{name: "replaces a set variable", in: "${HOST}", want: "prometheus"},
		{name: "replaces references inside a longer value", in: "http://${HOST}:${PORT}/", want: "http://prometheus:9090/"},
		{name: "keeps a variable set to the empty string", in: "${EMPTY}", want: ""},
		{name: "uses the default of an unset variable", in: "${MISSING:fallback}", want: "fallback"},
		{name: "ignores the default of a set variable", in: "${HOST:fallback}", want: "prometheus"},
		{name: "reads $${ as a literal ${", in: "$${HOST}", want: "${HOST}"},
		{name: "refuses an unset variable, naming it", in: "x${MISSING}", wantErr: "environment variable MISSING is not set (${MISSING})"},
		{name: "refuses an unset variable with its own message", in: "${MISSING:?ask the team}", wantErr: "environment variable MISSING is not set: ask the team"},
		{name: "refuses a reference without a closing brace", in: "${HOST", wantErr: `"${HOST": ${ without a closing }`},
		{name: "refuses a reference without a name", in: "${}", wantErr: "${}: no variable name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := expandString(tc.in, env)
			switch {
			case tc.wantErr != "":
				if err == nil || err.Error() != tc.wantErr {
					t.Errorf("expandString(%q) = %q, %v; want error %q", tc.in, got, err, tc.wantErr)
				}
			case err != nil || got != tc.want:
				t.Errorf("expandString(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestImportInterpolatesValues(t *testing.T) {
	data := seedFile(
		"instances:",
		"  check:",
		"  - type: maxMaintenance",
		"    name: ${CHECK_NAME}",
		"    config:",
		"      max: ${MAX}",
		"      groupBy: [\"${ZONE_LABEL}\"]",
		"profiles:",
		"- name: ${PROFILE}",
		"  maintenance-required:",
		"    transitions:",
		"    - {check: budget, next: in-maintenance}",
	)
	env := envOf(map[string]string{
		"CHECK_NAME": "budget",
		"MAX":        "2",
		"ZONE_LABEL": "topology.kubernetes.io/zone",
		"PROFILE":    "zonal",
	})
	profiles, err := Convert(data, env)
	if err != nil {
		t.Fatalf("Convert: %v", err)
	}
	if len(profiles) != 1 || profiles[0].Name != "zonal" {
		t.Fatalf("got profiles %+v, want one named zonal", profiles)
	}
	m := profiles[0].Spec.Checks[0].MaxMaintenance
	if m.Max != 2 || m.GroupBy != "topology.kubernetes.io/zone" {
		t.Errorf("maxMaintenance = %+v, want max 2 grouped by topology.kubernetes.io/zone", *m)
	}
}

// TestNotificationSecretsFromAnExistingSecret: with an existing Secret, a
// notification's secret values are not read, so their variables need not
// be set; without it an unset one is an error at its line.
func TestNotificationSecretsFromAnExistingSecret(t *testing.T) {
	data := seedFile(
		"instances:",
		"  notify:",
		"  - type: slack",
		"    name: chat",
		"    config: {hook: \"${SLACK_HOOK}\", channel: \"#ops\", message: hi}",
		"    schedule: {type: periodic, config: {interval: 24h}}",
		"profiles:",
		"- name: p",
		"  in-maintenance:",
		"    notify: chat",
	)
	r, err := Import(data, Options{ExistingSecret: true, SecretName: "hooks"})
	if err != nil {
		t.Fatalf("Import: %v; want no error for SLACK_HOOK, which the existing Secret holds", err)
	}
	if r.Secret != nil {
		t.Errorf("a Secret %+v with --existing-secret", r.Secret)
	}
	if ref := r.Profiles[0].Spec.Notifications[0].Slack.WebhookURL; ref != (pitstopv1alpha1.SecretKeyRef{Name: "hooks", Key: "chat.hook"}) {
		t.Errorf("webhookURL %+v, want hooks/chat.hook", ref)
	}
	_, err = Import(data, Options{})
	if err == nil || !strings.Contains(err.Error(), "maintenance.yaml:5: environment variable SLACK_HOOK is not set") {
		t.Errorf("Import without the Secret: %v, want SLACK_HOOK named at line 5", err)
	}
}

// TestUnsetVariableIsReportedAlone checks that an instance or profile
// with an unset variable is not converted further: errors about the
// unexpanded value would only confuse.
func TestUnsetVariableIsReportedAlone(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{name: "in a check instance", data: oneCheck("maxMaintenance", "max: ${MAX}"), want: "maintenance.yaml:6: environment variable MAX is not set (${MAX})"},
		{name: "in a profile", data: seedFile("profiles:", "- name: p", "  operational:", "    transitions:", "    - {check: '${CHECK}', next: in-maintenance}"), want: "maintenance.yaml:5: environment variable CHECK is not set (${CHECK})"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Convert(tc.data, nil)
			if err == nil || err.Error() != tc.want {
				t.Errorf("Convert: got %v, want only %q", err, tc.want)
			}
		})
	}
}
