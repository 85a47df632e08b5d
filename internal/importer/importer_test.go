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
	{name: "all", env: map[string]string{"MAX_PARALLEL": "1", "PROMETHEUS_URL": "http://prometheus.monitoring:9090"}},
}

func TestImportMatchesGolden(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			data := readFile(t, tc.name+".yaml")
			r, err := Import(data, Options{Env: envOf(tc.env)})
			if err != nil {
				t.Fatalf("Import: %v", err)
			}
			manifests, err := Render(r.Profiles)
			if err != nil {
				t.Fatalf("Render: %v", err)
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
			converted, err := Convert(readFile(t, tc.name+".yaml"), envOf(tc.env))
			if err != nil {
				t.Fatalf("Convert: %v", err)
			}
			docs := strings.Split(string(readFile(t, tc.name+".golden.yaml")), "\n---\n")
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
