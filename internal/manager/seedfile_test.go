package manager

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestASeedConfigFileMustImportAtStart: pitstop does not start on a
// --seed-config-file it would refuse, and says which line is wrong.
func TestASeedConfigFileMustImportAtStart(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := write("good.yaml", `instances:
  check:
  - type: hasAnnotation
    name: reboot_needed
    config:
      key: reboot-needed
profiles:
- name: nodes
  operational:
    transitions:
    - check: reboot_needed
      next: in-maintenance
  in-maintenance:
    transitions:
    - check: "!reboot_needed"
      next: operational
`)
	bad := write("bad.yaml", `instances:
  check:
  - type: noSuchCheck
    name: reboot_needed
`)
	for _, tc := range []struct {
		name, path, says string // says: empty when valid
	}{
		{"a file that imports", good, ""},
		{"a file with an unknown check", bad, bad + `:3: check instance "reboot_needed": unknown plugin type "noSuchCheck"`},
		{"a missing file", filepath.Join(dir, "missing.yaml"), "no such file or directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			o.SeedConfigFile = tc.path
			err := o.Validate()
			var fe *FlagError
			switch {
			case tc.says == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.says != "" && (!errors.As(err, &fe) || fe.Flag != "seed-config-file" || fe.Value != tc.path || !strings.Contains(fe.Reason, tc.says)):
				t.Errorf("got %v, want an error naming --seed-config-file and saying %q", err, tc.says)
			}
		})
	}
}
