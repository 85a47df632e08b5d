package engine

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

// FuzzReadRecord reads the node's record annotations as a node's kubelet
// may write them (anyone with nodes/patch can): pitstop's own record and
// the maintenance-controller's it takes over. Whatever the bytes, reading
// does not panic; a record that cannot be read is an error naming the
// node and the annotation; a record that reads claims no more than its
// fields say (a node holds a slot, is held by a profile, or is in its most
// severe state only as its profiles' states say), can be used by the
// engine (its enter triggers left are a part of the state's), reads back
// as it was written once pitstop writes it, and keeps a failure's message
// within its bound.
func FuzzReadRecord(f *testing.F) {
	for _, data := range []string{
		"",
		`{"profiles":{}}`,
		`{"profiles":{"os":{"current":"in-maintenance","previous":"maintenance-required","since":"2026-11-22T10:00:00.600Z","entering":true,"enterDone":1}}}`,
		`{"profiles":{"os":{"current":"operational","previous":"in-maintenance","since":"2026-11-22T10:00:00Z","entering":true,` +
			`"failures":3,"lastError":"trigger uncordon: refused","retryAt":"2026-11-22T10:00:01.500000Z","checks":{"a":true,"b":false},"notified":{"chat":"2026-11-22T10:00:00.700Z"}}}}`,
		`{"profiles":{"os":{"current":"in-maintenance","previous":"in-maintenance","since":null}}}`,
		`{"profiles":{"os":{"current":"rebooting","previous":"","since":"2026-11-22T10:00:00+01:00"}}}`,
		`{"profiles":{"os":{"current":"maintenance-required","since":"2026-11-22T10:00:00.123456789Z","enterDone":-1,"failures":-5}}}`,
		`{"profiles":{"os":{"current":"operational","since":"0000-01-01T00:30:00+01:00"}}}`,
		`{"profiles":null}`,
		`{"Profiles":{"x":{}}, "Notifications":{}}`,
		`{"profiles":{"os":{"lastError":"` + strings.Repeat("<", 2000) + `"}}}`,
	} {
		f.Add(data, "")
	}
	for _, seed := range []string{
		`{"Profiles":{"flatcar":{"Transition":"2026-11-20T10:00:00.5Z","Current":"in-maintenance","Previous":"maintenance-required"},` +
			`"k8s":{"Transition":"2026-11-19T08:00:00Z","Current":"operational","Previous":"operational"}},"Notifications":{"chat":"2026-11-20T10:00:01Z"}}`,
		`{"Profiles":{"x":{"Current":"rebooting"}}}`,
		`{"Profiles":{"x":{"Current":"in-maintenance","Previous":"in-maintenance","Transition":"9999-12-31T23:59:59-01:00"}}}`,
		`{"Profiles":{"x":null}}`,
		`[]`,
	} {
		f.Add("", seed)
	}
	f.Fuzz(func(t *testing.T, data, seed string) {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "fuzz-node", Annotations: map[string]string{}}}
		if data != "" {
			node.Annotations[pitstopv1alpha1.AnnotationMaintenanceData] = data
		}
		if seed != "" {
			node.Annotations[pitstopv1alpha1.AnnotationSeedData] = seed
		}
		r, err := ReadRecord(node)
		if err != nil {
			annotation := pitstopv1alpha1.AnnotationMaintenanceData
			if data == "" {
				annotation = pitstopv1alpha1.AnnotationSeedData
			}
			if msg := err.Error(); !strings.Contains(msg, "node fuzz-node") || !strings.Contains(msg, "annotation "+annotation) {
				t.Fatalf("the error does not name the node and the annotation %s: %v", annotation, err)
			}
			return
		}
		if data == "" && seed == "" && len(r.Profiles) != 0 {
			t.Fatalf("a node without a record read as %+v", r.Profiles)
		}
		if r.Profiles == nil {
			t.Fatal("a record read with no profiles map")
		}
		if data == "" && seed != "" {
			assertSeedTakenOver(t, r)
		}
		assertClaims(t, r)
		assertUsable(t, r)

		// Once pitstop writes what it read, that reads back as written.
		written := r.Encode()
		node.Annotations = map[string]string{pitstopv1alpha1.AnnotationMaintenanceData: written}
		back, err := ReadRecord(node)
		if err != nil {
			t.Fatalf("the record as pitstop writes it does not read back: %v\n%s", err, written)
		}
		if again := back.Encode(); again != written {
			t.Fatalf("the record written, read and written again changed:\n%s\n%s", written, again)
		}
		assertSameRecord(t, r, back)

		// A failure recorded on what was read is kept within its bound.
		long := errors.New(strings.Repeat("<é", maxLastError))
		for name := range r.Profiles {
			failed := Record{Profiles: maps.Clone(r.Profiles)}
			failed.Fail(name, pitstopv1alpha1.StateInMaintenance, long, time.Now())
			if got := failed.Profiles[name].LastError; len(got) > maxLastError {
				t.Fatalf("profile %s: LastError is %d bytes after a failure, want at most %d", name, len(got), maxLastError)
			}
		}
	})
}

