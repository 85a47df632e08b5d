package logging

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestParseLevel(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    int8
		wantErr bool
	}{
		{"error", 2, false},
		{"info", 0, false},
		{"debug", -1, false},
		{"0", 0, false},
		{"4", -4, false},
		{"10", -10, false},
		{"11", 0, true},
		{"-1", 0, true},
		{"warn", 0, true},
		{"", 0, true},
	} {
		got, err := ParseLevel(tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("ParseLevel(%q) error = %v, want error %v", tc.in, err, tc.wantErr)
			continue
		}
		if err == nil && int8(got) != tc.want {
			t.Errorf("ParseLevel(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// TestLevelsFilterVerbosity checks that --log-level decides which of logr's
// verbosity levels are written, and that lines are JSON with key/values.
func TestLevelsFilterVerbosity(t *testing.T) {
	for _, tc := range []struct {
		level     string
		wantInfo  bool
		wantDebug bool
		wantV2    bool
	}{
		{"error", false, false, false},
		{"info", true, false, false},
		{"debug", true, true, false},
		{"2", true, true, true},
	} {
		var buf bytes.Buffer
		log, err := New(&buf, tc.level, "json")
		if err != nil {
			t.Fatal(err)
		}
		log.Info("info line", "node", "worker-1")
		log.V(1).Info("debug line")
		log.V(2).Info("v2 line")
		log.Error(nil, "error line")
		out := buf.String()
		for msg, want := range map[string]bool{"info line": tc.wantInfo, "debug line": tc.wantDebug, "v2 line": tc.wantV2, "error line": true} {
			if got := strings.Contains(out, msg); got != want {
				t.Errorf("level %s: %q written = %v, want %v", tc.level, msg, got, want)
			}
		}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var entry map[string]any
			if err := json.Unmarshal([]byte(line), &entry); err != nil {
				t.Fatalf("level %s: not JSON: %q", tc.level, line)
			}
			if entry["msg"] == "info line" && entry["node"] != "worker-1" {
				t.Errorf("key/value lost: %s", line)
			}
		}
	}
}

func TestTextFormatIsNotJSON(t *testing.T) {
	var buf bytes.Buffer
	log, err := New(&buf, "info", "text")
	if err != nil {
		t.Fatal(err)
	}
	log.Info("hello", "node", "worker-1")
	if out := buf.String(); strings.HasPrefix(out, "{") || !strings.Contains(out, "hello") {
		t.Errorf("text format wrote %q", out)
	}
}
