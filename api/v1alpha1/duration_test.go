package v1alpha1_test

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

func TestDurationKeepsWhatDoesNotParse(t *testing.T) {
	for _, tc := range []struct {
		name, json  string
		want        time.Duration
		wantInvalid *string
	}{
		{"reads a Go duration", `"1h30m"`, 90 * time.Minute, nil},
		{"keeps words instead of failing", `"1 hour"`, 0, ptr.To("1 hour")},
		{"keeps a number instead of failing", `90`, 0, ptr.To("90")},
		// Read as 0, a drain timeout would give up at once.
		{"keeps an empty string, which does not parse either", `""`, 0, ptr.To("")},
		{"reads the number 0 as the text 0, which parses", `0`, 0, nil},
		{"reads the number 0 with spaces around it as 0", `0 `, 0, nil},
		{"keeps an object as its text, made valid UTF-8 as a string's", "{\"\xae\":0}", 0, ptr.To("{\"\uFFFD\":0}")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var spec pitstopv1alpha1.DrainSpec
			if err := json.Unmarshal([]byte(`{"timeout":`+tc.json+`}`), &spec); err != nil {
				t.Fatalf("decoding: %v", err)
			}
			if spec.Timeout.Duration != tc.want || !reflect.DeepEqual(spec.Timeout.Invalid, tc.wantInvalid) {
				t.Fatalf("got %s, want %v / Invalid %s", show(*spec.Timeout), tc.want, showText(tc.wantInvalid))
			}
			errs := spec.DurationErrors(field.NewPath("spec", "drain"))
			if wantErrs := tc.wantInvalid != nil; (len(errs) > 0) != wantErrs {
				t.Errorf("DurationErrors = %v, want errors: %v", errs, wantErrs)
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
			wantText := tc.want.String()
			if tc.wantInvalid != nil {
				wantText = *tc.wantInvalid
			}
			if string(out) != string(mustMarshal(t, wantText)) || u["timeout"] != wantText {
				t.Errorf("written back as %s and %v, want %q", out, u["timeout"], wantText)
			}
		})
	}
}

// TestDurationNullLeavesTheValue: null is no value, as for encoding/json's
// own types; it is neither a duration nor text that does not parse.
func TestDurationNullLeavesTheValue(t *testing.T) {
	w := pitstopv1alpha1.WaitCheck{Duration: pitstopv1alpha1.Duration{Duration: time.Minute}}
	if err := json.Unmarshal([]byte(`{"duration":null}`), &w); err != nil {
		t.Fatal(err)
	}
	if w.Duration.Duration != time.Minute || w.Duration.Invalid != nil {
		t.Errorf("after null: %s, want 1m0s", show(w.Duration))
	}
}

// FuzzDuration reads text as a duration, as a JSON string and as whatever
// JSON value it is, and checks that decoding never fails: text that parses
// is the value, text that does not is kept in Invalid and reported by
// DurationErrors, and what is written reads back as the same value.
func FuzzDuration(f *testing.F) {
	for _, text := range []string{"90s", "1h30m", "1 hour", "0s", "-5m", "1.5h", "90", "null", `{"a":1}`, `"5s"`, "2562047h47m16.854775807s"} {
		f.Add(text, int64(0))
	}
	f.Add("5s", int64(math.MinInt64))
	f.Add("5s", int64(math.MaxInt64))
	f.Add("5s", int64(90*time.Second))
	f.Fuzz(func(t *testing.T, text string, n int64) {
		// Every time.Duration is written as text that reads back as it.
		d := pitstopv1alpha1.Duration{Duration: time.Duration(n)}
		if got := roundTrip(t, d); !reflect.DeepEqual(got, d) {
			t.Errorf("%s written and read back is %s", show(d), show(got))
		}

		quoted := mustMarshal(t, text)
		var s string // text as JSON carries it: invalid UTF-8 replaced
		if err := json.Unmarshal(quoted, &s); err != nil {
			t.Fatal(err)
		}
		spec := readTimeout(t, quoted)
		errs := spec.DurationErrors(field.NewPath("spec", "drain"))
		if want, err := time.ParseDuration(s); err == nil {
			if !reflect.DeepEqual(*spec.Timeout, pitstopv1alpha1.Duration{Duration: want}) || len(errs) > 0 {
				t.Fatalf("%q read as %s with errors %v, want %v", s, show(*spec.Timeout), errs, want)
			}
		} else {
			if !reflect.DeepEqual(*spec.Timeout, pitstopv1alpha1.Duration{Invalid: &s}) {
				t.Fatalf("%q, which does not parse, read as %s", s, show(*spec.Timeout))
			}
			if len(errs) != 1 || errs[0].Field != "spec.drain.timeout" || errs[0].BadValue != s {
				t.Fatalf("%q, which does not parse, is reported as %v, want one error at spec.drain.timeout", s, errs)
			}
			if out, want := mustMarshal(t, spec.Timeout), mustMarshal(t, s); string(out) != string(want) {
				t.Errorf("%q, which does not parse, is written back as %s, want %s", s, out, want)
			}
		}
		if got := roundTrip(t, *spec.Timeout); !reflect.DeepEqual(got, *spec.Timeout) {
			t.Errorf("%s written and read back is %s", show(*spec.Timeout), show(got))
		}

		// Any JSON value decodes; what does not parse is reported, and what
		// is written reads back as the same value.
		if !json.Valid([]byte(text)) {
			return
		}
		spec = readTimeout(t, []byte(text))
		if spec.Timeout == nil {
			return // null leaves the field unset
		}
		errs = spec.DurationErrors(field.NewPath("spec", "drain"))
		if invalid := spec.Timeout.Invalid; invalid != nil {
			if _, err := time.ParseDuration(*invalid); err == nil {
				t.Errorf("%s read as %s: Invalid holds text that parses", text, show(*spec.Timeout))
			}
			if len(errs) != 1 {
				t.Errorf("%s read as %s is reported as %v, want one error", text, show(*spec.Timeout), errs)
			}
		} else if len(errs) > 0 {
			t.Errorf("%s read as %s is reported as %v", text, show(*spec.Timeout), errs)
		}
		if got := roundTrip(t, *spec.Timeout); !reflect.DeepEqual(got, *spec.Timeout) {
			t.Errorf("%s read as %s, written and read back is %s", text, show(*spec.Timeout), show(got))
		}
	})
}

// readTimeout decodes a drain spec whose timeout is the JSON value v.
func readTimeout(t *testing.T, v []byte) pitstopv1alpha1.DrainSpec {
	t.Helper()
	var spec pitstopv1alpha1.DrainSpec
	if err := json.Unmarshal([]byte(`{"timeout":`+string(v)+`}`), &spec); err != nil {
		t.Fatalf("decoding %s: %v", v, err)
	}
	return spec
}

// roundTrip writes d and reads it back.
func roundTrip(t *testing.T, d pitstopv1alpha1.Duration) pitstopv1alpha1.Duration {
	t.Helper()
	out := mustMarshal(t, d)
	var got pitstopv1alpha1.Duration
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("reading back %s: %v", out, err)
	}
	return got
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// show writes both fields: a Duration's own String is its time.Duration's.
func show(d pitstopv1alpha1.Duration) string {
	return fmt.Sprintf("%v / Invalid %s", d.Duration, showText(d.Invalid))
}

func showText(s *string) string {
	if s == nil {
		return "nil"
	}
	return fmt.Sprintf("%q", *s)
}
