package importer

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/engine"
	"github.com/pitstop-dev/pitstop/internal/plugin/check"
	"github.com/pitstop-dev/pitstop/internal/plugin/trigger"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// envOf is an environment lookup over a map.
func envOf(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

// goldenCases are seed files in testdata whose import is kept in
// NAME.golden.yaml (the manifests) and NAME.notes.golden (the notes).
var goldenCases = []struct {
	name string
	env  map[string]string
}{
	// The seed README's "Example configuration for flatcar update agents",
	// verbatim.
	{name: "flatcar"},
	// Every plugin the import supports, enter chains on two states, and
	// environment variables.
	{name: "all", env: map[string]string{"MAX_PARALLEL": "1", "PROMETHEUS_URL": "http://prometheus.monitoring:9090", "SLACK_HOOK": "https://hooks.slack.com/services/T0/B0/secret"}},
}

func TestImportMatchesGolden(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			data := readFile(t, tc.name+".yaml")
			r, err := Import(data, Options{Env: envOf(tc.env)})
			if err != nil {
				t.Fatalf("Import: %v", err)
			}
			manifests, err := RenderResult(r)
			if err != nil {
				t.Fatalf("RenderResult: %v", err)
			}
			var notes bytes.Buffer
			for _, n := range r.Notes {
				notes.WriteString(n.String() + "\n")
			}
			compareGolden(t, tc.name+".golden.yaml", manifests)
			compareGolden(t, tc.name+".notes.golden", notes.Bytes())
		})
	}
}

// TestGoldenRoundTrips reads each golden file back as MaintenanceProfiles
// and builds them as the controller does: what the import prints is what
// it converted, and pitstop accepts it.
func TestGoldenRoundTrips(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Import(readFile(t, tc.name+".yaml"), Options{Env: envOf(tc.env)})
			if err != nil {
				t.Fatalf("Import: %v", err)
			}
			converted := r.Profiles
			docs := strings.Split(string(readFile(t, tc.name+".golden.yaml")), "\n---\n")
			if r.Secret != nil {
				var sec corev1.Secret
				if err := yaml.UnmarshalStrict([]byte(docs[0]), &sec); err != nil || !reflect.DeepEqual(&sec, r.Secret) {
					t.Fatalf("the golden file's first document is not the import's Secret (%v):\n%s", err, docs[0])
				}
				docs = docs[1:]
			}
			if len(docs) != len(converted) {
				t.Fatalf("the golden file has %d documents, the import %d profiles", len(docs), len(converted))
			}
			for i, doc := range docs {
				var p pitstopv1alpha1.MaintenanceProfile
				if err := yaml.UnmarshalStrict([]byte(doc), &p); err != nil {
					t.Fatalf("document %d: %v", i, err)
				}
				if !reflect.DeepEqual(p, converted[i]) {
					t.Errorf("document %d reads back as\n%+v\nwant\n%+v", i, p, converted[i])
				}
				build(t, &p)
			}
		})
	}
}

// build compiles a profile and constructs its plugins, as the profile
// controller does before it runs a profile.
func build(t *testing.T, p *pitstopv1alpha1.MaintenanceProfile) {
	t.Helper()
	if _, err := engine.Compile(p); err != nil {
		t.Errorf("engine.Compile: %v", err)
	}
	for _, c := range p.Spec.Checks {
		if _, err := check.New(c, check.Deps{Prometheus: unqueried{}}); err != nil {
			t.Errorf("check %s: %v", c.Name, err)
		}
	}
	for _, tr := range p.Spec.Triggers {
		if _, err := trigger.New(tr); err != nil {
			t.Errorf("trigger %s: %v", tr.Name, err)
		}
	}
}

