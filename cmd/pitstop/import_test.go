package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/importer"
)

// importTestdata is the importer's testdata: seed files and their imports.
const importTestdata = "../../internal/importer/testdata"

// TestImportPrintsProfilesTheAPIServerAccepts imports seed files and
// creates what `pitstop import` prints on the API server, dry-run: the
// YAML parses back into the notifications' Secret and MaintenanceProfiles,
// and the API server (the CRD's schema and validation rules) accepts them.
func TestImportPrintsProfilesTheAPIServerAccepts(t *testing.T) {
	for _, tc := range []struct {
		file  string
		env   map[string]string
		names []string
		notes []string // parts of stderr
		// warns says warnings are expected: the seed README's examples
		// import without any.
		warns bool
	}{
		{
			file:  "flatcar.yaml",
			names: []string{"Secret/pitstop-notifications", "flatcar"},
			notes: []string{"run pitstop with --smc-compat"},
		},
		{
			file:  "all.yaml",
			env:   map[string]string{"MAX_PARALLEL": "1", "PROMETHEUS_URL": "http://prometheus.monitoring:9090", "SLACK_HOOK": "https://hooks.slack.com/services/T0/B0/x"},
			names: []string{"Secret/pitstop-notifications", "os-patching", "kvm"},
			warns: true,
			notes: []string{"note: trigger instance \"uncordon\": uncordon becomes restore"},
		},
	} {
		t.Run(tc.file, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var stdout, stderr bytes.Buffer
			if code := execute([]string{"import", filepath.Join(importTestdata, tc.file)}, &stdout, &stderr); code != 0 {
				t.Fatalf("exit code %d, stderr:\n%s", code, stderr.String())
			}
			if !tc.warns && strings.Contains(stderr.String(), "warning:") {
				t.Errorf("warnings importing %s:\n%s", tc.file, stderr.String())
			}
			if err := env.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: importer.DefaultSecretNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
			var names []string
			for i, doc := range strings.Split(stdout.String(), "\n---\n") {
				if strings.Contains(doc, "\nkind: Secret\n") {
					sec := &corev1.Secret{}
					if err := yaml.UnmarshalStrict([]byte(doc), sec); err != nil {
						t.Fatalf("document %d does not parse: %v\n%s", i, err, doc)
					}
					if err := env.Client.Create(t.Context(), sec, client.DryRunAll); err != nil {
						t.Errorf("the API server refuses document %d: %v", i, err)
					}
					names = append(names, "Secret/"+sec.Name)
					continue
				}
				p := &pitstopv1alpha1.MaintenanceProfile{}
				if err := yaml.UnmarshalStrict([]byte(doc), p); err != nil {
					t.Fatalf("document %d does not parse: %v\n%s", i, err, doc)
				}
				if err := env.Client.Create(t.Context(), p, client.DryRunAll); err != nil {
					t.Errorf("the API server refuses document %d: %v", i, err)
				}
				names = append(names, p.Name)
			}
			if strings.Join(names, ",") != strings.Join(tc.names, ",") {
				t.Errorf("profiles %v, want %v", names, tc.names)
			}
			for _, note := range tc.notes {
				if !strings.Contains(stderr.String(), note) {
					t.Errorf("stderr does not say %q:\n%s", note, stderr.String())
				}
			}
		})
	}
}

// TestImportRefusesAFileWithOneLine checks that a file pitstop cannot
// import exits 1 with one line naming the file and the line, and prints
// no manifest.
func TestImportRefusesAFileWithOneLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "maintenance.yaml")
	seed := "instances:\n  check:\n  - type: kubernetesCount\n    name: nodes\n    config: {cluster: eu}\n"
	if err := os.WriteFile(path, []byte(seed), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := execute([]string{"import", path}, &stdout, &stderr); code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	want := "pitstop: " + path + `:3: check instance "nodes": unknown plugin type "kubernetesCount"`
	if got := stderr.String(); !strings.HasPrefix(got, want) || strings.Count(got, "\n") != 1 {
		t.Errorf("stderr = %q, want one line starting with %q", got, want)
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout = %q, want nothing", stdout.String())
	}
}

func TestImportCommandLine(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no file", []string{"import"}, 2, "pitstop: import takes one argument, the file to import (- for standard input), got 0"},
		{"two files", []string{"import", "a.yaml", "b.yaml"}, 2, "got 2"},
		{"a file that does not exist", []string{"import", "/nonexistent/maintenance.yaml"}, 1, "pitstop: reading /nonexistent/maintenance.yaml: no such file or directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := execute(tc.args, &stdout, &stderr); code != tc.code {
				t.Errorf("exit code %d, want %d", code, tc.code)
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr = %q, want it to contain %q", stderr.String(), tc.want)
			}
		})
	}
}

func TestImportReadsStandardInput(t *testing.T) {
	seed := "profiles:\n- name: p\n  operational:\n    transitions:\n    - {check: '', next: maintenance-required}\n"
	var stdout, stderr bytes.Buffer
	if err := runImport("-", importer.Options{}, strings.NewReader(seed), &stdout, &stderr); err != nil {
		t.Fatalf("runImport: %v", err)
	}
	p := &pitstopv1alpha1.MaintenanceProfile{}
	if err := yaml.UnmarshalStrict(stdout.Bytes(), p); err != nil || p.Name != "p" {
		t.Errorf("stdout does not hold profile p (%v):\n%s", err, stdout.String())
	}
	err := runImport("-", importer.Options{}, strings.NewReader("profiles: {}\n"), &stdout, &stderr)
	if err == nil || !strings.HasPrefix(err.Error(), "<stdin>:1: ") {
		t.Errorf("runImport of a bad file = %v, want an error at <stdin>:1", err)
	}
}
