package notify

import (
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// stopWithin bounds how long a template that goes past a limit may run
// before it is stopped. Unbounded, these templates run for minutes or
// hours; bounded, for milliseconds, or up to the second of the render
// timeout, and the rest is room for the race detector on a machine whose
// two cores other test runs share.
const stopWithin = 10 * time.Second

// heapLimit is more than any of these tests holds; a template that
// allocates without bound passes it within milliseconds.
const heapLimit = 512 << 20

// maxAllocated bounds what compiling and rendering one of these templates
// may allocate in all, garbage included: a few times the bounds on what
// functions build and what a text may be, and text/template's own garbage
// (about 350 bytes an action: 100,000 actions make 35 MiB).
const maxAllocated = 64 << 20

// webhookInstance is a webhook notification with the message text.
func webhookInstance(text string) pitstopv1alpha1.NotificationInstance {
	return pitstopv1alpha1.NotificationInstance{Name: "hook", Schedule: pitstopv1alpha1.NotificationSchedule{Oneshot: &pitstopv1alpha1.OneshotSchedule{}},
		Webhook: &pitstopv1alpha1.WebhookNotification{URL: pitstopv1alpha1.SecretKeyRef{Name: "s", Key: "k"}, Message: text}}
}

// compileAndRender compiles a webhook notification with the message text
// and renders it for the sample node in state, failing the test if either
// is still running after stopWithin. It returns the compile error, or the
// render's text and error.
func compileAndRender(t *testing.T, text, state string) (compileErr error, rendered string, renderErr error) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		var n *Notification
		if n, compileErr = Compile(webhookInstance(text), nil); compileErr != nil {
			return
		}
		d := sample
		d.State = state
		var m Message
		m, renderErr = n.Render("profile", d)
		rendered = m.Texts["message"]
	}()
	select {
	case <-done:
	case <-time.After(stopWithin):
		t.Fatalf("the template %q still runs after %s", text, stopWithin)
	}
	return compileErr, rendered, renderErr
}

