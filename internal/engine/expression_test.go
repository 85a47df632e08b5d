package engine

import (
	"slices"
	"strings"
	"testing"
)

func TestCompileExpression(t *testing.T) {
	checks := []string{"window", "budget", "reboot_needed", "healthy"}
	for _, tc := range []struct {
		name    string
		source  string
		results map[string]bool
		want    bool
		wantErr string
	}{
		{"an empty chain passes", "", nil, true, ""},
		{"and of two passing checks", "window && budget", map[string]bool{"window": true, "budget": true}, true, ""},
		{"and with one failing", "window && budget", map[string]bool{"window": true}, false, ""},
		{"or", "window || budget", map[string]bool{"budget": true}, true, ""},
		{"not", "!reboot_needed", map[string]bool{}, true, ""},
		{"parentheses bind as written", "reboot_needed && !(window || budget)", map[string]bool{"reboot_needed": true, "budget": true}, false, ""},
		{"precedence: && before ||", "window || budget && healthy", map[string]bool{"window": true}, true, ""},
		{"an unknown name is refused with its position", "window && windw", nil, false, "1:11: undeclared reference to 'windw'"},
		{"a syntax error is refused with its position", "window && (budget", nil, false, "1:18: Syntax error: missing ')'"},
		{"an error in a source of several lines is one line, without CEL's copy of the source", "window &&\n(budget", nil, false, "2:8: Syntax error: missing ')'"},
		{"a token CEL cannot read that ends in a line break is quoted on one line", "\"\n", nil, false, `1:1: Syntax error: token recognition error at: '"\n'`},
		{"comparison is not part of the chain syntax", "window == budget", nil, false, "only check names joined by &&, || and ! are allowed"},
		{"literals are not check names", "window && true", nil, false, "only check names joined by &&, || and ! are allowed"},
		{"a non-boolean is refused", "1", nil, false, "not a boolean"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := CompileExpression(tc.source, checks)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want an error containing %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("the error is not one line: %q", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := e.Eval(tc.results)
			if err != nil || got != tc.want {
				t.Fatalf("Eval = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestExpressionNames(t *testing.T) {
	e, err := CompileExpression("b && !(a || b)", []string{"a", "b", "c"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(e.Names(), ","); got != "a,b" {
		t.Errorf("Names = %s, want a,b", got)
	}
}

// FuzzCompileExpression compiles a check chain against the check names in
// names (separated by spaces). An expression that compiles uses only
// declared names, all of which Names reports; it evaluates without error
// on every result of its checks, to a value that depends only on them; and
// its negation compiles and evaluates to the opposite. Whether it compiles
// does not depend on checks it does not mention, and an error is one line,
// as it ends up in a field error and a condition message.
func FuzzCompileExpression(f *testing.F) {
	const names = "window budget reboot_needed healthy"
	for _, source := range []string{
		"", "window", "window && budget", "window || budget", "!reboot_needed",
		"reboot_needed && !(window || budget)", "window || budget && healthy", "(((window)))",
		"window && windw", "window && (budget", "window == budget", "window && true", "1",
		"window ? budget : healthy", "size(window)", "[window].all(x, x)", "!!window",
		"window // comment", "window &&\n budget",
	} {
		f.Add(source, names)
	}
	f.Add("a.b", "a.b a")
	f.Add("in", "in")
	f.Fuzz(func(t *testing.T, source, names string) {
		checks := strings.Fields(names)
		e, err := CompileExpression(source, checks)
		if err != nil {
			if e != nil {
				t.Fatalf("CompileExpression(%q) returned an expression and the error %v", source, err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("CompileExpression(%q): the error is not one line: %q", source, err)
			}
			// Declaring checks it does not mention does not break it, when
			// they have names Compile accepts.
			var mentioned []string
			for _, c := range checks {
				if strings.Contains(source, c) {
					mentioned = append(mentioned, c)
				} else if !isCheckName(c) {
					return
				}
			}
			if len(mentioned) < len(checks) {
				if _, err2 := CompileExpression(source, mentioned); err2 == nil {
					t.Errorf("%q compiles with the checks %q, not with %q, which it does not use: %v", source, mentioned, checks, err)
				}
			}
			return
		}
		if e == nil {
			t.Fatalf("CompileExpression(%q) returned neither an expression nor an error", source)
		}
		if e.String() != source {
			t.Errorf("String() = %q, want the source %q", e.String(), source)
		}
		used := e.Names()
		if !slices.IsSorted(used) || len(slices.Compact(slices.Clone(used))) != len(used) {
			t.Errorf("Names() = %q, not sorted and unique", used)
		}
		for _, n := range used {
			if !slices.Contains(checks, n) {
				t.Errorf("Names() = %q: %q is not a declared check", used, n)
			}
		}
		// Declared with only the names it reports, it still compiles.
		if _, err := CompileExpression(source, used); err != nil {
			t.Errorf("%q does not compile with only the names it uses, %q: %v", source, used, err)
		}
		if strings.TrimSpace(source) == "" {
			return
		}
		not, err := CompileExpression("!(\n"+source+"\n)", checks)
		if err != nil {
			t.Fatalf("%q compiles, its negation does not: %v", source, err)
		}
		// Every combination of the results of up to 8 checks, with the
		// other declared checks all passing and all failing.
		for i := range 1 << min(len(used), 8) {
			var got [2]bool
			for k, others := range []bool{true, false} {
				results := map[string]bool{}
				for _, c := range checks {
					results[c] = others
				}
				for j, n := range used {
					results[n] = j < 8 && i&(1<<j) != 0
				}
				var err error
				if got[k], err = e.Eval(results); err != nil {
					t.Fatalf("%q on %v: %v", source, results, err)
				}
				if neg, err := not.Eval(results); err != nil || neg == got[k] {
					t.Fatalf("%q on %v is %v, its negation %v (%v)", source, results, got[k], neg, err)
				}
			}
			if got[0] != got[1] {
				t.Fatalf("%q depends on checks it does not use: %v when they pass, %v when they fail", source, got[0], got[1])
			}
		}
	})
}
