package profile

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/yaml"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/config"
	"github.com/pitstop-dev/pitstop/internal/engine"
	"github.com/pitstop-dev/pitstop/internal/fleet"
	"github.com/pitstop-dev/pitstop/internal/plugin/check"
)

// FuzzCompile reads a MaintenanceProfile from YAML (or JSON) and compiles
// it as the controller does, and validates it as the webhook does. compile
// returns a profile or an error, never both; it leaves its input as it
// was; the webhook refuses exactly what does not compile, as a bad
// request (and what is past the CRD's limits, as invalid). A profile that
// compiles has no duration that did not parse, and every check, trigger
// and notification its transitions and states name is built, so the
// reconciler finds each one it looks up.
func FuzzCompile(f *testing.F) {
	for _, seed := range profileSeeds(f) {
		f.Add(seed)
	}
	v := &validator{deps: check.Deps{Prometheus: check.NewPrometheusClient()}}
	f.Fuzz(func(t *testing.T, data []byte) {
		var p pitstopv1alpha1.MaintenanceProfile
		if err := yaml.Unmarshal(data, &p); err != nil {
			return
		}
		before := p.DeepCopy()
		c, err := fleet.Compile(&p, v.deps)
		if (c == nil) == (err == nil) {
			t.Fatalf("compile returned %v and %v: want a profile or an error", c, err)
		}
		if !apiequality.Semantic.DeepEqual(before, &p) {
			t.Fatalf("compile changed the profile it compiled")
		}
		_, createErr := v.ValidateCreate(t.Context(), &p)
		_, updateErr := v.ValidateUpdate(t.Context(), before, &p)
		if len(boundsErrors(&p)) > 0 {
			// Past the CRD's limits: the API server refuses it before the
			// webhook, which refuses it too, without compiling it.
			for _, werr := range []error{createErr, updateErr} {
				if !apierrors.IsInvalid(werr) {
					t.Fatalf("a profile past the CRD's limits: the webhook answered %v, want it refused as invalid", werr)
				}
			}
			return
		}
		for _, werr := range []error{createErr, updateErr} {
			if (werr == nil) != (err == nil) || werr != nil && !apierrors.IsBadRequest(werr) {
				t.Fatalf("compile: %v; the webhook: %v, want the same verdict as a bad request", err, werr)
			}
		}
		if err != nil {
			if !strings.HasPrefix(err.Error(), "MaintenanceProfile "+p.Name+": ") {
				t.Errorf("the error does not name the profile: %v", err)
			}
			return
		}

		if errs := p.Spec.DurationErrors(); len(errs) > 0 {
			t.Errorf("compiled with durations that did not parse: %v", errs)
		}
		if _, err := engine.Compile(&p); err != nil {
			t.Errorf("compiled, but engine.Compile refuses it: %v", err)
		}
		if !apiequality.Semantic.DeepEqual(c.Spec, &p) || c.Spec == &p {
			t.Errorf("the compiled profile does not keep its own copy of the spec")
		}
		for _, inst := range p.Spec.Checks {
			if c.Checks[inst.Name] == nil || c.Plugins[inst.Name] == "" {
				t.Errorf("check %q is not built", inst.Name)
			}
		}
		for _, inst := range p.Spec.Triggers {
			if c.Triggers[inst.Name] == nil {
				t.Errorf("trigger %q is not built", inst.Name)
			}
		}
		for state, transitions := range c.Engine.Transitions {
			for i, tr := range transitions {
				for _, name := range tr.Expression.Names() {
					if c.Checks[name] == nil {
						t.Errorf("%s transition %d uses check %q, which is not built", state, i, name)
					}
				}
				for _, name := range tr.Triggers {
					if c.Triggers[name] == nil {
						t.Errorf("%s transition %d runs trigger %q, which is not built", state, i, name)
					}
				}
			}
		}
		for _, st := range engine.States {
			if want := len(st.Spec(&p.Spec.States).Notify); len(c.Notify[st.State]) != want {
				t.Errorf("%s: %d notifications built, %d listed", st.State, len(c.Notify[st.State]), want)
			}
		}
	})
}

// profileSeeds are the profiles of the documentation, the samples and the
// importer's golden files, and one with the plugins those leave out.
func profileSeeds(f *testing.F) [][]byte {
	seeds := [][]byte{[]byte(`apiVersion: pitstop.dev/v1alpha1
kind: MaintenanceProfile
metadata: {name: freeze}
spec:
  checks:
  - name: frozen
    freeze: {periods: [{start: "2026-12-20T00:00:00Z", end: "2027-01-05T00:00:00Z", reason: holidays}]}
  - name: soon
    waitExclude: {duration: 1h, exclude: [Sat, Sun], timeZone: Europe/Berlin}
  triggers:
  - name: drain
    drain: {drain: {timeout: 30m, podEvictionRetryInterval: 5s, onTimeout: ForceDelete}}
  states:
    maintenanceRequired:
      transitions:
      - {check: "!frozen && soon", triggers: [drain], next: in-maintenance}
`)}
	sample, err := config.Sample("maintenanceprofile.yaml")
	if err != nil {
		f.Fatal(err)
	}
	seeds = append(seeds, sample)
	docs := readSeedFile(f, "../../../docs/profiles.md")
	for _, block := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllSubmatch(docs, -1) {
		seeds = append(seeds, block[1])
	}
	golden, err := filepath.Glob("../../importer/testdata/*.golden.yaml")
	if err != nil || len(golden) == 0 {
		f.Fatalf("the importer's golden files: %v", err)
	}
	for _, path := range golden {
		seeds = append(seeds, bytes.Split(readSeedFile(f, path), []byte("\n---\n"))...)
	}
	return seeds
}

func readSeedFile(f *testing.F, path string) []byte {
	data, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	return data
}