// TestTemplatesRunWithinBounds: a template that would loop, recurse or
// allocate without end is refused when the profile compiles when the
// sample data shows it, and is otherwise stopped when it renders, each
// time within a fraction of a second and without holding more memory than
// a message.
func TestTemplatesRunWithinBounds(t *testing.T) {
	testutil.BoundHeap(t, heapLimit)
	// Each case is meant to meet the bound it names, not the clock: on a
	// busy machine with the race detector, 10,000 iterations can take a
	// second. The test still wants each stopped within stopWithin.
	defer func(d time.Duration) { renderTimeout = d }(renderTimeout)
	renderTimeout = time.Hour
	// The branches guarded by .State run only when a node is in
	// maintenance: the sample data the profile compiles with is in
	// maintenance-required.
	const inMaintenance = string(pitstopv1alpha1.StateInMaintenance)
	for _, tc := range []struct {
		name        string
		text        string
		compileWant string // part of the compile error; empty: it compiles
		renderWant  string // part of the render error (in maintenance)
	}{
		{name: "the 45-byte template is refused when compiled, before it runs",
			text:        `{{range 100000000}}{{printf "%01000000d" 0}}{{end}}`,
			compileWant: "range over 100000000: more than the 10000 iterations a template may run"},
		{name: "a loop over a number from the data that writes nothing stops after 10000 iterations",
			text:       `{{if eq .State "in-maintenance"}}{{range .Since.Unix}}{{end}}{{end}}`,
			renderWant: "more than 10000 range iterations"},
		{name: "the same loop on the sample data is refused when compiled",
			text:        `{{range .Since.Unix}}{{end}}`,
			compileWant: "more than 10000 range iterations"},
		{name: "nested loops count together",
			text:       `{{if eq .State "in-maintenance"}}{{range 5000}}{{range 5000}}{{end}}{{end}}{{end}}`,
			renderWant: "more than 10000 range iterations"},
		{name: "a loop whose body runs many actions stops after 100000 actions",
			text:       `{{if eq .State "in-maintenance"}}{{range 10000}}` + strings.Repeat(`{{$x := $.Node.Name}}`, 20) + `{{end}}{{end}}`,
			renderWant: "more than 100000 actions"},
		{name: "padding of a million bytes is refused before it is built",
			text:       `{{if eq .State "in-maintenance"}}{{range .Since.Unix}}{{$x := printf "%01000000d" 0}}{{end}}{{end}}`,
			renderWant: "a width or precision of 1000000"},
		{name: "a text longer than 64 KiB is stopped",
			text:       `{{if eq .State "in-maintenance"}}{{range 100}}{{printf "%01000d" 0}}{{end}}{{end}}`,
			renderWant: "the text is longer than 65536 bytes"},
		{name: "a string doubled in a loop that writes nothing is stopped at 512 KiB built",
			text:       `{{if eq .State "in-maintenance"}}{{$x := "0123456789abcdef"}}{{range 40}}{{$x = printf "%s%s" $x $x}}{{end}}{{len $x}}{{end}}`,
			renderWant: "its functions built more than 524288 bytes"},
		{name: "escaping counts as building",
			text:       `{{if eq .State "in-maintenance"}}{{$x := "\\"}}{{range 24}}{{$x = js $x}}{{end}}{{len $x}}{{end}}`,
			renderWant: "its functions built more than 524288 bytes"},
		{name: "a recursion that branches stops after 1000 template calls",
			text:       `{{define "r"}}{{if .}}{{template "r" (slice . 1)}}{{template "r" (slice . 1)}}{{end}}{{end}}{{if eq .State "in-maintenance"}}{{template "r" "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}}{{end}}`,
			renderWant: "more than 1000 template calls"},
		{name: "an endless recursion stops after 1000 template calls",
			text:        `{{define "r"}}{{template "r" .}}{{end}}{{template "r" .}}`,
			compileWant: "more than 1000 template calls"},
		{name: "a template over 8 KiB is refused",
			text:        strings.Repeat("x", 8193),
			compileWant: "8193 bytes, more than the 8192 a template may have"},
		{name: "the counters a template pays through cannot be called by it",
			text:        `{{pitstopActions -100000}}`,
			compileWant: `function "pitstopActions" not defined`},
		{name: "a width taken from an argument is refused, since it could not be bounded",
			text:        `{{printf "%*d" 1000000 0}}`,
			compileWant: "printf: a width or precision from an argument (*) is not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			compileErr, rendered, renderErr := compileAndRender(t, tc.text, inMaintenance)
			elapsed := time.Since(start)
			runtime.ReadMemStats(&after)
			if allocated := after.TotalAlloc - before.TotalAlloc; allocated > maxAllocated {
				t.Errorf("compiling and rendering allocated %d MiB, more than %d MiB", allocated>>20, maxAllocated>>20)
			}
			switch {
			case tc.compileWant != "":
				if compileErr == nil || !strings.Contains(compileErr.Error(), tc.compileWant) {
					t.Fatalf("compiling: got %v, want an error containing %q", compileErr, tc.compileWant)
				}
			case compileErr != nil:
				t.Fatalf("compiling: %v", compileErr)
			case renderErr == nil || !strings.Contains(renderErr.Error(), tc.renderWant):
				t.Fatalf("rendering: got %v (%d bytes), want an error containing %q", renderErr, len(rendered), tc.renderWant)
			case !errors.Is(renderErr, ErrTemplateLimit):
				t.Errorf("rendering: %v does not wrap ErrTemplateLimit", renderErr)
			}
			t.Logf("stopped after %s", elapsed)
		})
	}
}

// TestTheBoundedFunctionsPrintAsTheBuiltins: printf, print, println, html,
// js and urlquery, which pitstop replaces to bound them, give the builtins'
// results.
func TestTheBoundedFunctionsPrintAsTheBuiltins(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{`{{printf "%-6s|%3d|%q|%v|%x" "ab" 7 "x" .Checks 255}}`, `ab    |  7|"x"|map[window:false]|ff`},
		{`{{printf "%[2]s %[1]s %%" "a" "b"}}`, `b a %`},
		{`{{printf "%d"}}`, `%!d(MISSING)`},
		{`{{print "a" "b" 1 2 true}}`, `ab1 2 true`},
		{`{{println "a" 1}}`, "a 1\n"},
		{`{{html "<b>" 1}}|{{js "it's"}}|{{urlquery "a b&c"}}`, `&lt;b&gt;1|it\'s|a+b%26c`},
		{`{{range $i, $l := .Blocking}}{{$i}}={{$l}}{{end}}{{range 3}}{{.}}{{end}}`, `0=window: closed012`},
		{`{{define "n"}}[{{.}}]{{end}}{{template "n" .Node.Name}}{{block "b" .State}}<{{.}}>{{end}}`, `[node-1]<maintenance-required>`},
	} {
		compileErr, got, err := compileAndRender(t, tc.text, sample.State)
		if compileErr != nil || err != nil {
			t.Errorf("%s: %v %v", tc.text, compileErr, err)
			continue
		}
		if got != tc.want {
			t.Errorf("%s rendered %q, want %q", tc.text, got, tc.want)
		}
	}
}

