package importer

import (
	"errors"
	"strings"
	"testing"
)

// seedFile joins lines into a file, so a test names the line of a problem
// by its position: line n is lines[n-1].
func seedFile(lines ...string) []byte {
	return []byte(strings.Join(lines, "\n") + "\n")
}

// oneCheck is a file with one check instance c of typ, whose config lines
// start at line 6, used by the one transition of profile p (out of
// maintenance-required, where every check plugin may be used).
func oneCheck(typ string, config ...string) []byte {
	lines := []string{
		"instances:",
		"  check:",
		"  - type: " + typ,
		"    name: c",
		"    config:",
	}
	for _, l := range config {
		lines = append(lines, "      "+l)
	}
	return seedFile(append(lines,
		"profiles:",
		"- name: p",
		"  maintenance-required:",
		"    transitions:",
		"    - check: c",
		"      next: in-maintenance",
	)...)
}

// oneTrigger is oneCheck for a trigger instance t.
func oneTrigger(typ string, config ...string) []byte {
	lines := []string{
		"instances:",
		"  trigger:",
		"  - type: " + typ,
		"    name: t",
		"    config:",
	}
	for _, l := range config {
		lines = append(lines, "      "+l)
	}
	return seedFile(append(lines,
		"profiles:",
		"- name: p",
		"  operational:",
		"    transitions:",
		"    - trigger: t",
		"      next: maintenance-required",
	)...)
}