// assertSeedTakenOver: a profile taken over from the maintenance-controller
// is in a known state, entering it when it came from another one, with no
// trigger done, no failure and no check result.
func assertSeedTakenOver(t *testing.T, r Record) {
	t.Helper()
	for name, pr := range r.Profiles {
		_, current := severity[pr.Current]
		_, previous := severity[pr.Previous]
		if !current || !previous || pr.Entering != (pr.Current != pr.Previous) || pr.EnterDone != 0 || pr.Failures != 0 ||
			pr.LastError != "" || pr.RetryAt != nil || pr.Checks != nil || pr.Notified != nil {
			t.Fatalf("profile %s taken over as %+v", name, pr)
		}
	}
}

// assertClaims: what the record says about the node follows from its
// profiles' states, and from nothing else in it.
func assertClaims(t *testing.T, r Record) {
	t.Helper()
	var inMaintenance []string
	holding := false
	worst := pitstopv1alpha1.StateOperational
	for name, pr := range r.Profiles {
		if pr.Current == pitstopv1alpha1.StateInMaintenance {
			inMaintenance = append(inMaintenance, name)
		}
		leaving := pr.Entering && pr.Previous == pitstopv1alpha1.StateInMaintenance && pr.Current != pitstopv1alpha1.StateInMaintenance
		holding = holding || pr.Current == pitstopv1alpha1.StateInMaintenance || leaving
		if s, ok := severity[pr.Current]; ok && s > severity[worst] {
			worst = pr.Current
		}
	}
	slices.Sort(inMaintenance)
	if got := r.HeldBy(); len(inMaintenance) == 0 && got != "" || len(inMaintenance) > 0 && got != inMaintenance[0] {
		t.Fatalf("HeldBy is %q; the profiles in maintenance are %q", got, inMaintenance)
	}
	if r.Holding() != holding {
		t.Fatalf("Holding is %v; by the profiles' states it is %v", r.Holding(), holding)
	}
	if got := r.MostSevere(); got != worst {
		t.Fatalf("MostSevere is %q; by the profiles' states it is %q", got, worst)
	}
	if last := r.LastMoved(); last != "" {
		if pr, ok := r.Profiles[last]; !ok || pr.Current == pr.Previous {
			t.Fatalf("LastMoved names %q, which has not moved", last)
		}
	}
}

// assertUsable: the engine can use each profile of the record: its enter
// triggers left are the end of the state's, never more.
func assertUsable(t *testing.T, r Record) {
	t.Helper()
	p := &Profile{Name: "fuzz", Enter: map[pitstopv1alpha1.MaintenanceState][]string{
		pitstopv1alpha1.StateOperational:         {"restore"},
		pitstopv1alpha1.StateMaintenanceRequired: {},
		pitstopv1alpha1.StateInMaintenance:       {"cordon", "drain"},
	}}
	for name, pr := range r.Profiles {
		enter := p.Enter[pr.Current]
		left := p.EnterLeft(pr)
		if len(left) > len(enter) || !slices.Equal(left, enter[len(enter)-len(left):]) {
			t.Fatalf("profile %s (%+v): enter triggers left %q are not the end of %q", name, pr, left, enter)
		}
		if p.Entering(pr) && !pr.Entering {
			t.Fatalf("profile %s (%+v) is entering its state though its record says it is not", name, pr)
		}
	}
}