// FuzzNotificationTemplate compiles any template text and renders it on
// the sample node in each state: nothing panics, every step returns within
// the bounds, and no text is longer than MaxRenderedSize.
func FuzzNotificationTemplate(f *testing.F) {
	for _, seed := range []string{
		`{{ .Node.Name }} is {{ .State }} since {{ .Since.Format "15:04" }}: {{ range .Blocking }}{{ . }}; {{ end }}`,
		`{{range 100000000}}{{printf "%01000000d" 0}}{{end}}`,
		`{{if eq .State "in-maintenance"}}{{range .Since.UnixNano}}{{.Node.String}}{{end}}{{end}}`,
		`{{$x := "ab"}}{{range 64}}{{$x = printf "%s%s%s" $x $x $x}}{{end}}{{$x}}`,
		`{{define "r"}}{{template "r" .}}{{template "r" .}}{{end}}{{template "r" .}}`,
		`{{range $k, $v := .Node.Labels}}{{printf "%-1000000v" $v}}{{end}}`,
		`{{with .Node}}{{range .Status.Conditions}}{{.Type}}{{else}}none{{end}}{{end}}`,
	} {
		f.Add(seed)
	}
	states := []string{string(pitstopv1alpha1.StateOperational), string(pitstopv1alpha1.StateMaintenanceRequired), string(pitstopv1alpha1.StateInMaintenance)}
	f.Fuzz(func(t *testing.T, text string) {
		start := time.Now()
		tmpl, err := parseTemplate(text)
		if elapsed := time.Since(start); elapsed > stopWithin {
			t.Fatalf("compiling took %s", elapsed)
		}
		if err != nil {
			return
		}
		for _, state := range states {
			d := sample
			d.State = state
			start := time.Now()
			out, err := execute(tmpl, d)
			if elapsed := time.Since(start); elapsed > stopWithin {
				t.Fatalf("rendering in %s took %s", state, elapsed)
			}
			if err == nil && len(out) > MaxRenderedSize {
				t.Fatalf("rendering in %s gave %d bytes", state, len(out))
			}
		}
	})
}

// TestOneNotificationRendersForManyNodesAtOnce: the profile controller
// renders a compiled notification from several workers; each render has
// its own budget, so one node's render neither spends nor sees another's.
func TestOneNotificationRendersForManyNodesAtOnce(t *testing.T) {
	defer func(d time.Duration) { renderTimeout = d }(renderTimeout)
	renderTimeout = time.Hour // the counts are under test, not a busy machine's clock
	n, err := Compile(webhookInstance(`{{range 6000}}{{end}}{{ .Node.Name }}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			m, err := n.Render("profile", sample)
			if err == nil && m.Texts["message"] != "node-1" {
				err = errors.New("rendered " + m.Texts["message"])
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// TestATemplateStopsAfterItsTime: a template within every count, whose
// actions are slow on the node it renders for (a method formatting a node
// with a megabyte of annotations, in a loop: seconds of work), is stopped
// once it has run for renderTimeout.
func TestATemplateStopsAfterItsTime(t *testing.T) {
	defer func(d time.Duration) { renderTimeout = d }(renderTimeout)
	renderTimeout = time.Hour // compiling on the small sample node takes what a busy machine gives it
	n, err := Compile(webhookInstance(`{{range 1000}}`+strings.Repeat(`{{$x := $.Node.String}}`, 10)+`{{end}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	renderTimeout = 100 * time.Millisecond
	d := sample
	d.Node = sample.Node.DeepCopy()
	d.Node.Annotations = map[string]string{"big": strings.Repeat("x", 1<<20)}
	start := time.Now()
	_, err = n.Render("profile", d)
	elapsed := time.Since(start)
	if !errors.Is(err, ErrTemplateLimit) || !strings.Contains(err.Error(), "ran longer than 100ms") {
		t.Fatalf("got %v, want the render stopped after 100ms", err)
	}
	if elapsed > stopWithin {
		t.Errorf("stopped after %s", elapsed)
	}
	t.Logf("stopped after %s", elapsed)
}
