package seedconfig

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLoadNamesTheFile: an error names the file and what it is; a missing
// file is empty only where that is allowed.
func TestLoadNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.yaml")
	parse := func(raw []byte) (string, error) {
		if strings.Contains(string(raw), "bad") {
			return "", errors.New("field y: bad")
		}
		return "parsed:" + string(raw), nil
	}
	if _, err := Load(path, "the X configuration", false, parse); err == nil || !strings.HasPrefix(err.Error(), "reading the X configuration: ") {
		t.Errorf("missing file: %v", err)
	}
	if got, err := Load(path, "the X configuration", true, parse); err != nil || got != "parsed:" {
		t.Errorf("missing file where allowed: %q, %v", got, err)
	}
	if err := os.WriteFile(path, []byte("bad"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path, "the X configuration", false, parse); err == nil || err.Error() != "the X configuration "+path+": field y: bad" {
		t.Errorf("bad file: %v", err)
	}
}

// TestReloaderReadsTheFileOnlyWhenItChanged: asked again and again, the
// file is loaded once per change; a change that does not load keeps the
// last good configuration and is reported once.
func TestReloaderReadsTheFileOnlyWhenItChanged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.yaml")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("one")
	loads := 0
	load := func() (string, error) {
		loads++
		raw, err := os.ReadFile(path)
		if err != nil {
			return "", err
		}
		if string(raw) == "broken!" {
			return "", errors.New("broken")
		}
		return string(raw), nil
	}
	r, err := NewReloader(path, load)
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		if got, err := r.Get(); got != "one" || err != nil {
			t.Fatalf("Get = %q, %v", got, err)
		}
	}
	if loads != 1 {
		t.Errorf("loaded %d times for an unchanged file, want once", loads)
	}
	write("twotwo")
	if got, err := r.Get(); got != "twotwo" || err != nil {
		t.Errorf("after a change: %q, %v", got, err)
	}
	write("broken!") // sizes differ: writes this close may share a modification time
	if got, err := r.Get(); got != "twotwo" || err == nil {
		t.Errorf("after a bad change: %q, %v; want the last good one and the error", got, err)
	}
	if got, err := r.Get(); got != "twotwo" || err != nil {
		t.Errorf("asked again: %q, %v; want the last good one, the error told once", got, err)
	}
	if loads != 3 {
		t.Errorf("loaded %d times, want 3 (start and two changes)", loads)
	}
}

// TestAValueThatIsNotADurationIsNamedByItsFieldAndLine: the decoder says
// only the value; Unmarshal adds where it is, in a map and in a list.
func TestAValueThatIsNotADurationIsNamedByItsFieldAndLine(t *testing.T) {
	type cfg struct {
		Intervals struct {
			Check struct {
				Period Duration `json:"period"`
			} `json:"check"`
		} `json:"intervals"`
		Steps []struct {
			Wait Duration `json:"wait"`
		} `json:"steps"`
	}
	for _, tc := range []struct{ raw, want string }{
		{"intervals:\n  check:\n    period: 5 minutes\n", `intervals.check.period (line 3): "5 minutes" is not a duration (like 30s, 5m or 1h)`},
		{"steps:\n- wait: 1m\n- wait: soon\n", `steps[1].wait (line 3): "soon" is not a duration`},
	} {
		var c cfg
		if err := Unmarshal([]byte(tc.raw), &c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error saying %q", tc.raw, err, tc.want)
		}
	}
	var c cfg
	if err := Unmarshal([]byte("intervals:\n  check:\n    period: 2m\n"), &c); err != nil || c.Intervals.Check.Period.Duration != 2*time.Minute {
		t.Errorf("a good file: %+v, %v", c, err)
	}
	if err := Unmarshal([]byte("intervals:\n  chekc: {}\n"), &c); err == nil || !strings.Contains(err.Error(), "chekc") {
		t.Errorf("an unknown field: %v, want it named", err)
	}
}
