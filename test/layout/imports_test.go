// Package layout holds the rules of pitstop's package layout
// (docs/development.md, "Rooms and what they must not import"), checked
// against the import graph `go list` reads, so that they stay true.
package layout

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/pitstop-dev/pitstop/"

// pkg is what `go list -json` says of a package that matters here.
type pkg struct {
	ImportPath string
	Imports    []string
}

// packages lists the module's packages with their non-test imports,
// relative to the module.
func packages(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", "-tags", "e2e,fault", "../../...").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	graph := map[string][]string{}
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		var own []string
		for _, imp := range p.Imports {
			if rel, ok := strings.CutPrefix(imp, module); ok {
				own = append(own, rel)
			}
		}
		graph[strings.TrimPrefix(p.ImportPath, module)] = own
	}
	if len(graph) < 40 {
		t.Fatalf("go list found %d packages; the module has more", len(graph))
	}
	return graph
}

// under says whether p is dir or below it.
func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// controllerOf is the controller p belongs to ("" when none): each
// directory under internal/controller, and each reconciler of the Machine
// API.
func controllerOf(p string) string {
	if rest, ok := strings.CutPrefix(p, "internal/controller/"); ok {
		return "internal/controller/" + strings.SplitN(rest, "/", 2)[0]
	}
	for _, c := range []string{"internal/machineapi/machine", "internal/machineapi/machineset", "internal/machineapi/healthcheck", "internal/machineapi/nodelink"} {
		if under(p, c) {
			return c
		}
	}
	return ""
}

// cloudOf is the cloud whose client p is ("" when none).
func cloudOf(p string) string {
	rest, ok := strings.CutPrefix(p, "internal/cloud/")
	if !ok {
		return ""
	}
	return strings.SplitN(rest, "/", 2)[0]
}

// wiring may import every controller: it starts them.
var wiring = []string{"cmd/pitstop", "internal/manager", "internal/testutil/clustertest"}

func TestLayout(t *testing.T) {
	graph := packages(t)
	var broken []string
	for p, imports := range graph {
		if strings.HasPrefix(p, "test/") {
			continue
		}
		for _, imp := range imports {
			switch {
			// A controller is imported only by what wires it up: no
			// controller reaches into another for a rule, a name or a key.
			case controllerOf(imp) != "" && controllerOf(imp) != controllerOf(p) && !slices.Contains(wiring, p):
				broken = append(broken, p+" imports the controller "+imp+": move what it needs to a shared package (internal/maintenance, internal/cloud, api/v1alpha1)")
			// The simulators ship only for `pitstop dev` and its demo.
			case under(imp, "internal/sim") && p != "cmd/pitstop" && p != "internal/demo" && !under(p, "internal/sim"):
				broken = append(broken, p+" imports the simulator "+imp+": only tests, `pitstop dev` and internal/demo may")
			// The clouds' clients and the shared rules are below every
			// controller: they import none, nor the manager.
			case (under(p, "internal/cloud") || under(p, "internal/maintenance") || under(p, "internal/fleet") || under(p, "internal/engine") || under(p, "internal/dashboard") || under(p, "internal/explain")) &&
				(controllerOf(imp) != "" || under(imp, "internal/manager")):
				broken = append(broken, p+" imports "+imp+", which is above it")
			// A cloud's client is one package: no cloud client imports
			// another's.
			case cloudOf(p) != "" && cloudOf(imp) != "" && cloudOf(p) != cloudOf(imp):
				broken = append(broken, p+" imports another cloud's client "+imp)
			}
		}
	}
	slices.Sort(broken)
	for _, b := range broken {
		t.Error(b)
	}
}

// TestLayoutRulesCatchABreak: the rules above find what they are for, on
// a graph made to break each.
func TestLayoutRulesCatchABreak(t *testing.T) {
	for _, tc := range []struct{ from, to string }{
		{"internal/controller/medik8s", "internal/controller/nodemaintenance"},
		{"internal/dashboard", "internal/controller/capi"},
		{"internal/demo", "internal/controller/machinemaintenance"},
		{"internal/controller/esx", "internal/machineapi/machine"},
	} {
		if controllerOf(tc.to) == "" || controllerOf(tc.to) == controllerOf(tc.from) || slices.Contains(wiring, tc.from) {
			t.Errorf("%s → %s is not caught", tc.from, tc.to)
		}
	}
	if controllerOf("internal/controller/capi") != controllerOf("internal/controller/capi/sub") {
		t.Error("a controller's own subpackage counts as another controller")
	}
	if cloudOf("internal/cloud/aws") == cloudOf("internal/cloud/openstack") || cloudOf("internal/cloud") != "" || cloudOf("internal/cloud/aws/x") != "aws" {
		t.Error("the clouds' clients are not told apart")
	}
}