// TestReadmeExampleNamesUndefinedInstances imports the seed README's
// generic example, verbatim. It uses instances it never defines (a, b,
// g, h, t, u) and its last transition has no next, so the seed refuses it
// and so does the import, naming each of them at its line.
func TestReadmeExampleNamesUndefinedInstances(t *testing.T) {
	_, err := Convert(readFile(t, "readme.yaml"), nil)
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("Convert: got %v, want an ErrorList", err)
	}
	want := []string{
		`maintenance.yaml:59: profile "someprofile": in-maintenance: notify "g && h": undefined notification instances g, h`,
		`maintenance.yaml:62: profile "someprofile": in-maintenance: transitions[0]: next is missing`,
		`maintenance.yaml:62: profile "someprofile": in-maintenance: transitions[0]: check "transition && !(a || b)": undefined check instances a, b`,
		`maintenance.yaml:64: profile "someprofile": in-maintenance: transitions[0]: trigger "t && u": undefined trigger instances t, u`,
	}
	var got []string
	for _, e := range list {
		got = append(got, e.Error())
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("the error is not one line: %q", err)
	}
}

func TestImportNamesTheFile(t *testing.T) {
	_, err := Import([]byte("profiles: 3\n"), Options{File: "config/maintenance.yaml"})
	if err == nil || !strings.HasPrefix(err.Error(), "config/maintenance.yaml:1: profiles: want a list") {
		t.Errorf("Import: got %v, want an error at config/maintenance.yaml:1", err)
	}
}

// FuzzImport imports a maintenance-controller configuration. The import
// never panics; it returns profiles or an ErrorList, never both; the
// ErrorList is one line, its problems in line order; and every profile it
// returns builds as the profile controller builds it, has no duration
// that did not parse, and is written as manifests that read back as it.
func FuzzImport(f *testing.F) {
	for _, name := range []string{"flatcar.yaml", "all.yaml", "readme.yaml"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add(oneCheck("maxMaintenance", "max: ${MAX_PARALLEL}", "profile: p"))
	f.Add(oneCheck("prometheusInstant", "url: ${PROMETHEUS_URL}", "query: up", "expr: value < 1"))
	f.Add(oneCheck("timeWindow", `start: "22:00"`, `end: "4:00"`, "weekdays: [monday]", `exclude: ["Dec 24"]`))
	f.Add(oneCheck("kubernikusCount", "cluster: k8s-eu"))
	f.Add(oneTrigger("alterLabel", "key: k", "value: v", "remove: false"))
	f.Add(oneTrigger("eviction", "action: drain", "deletionTimeout: 10m", "evictionTimeout: 5m"))
	f.Add([]byte("profiles: 3\n"))
	env := envOf(map[string]string{"MAX_PARALLEL": "1", "PROMETHEUS_URL": "http://prometheus.monitoring:9090"})
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Import(data, Options{Env: env})
		if (r == nil) == (err == nil) {
			t.Fatalf("Import returned %v and %v: want profiles or an error", r, err)
		}
		if err != nil {
			var list ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("Import: %v is not a list of problems", err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("the error is not one line: %q", err)
			}
			for i, e := range list {
				if e.File != DefaultFile || i > 0 && e.Line < list[i-1].Line {
					t.Errorf("problem %d, %q, is not at a line of %s in line order", i, e, DefaultFile)
				}
			}
			return
		}
		for i, n := range r.Notes {
			if n.File != DefaultFile || i > 0 && n.Line < r.Notes[i-1].Line {
				t.Errorf("note %d, %q, is not at a line of %s in line order", i, n, DefaultFile)
			}
		}
		manifests, err := Render(r.Profiles)
		if err != nil {
			t.Fatalf("Render: %v", err)
		}
		var docs []string
		if len(r.Profiles) > 0 {
			docs = strings.Split(string(manifests), "\n---\n")
		}
		if len(docs) != len(r.Profiles) {
			t.Fatalf("%d profiles rendered as %d documents", len(r.Profiles), len(docs))
		}
		for i := range r.Profiles {
			p := &r.Profiles[i]
			build(t, p)
			if errs := p.Spec.DurationErrors(); len(errs) > 0 {
				t.Errorf("profile %s: durations that did not parse: %v", p.Name, errs)
			}
			var read pitstopv1alpha1.MaintenanceProfile
			if err := yaml.UnmarshalStrict([]byte(docs[i]), &read); err != nil {
				t.Fatalf("document %d: %v", i, err)
			}
			if !reflect.DeepEqual(&read, p) {
				t.Errorf("document %d reads back as\n%+v\nwant\n%+v", i, read, *p)
			}
		}
	})
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func compareGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (run go test -update to rewrite it):\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}