// assertSameRecord: the record read back is the one written, its times to
// the precision the record keeps them.
func assertSameRecord(t *testing.T, r, back Record) {
	t.Helper()
	if !slices.Equal(slices.Sorted(maps.Keys(r.Profiles)), slices.Sorted(maps.Keys(back.Profiles))) {
		t.Fatalf("profiles %q read back as %q", slices.Sorted(maps.Keys(r.Profiles)), slices.Sorted(maps.Keys(back.Profiles)))
	}
	for name, pr := range r.Profiles {
		got := back.Profiles[name]
		if got.Current != pr.Current || got.Previous != pr.Previous || got.Entering != pr.Entering || got.EnterDone != pr.EnterDone ||
			got.Failures != pr.Failures || got.LastError != pr.LastError || !maps.Equal(got.Checks, pr.Checks) ||
			!sameStamp(got.Since, pr.Since) || (got.RetryAt == nil) != (pr.RetryAt == nil) ||
			pr.RetryAt != nil && !got.RetryAt.Time.Equal(pr.RetryAt.Time.Truncate(time.Microsecond)) ||
			!maps.EqualFunc(got.Notified, pr.Notified, sameStamp) {
			t.Fatalf("profile %s read back as %+v, written as %+v", name, got, pr)
		}
	}
}

// sameStamp: a is b as the record keeps it, to the millisecond.
func sameStamp(a, b Stamp) bool {
	return a.Equal(b.Truncate(time.Millisecond))
}

// TestUntrustedRecordPitstopCannotKeepIsRefused: FuzzReadRecord found
// records a node's writers can put that read without error yet break
// pitstop: a negative enterDone panicked the engine (EnterLeft sliced the
// state's enter triggers from -1), and a time whose UTC year is outside
// RFC 3339's four digits was written back as text no pitstop reads. Each
// is now refused when read, with an error naming the annotation.
func TestUntrustedRecordPitstopCannotKeepIsRefused(t *testing.T) {
	for name, c := range map[string]struct{ annotation, data, want string }{
		"a negative enterDone": {pitstopv1alpha1.AnnotationMaintenanceData,
			`{"profiles":{"os":{"current":"in-maintenance","entering":true,"enterDone":-1}}}`, "profile os: enterDone -1"},
		"a since before year 0 in UTC": {pitstopv1alpha1.AnnotationMaintenanceData,
			`{"profiles":{"os":{"current":"operational","since":"0000-01-01T00:30:00+01:00"}}}`, "not a time the record can keep"},
		"a notification after year 9999 in UTC": {pitstopv1alpha1.AnnotationMaintenanceData,
			`{"profiles":{"os":{"current":"operational","notified":{"chat":"9999-12-31T23:59:59-01:00"}}}}`, "not a time the record can keep"},
		"a retryAt before year 0 in UTC": {pitstopv1alpha1.AnnotationMaintenanceData,
			`{"profiles":{"os":{"current":"operational","failures":1,"retryAt":"0000-01-01T00:30:00.000000+01:00"}}}`, "profile os: retryAt"},
		"a seed transition after year 9999 once rounded": {pitstopv1alpha1.AnnotationSeedData,
			`{"Profiles":{"x":{"Current":"in-maintenance","Previous":"in-maintenance","Transition":"9999-12-31T23:59:59.9999Z"}}}`, "profile x: Transition"},
	} {
		t.Run(name, func(t *testing.T) {
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{c.annotation: c.data}}}
			r, err := ReadRecord(node)
			if err == nil {
				p := &Profile{Enter: map[pitstopv1alpha1.MaintenanceState][]string{pitstopv1alpha1.StateInMaintenance: {"cordon"}}}
				for _, pr := range r.Profiles {
					_ = p.EnterLeft(pr) // panics on a negative enterDone
				}
				node.Annotations = map[string]string{pitstopv1alpha1.AnnotationMaintenanceData: r.Encode()}
				_, err := ReadRecord(node)
				t.Fatalf("read without error; written back, it reads with %v", err)
			}
			if msg := err.Error(); !strings.Contains(msg, "node n1: annotation "+c.annotation) || !strings.Contains(msg, c.want) {
				t.Fatalf("got %v, want an error naming the node, the annotation %s and %q", err, c.annotation, c.want)
			}
		})
	}
}
