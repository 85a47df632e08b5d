package v1alpha1_test

import (
	"encoding/json"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

func TestDurationKeepsWhatDoesNotParse(t *testing.T) {
	for _, tc := range []struct {
		name, json  string
		want        time.Duration
		wantInvalid string
	}{
		{"reads a Go duration", `"1h30m"`, 90 * time.Minute, ""},
		{"keeps words instead of failing", `"1 hour"`, 0, "1 hour"},
		{"keeps a number instead of failing", `90`, 0, "90"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var spec pitstopv1alpha1.DrainSpec
			if err := json.Unmarshal([]byte(`{"timeout":`+tc.json+`}`), &spec); err != nil {
				t.Fatalf("decoding: %v", err)
			}
			if spec.Timeout.Duration != tc.want || spec.Timeout.Invalid != tc.wantInvalid {
				t.Fatalf("got %v / %q, want %v / %q", spec.Timeout.Duration, spec.Timeout.Invalid, tc.want, tc.wantInvalid)
			}
			// Written back, through JSON or the unstructured converter, the
			// value is what was read.
			out, err := json.Marshal(spec.Timeout)
			if err != nil {
				t.Fatal(err)
			}
			u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&spec)
			if err != nil {
				t.Fatal(err)
			}
			wantText := tc.wantInvalid
			if wantText == "" {
				wantText = tc.want.String()
			}
			if string(out) != `"`+wantText+`"` || u["timeout"] != wantText {
				t.Errorf("written back as %s and %v, want %q", out, u["timeout"], wantText)
			}
		})
	}
}