func TestImportRefuses(t *testing.T) {
	tests := []struct {
		name string
		data []byte
		env  map[string]string
		// want is the start of one of the errors.
		want string
	}{
		{
			name: "kubernikusCount without its cluster",
			data: oneCheck("kubernikusCount", "cloudProviderSecret: {namespace: kube-system}"),
			want: `maintenance.yaml:`,
		},
		{
			name: "checkHypervisor with a field the Hypervisor does not have",
			data: oneCheck("checkHypervisor", "evictd: true"),
			want: `maintenance.yaml:6: check instance "c": config: unknown field "evictd" (known: aggregates, evicted,`,
		},
		{
			name: "hypervisorCondition without its status",
			data: oneCheck("hypervisorCondition", "type: Ready"),
			want: `maintenance.yaml:`,
		},
		{
			name: "alterHypervisor with a field the Hypervisor does not have",
			data: oneTrigger("alterHypervisor", "maintenanceMode: manual"),
			want: `maintenance.yaml:6: trigger instance "t": config: unknown field "maintenanceMode" (known: aggregates,`,
		},
		{
			name: "a plugin type the seed does not have either",
			data: oneCheck("hasLable", "key: x"),
			want: `maintenance.yaml:3: check instance "c": unknown plugin type "hasLable"`,
		},
		{
			name: "an eviction action the seed does not have",
			data: oneTrigger("eviction", "action: evict"),
			want: `maintenance.yaml:6: trigger instance "t": action: "evict" is not one of drain, cordon or uncordon`,
		},
		{
			name: "an unknown top-level key",
			data: seedFile("intervals: {requeue: 1m}", "profile: []"),
			want: `maintenance.yaml:2: the file: unknown field "profile" (known: intervals, dashboard, instances, profiles)`,
		},
		{
			name: "a requeue that is not a duration",
			data: seedFile("intervals: {requeue: often}", "profiles: []"),
			want: `maintenance.yaml:1: intervals.requeue: "often" is not a duration such as 30s or 5m`,
		},
		{
			name: "an unknown interval",
			data: seedFile("intervals: {requeue: 1m, check: 5m}", "profiles: []"),
			want: `maintenance.yaml:1: intervals: unknown field "check" (known: requeue, notify)`,
		},
		{
			name: "an unknown field in a plugin config, which the seed would ignore",
			data: oneCheck("hasLabel", "key: x", "vaule: y"),
			want: `maintenance.yaml:7: check instance "c": config: unknown field "vaule" (known: key, value)`,
		},
		{
			name: "an unset environment variable, naming the line and the variable",
			data: oneCheck("hasLabel", "key: ${NODE_LABEL}"),
			want: `maintenance.yaml:6: environment variable NODE_LABEL is not set (${NODE_LABEL})`,
		},
		{
			name: "a key holding a reference: only values are interpolated",
			data: oneCheck("hasLabel", "key: x", "${FIELD}: y"),
			env:  map[string]string{"FIELD": "value"},
			want: `maintenance.yaml:7: check instance "c": config: unknown field "${FIELD}"`,
		},
		{
			name: "an unset environment variable with a message of its own",
			data: oneCheck("hasLabel", "key: ${NODE_LABEL:?set it to the label to check}"),
			want: `maintenance.yaml:6: environment variable NODE_LABEL is not set: set it to the label to check`,
		},
		{
			name: "a prometheusInstant expr that CEL does not read",
			data: oneCheck("prometheusInstant", "url: http://prometheus:9090", "query: up", "expr: value ** 2 > 1"),
			want: `maintenance.yaml:8: check instance "c": expr: "value ** 2 > 1": 1:8: Syntax error`,
		},
		{
			name: "a weekday the seed does not know",
			data: oneCheck("timeWindow", `start: "01:00"`, `end: "02:00"`, "weekdays: [monday, funday]"),
			want: `maintenance.yaml:8: check instance "c": weekdays: "funday" is not a weekday`,
		},
		{
			name: "a time window without weekdays, as the seed does",
			data: oneCheck("timeWindow", `start: "01:00"`, `end: "02:00"`),
			want: `maintenance.yaml:6: check instance "c": weekdays: is required`,
		},
		{
			name: "a time window ending before it starts, as the seed does",
			data: oneCheck("timeWindow", `start: "05:00"`, `end: "1:00"`, "weekdays: [monday]"),
			want: `maintenance.yaml:7: check instance "c": end: 01:00 is before the start 05:00, which the seed refuses`,
		},
		{
			name: "a time window ending when it starts, which pitstop would read as all day",
			data: oneCheck("timeWindow", `start: "05:00"`, `end: "05:00"`, "weekdays: [monday]"),
			want: `maintenance.yaml:7: check instance "c": end: equals the start`,
		},
		{
			name: "a maxMaintenance with a skipAfter under a second",
			data: oneCheck("maxMaintenance", "max: 1", "skipAfter: 10ms"),
			want: `maintenance.yaml:7: check instance "c": skipAfter: must be at least 1s, got 10ms`,
		},
		{
			name: "a stagger without Leases, which never passes in the seed",
			data: oneCheck("stagger", "duration: 1h", "parallel: 0"),
			want: `maintenance.yaml:7: check instance "c": parallel: must be at least 1, got 0`,
		},
		{
			name: "a number that is not one",
			data: oneCheck("maxMaintenance", "max: two"),
			want: `maintenance.yaml:6: check instance "c": max: "two" is not a whole number`,
		},
		{
			name: "what pitstop's check constructor refuses, at the instance",
			data: oneCheck("wait", "duration: 0s"),
			want: `maintenance.yaml:3: check instance "c": wait.duration: must be positive, got 0s`,
		},
		{
			name: "a condition status pitstop does not know",
			data: oneCheck("condition", "type: Ready", "status: Maybe"),
			want: `maintenance.yaml:3: check instance "c": condition.status: "Maybe" is not one of True, False, Unknown`,
		},
		{
			name: "an affinity check outside maintenance-required",
			data: seedFile(
				"instances:",
				"  check:",
				"  - {type: affinity, name: a, config: null}",
				"profiles:",
				"- name: p",
				"  operational:",
				"    transitions:",
				"    - {check: a, next: maintenance-required}",
			),
			want: `maintenance.yaml:8: profile "p": operational: transitions[0]: check instance "a" is an affinity check, which orders nodes in maintenance-required only, not in operational`,
		},
		{
			name: "a check name pitstop's expressions cannot hold",
			data: seedFile(
				"instances:",
				"  check:",
				"  - {type: hasLabel, name: reboot-needed, config: {key: x}}",
			),
			want: `maintenance.yaml:3: check instance "reboot-needed": a check name must be letters, digits and _`,
		},
		{
			name: "two trigger names that become one",
			data: seedFile(
				"instances:",
				"  trigger:",
				"  - {type: alterLabel, name: reboot_ok, config: {key: x, value: y}}",
				"  - {type: alterLabel, name: reboot-ok, config: {key: x, value: y}}",
			),
			want: `maintenance.yaml:4: trigger instance "reboot-ok" and "reboot_ok" (line 3) would both be named reboot_ok in pitstop`,
		},
		{
			name: "an instance defined twice",
			data: seedFile(
				"instances:",
				"  check:",
				"  - {type: hasLabel, name: a, config: {key: x}}",
				"  - {type: hasLabel, name: a, config: {key: y}}",
			),
			want: `maintenance.yaml:4: check instance "a" is defined twice (first at line 3)`,
		},
		{
			name: "a profile defined twice",
			data: seedFile("profiles:", "- name: p", "- name: p"),
			want: `maintenance.yaml:3: profile "p" is defined twice (first at line 2)`,
		},
		{
			name: "a profile name Kubernetes refuses",
			data: seedFile("profiles:", "- name: Flatcar_Nodes"),
			want: `maintenance.yaml:2: profile "Flatcar_Nodes": not a valid MaintenanceProfile name`,
		},
		{
			name: "a profile name Kubernetes refuses, with what to do",
			data: seedFile("profiles:", "- name: Flatcar_Nodes"),
			want: `maintenance.yaml:2: profile "Flatcar_Nodes": not a valid MaintenanceProfile name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*'); rename it (for example "flatcar-nodes") in the file and relabel its nodes cloud.sap/maintenance-profile=<new name>`,
		},
		{
			name: "a check expression using an undefined instance",
			data: seedFile(
				"instances:",
				"  check:",
				"  - {type: hasLabel, name: a, config: {key: x}}",
				"profiles:",
				"- name: p",
				"  operational:",
				"    transitions:",
				"    - check: a && b",
				"      next: maintenance-required",
			),
			want: `maintenance.yaml:8: profile "p": operational: transitions[0]: check "a && b": undefined check instance b`,
		},
		{
			name: "a check expression pitstop cannot compile, at its line",
			data: seedFile(
				"instances:",
				"  check:",
				"  - {type: hasLabel, name: a, config: {key: x}}",
				"profiles:",
				"- name: p",
				"  operational:",
				"    transitions:",
				"    - next: maintenance-required",
				"      check: a &&",
			),
			want: `maintenance.yaml:9: profile "p": operational: transitions[0]: check "a &&": 1:5: Syntax error: mismatched input '<EOF>'`,
		},
		{
			name: "an enter chain using an undefined trigger",
			data: seedFile("profiles:", "- name: p", "  in-maintenance:", "    enter: drain"),
			want: `maintenance.yaml:4: profile "p": in-maintenance: enter "drain": undefined trigger instance drain`,
		},
		{
			name: "a next that is not a state",
			data: seedFile("profiles:", "- name: p", "  operational:", "    transitions:", "    - {check: '', next: maintenance}"),
			want: `maintenance.yaml:5: profile "p": operational: transitions[0]: next: "maintenance" is not a state`,
		},
		{
			name: "a state field the seed does not have",
			data: seedFile("profiles:", "- name: p", "  operational:", "    exit: t"),
			want: `maintenance.yaml:4: profile "p": operational: unknown field "exit" (known: enter, notify, transitions)`,
		},
		{
			name: "YAML that does not parse, at its line",
			data: seedFile("instances:", "  check:", "  - type: hasLabel", "    name: a: b"),
			want: `maintenance.yaml:4: not valid YAML: `,
		},
		{
			name: "an empty file",
			data: nil,
			want: `maintenance.yaml: the file is empty`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Convert(tc.data, envOf(tc.env))
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("Convert: got %v, want an ErrorList", err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("the error is not one line: %q", err)
			}
			for _, e := range list {
				if strings.HasPrefix(e.Error(), tc.want) {
					return
				}
			}
			t.Errorf("got errors\n%s\nwant one starting with\n%s", strings.ReplaceAll(err.Error(), "; ", "\n"), tc.want)
		})
	}
}

func TestErrorListIsOneLineAndBounded(t *testing.T) {
	var list ErrorList
	for i := range 12 {
		list = append(list, &Error{File: "m.yaml", Line: i + 1, Message: "bad"})
	}
	want := "m.yaml:1: bad; m.yaml:2: bad; m.yaml:3: bad; m.yaml:4: bad; m.yaml:5: bad; m.yaml:6: bad; " +
		"m.yaml:7: bad; m.yaml:8: bad; m.yaml:9: bad; m.yaml:10: bad; and 2 more"
	if got := list.Error(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if n := len(list.Unwrap()); n != 12 {
		t.Errorf("Unwrap() has %d errors, want 12", n)
	}
}
