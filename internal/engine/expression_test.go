package engine

import (
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
		{"an unknown name is refused with its position", "window && windw", nil, false, "1:11"},
		{"a syntax error is refused with its position", "window && (budget", nil, false, "1:"},
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
