package engine

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

func TestRecordRoundTripAndSync(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	r, err := ReadRecord(node)
	if err != nil || len(r.Profiles) != 0 {
		t.Fatalf("empty node: %+v, %v", r, err)
	}
	r.Sync([]string{"os", "k8s"}, t0)
	if r.Profiles["os"].Current != operational || !r.Profiles["k8s"].Since.Time.Equal(t0) {
		t.Fatalf("new profiles not operational since t0: %+v", r.Profiles)
	}
	r.Move("os", required, t0.Add(time.Minute), false)
	r.Move("os", inMaint, t0.Add(2*time.Minute), false)
	if r.HeldBy() != "os" || r.MostSevere() != inMaint || r.Profiles["os"].Previous != required {
		t.Fatalf("after moves: held by %q, most severe %s, %+v", r.HeldBy(), r.MostSevere(), r.Profiles["os"])
	}

	r.SetChecks("os", map[string]bool{"rebooted": false, "healthy": true})
	retryAt := t0.Add(2*time.Minute + 1500*time.Millisecond)
	if n := r.Fail("os", pitstopv1alpha1.StateInMaintenance, errors.New("trigger uncordon: refused"), retryAt); n != 1 {
		t.Errorf("first failure counted as %d", n)
	}

	node.Annotations = map[string]string{pitstopv1alpha1.AnnotationMaintenanceData: r.Encode()}
	back, err := ReadRecord(node)
	if err != nil {
		t.Fatal(err)
	}
	os := back.Profiles["os"]
	if os.Current != inMaint || !os.Since.Time.Equal(t0.Add(2*time.Minute)) || os.Checks["healthy"] != true || os.Checks["rebooted"] != false ||
		os.Failures != 1 || os.LastError != "trigger uncordon: refused" || !os.RetryAt.Time.Equal(retryAt) {
		t.Errorf("round trip lost data: %+v", back.Profiles)
	}
	back.ClearFailures("os")
	if pr := back.Profiles["os"]; pr.Failures != 0 || pr.LastError != "" || pr.RetryAt != nil {
		t.Errorf("failures not cleared: %+v", pr)
	}

	// A profile that no longer selects the node is dropped while the node
	// is operational for it; otherwise the node must leave it first.
	back.Sync([]string{}, t0.Add(time.Hour))
	if _, ok := back.Profiles["k8s"]; ok {
		t.Error("dropped profile k8s kept")
	}
	if _, ok := back.Profiles["os"]; !ok {
		t.Error("profile os dropped while it holds the node in maintenance")
	}
	back.Sync([]string{"os"}, t0.Add(time.Hour))
	back.Move("os", required, t0.Add(2*time.Hour), false)
	back.Sync([]string{}, t0.Add(2*time.Hour))
	if _, ok := back.Profiles["os"]; !ok {
		t.Error("profile os dropped while the node is maintenance-required for it")
	}
}

func TestReadRecordRefusesGarbage(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{pitstopv1alpha1.AnnotationMaintenanceData: `{"Profiles":{"x":{}}, "Notifications":{}}`}}}
	_, err := ReadRecord(node)
	if err == nil || !strings.Contains(err.Error(), pitstopv1alpha1.AnnotationMaintenanceData) || !strings.Contains(err.Error(), "n1") {
		t.Errorf("got %v, want an error naming the node and the annotation", err)
	}
}

func TestSelects(t *testing.T) {
	node := func(labels map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: labels}}
	}
	profile := func(name string, sel *metav1.LabelSelector) *pitstopv1alpha1.MaintenanceProfile {
		return &pitstopv1alpha1.MaintenanceProfile{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: pitstopv1alpha1.MaintenanceProfileSpec{NodeSelector: sel}}
	}
	workers := &metav1.LabelSelector{MatchLabels: map[string]string{"role": "worker"}}
	for _, tc := range []struct {
		name string
		p    *pitstopv1alpha1.MaintenanceProfile
		n    *corev1.Node
		want bool
	}{
		{"by selector", profile("os", workers), node(map[string]string{"role": "worker"}), true},
		{"not by selector", profile("os", workers), node(map[string]string{"role": "db"}), false},
		{"by the seed's label, one of several", profile("k8s", nil), node(map[string]string{pitstopv1alpha1.LabelSeedProfile: "os--k8s"}), true},
		{"the seed's label names another profile", profile("k8s", nil), node(map[string]string{pitstopv1alpha1.LabelSeedProfile: "os"}), false},
		{"no selector and no label", profile("os", nil), node(nil), false},
	} {
		got, err := Selects(tc.p, tc.n)
		if err != nil || got != tc.want {
			t.Errorf("%s: Selects = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}

// TestSinceIsRoundedUpToTheMillisecond: the record keeps when a state was
// entered to the millisecond; the rest is rounded up, so a 20 s wait that
// starts at 10:00:00.6004 ends at 10:00:20.601, never before 20 s have
// passed, whether the time is read from memory or from the annotation.
func TestSinceIsRoundedUpToTheMillisecond(t *testing.T) {
	entered := time.Date(2026, 11, 22, 10, 0, 0, 600_400_000, time.UTC)
	r := Record{Profiles: map[string]ProfileRecord{}}
	r.Sync([]string{"os"}, entered)
	r.Move("os", required, entered, false)
	want := time.Date(2026, 11, 22, 10, 0, 0, 601_000_000, time.UTC)
	if got := r.Profiles["os"].Since.Time; !got.Equal(want) {
		t.Fatalf("since %s in memory, want %s", got, want)
	}
	back, err := ReadRecord(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{pitstopv1alpha1.AnnotationMaintenanceData: r.Encode()}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := back.Profiles["os"].Since.Time; !got.Equal(want) {
		t.Fatalf("since %s read back, want %s", got, want)
	}
	r.Move("os", inMaint, want, false) // a whole millisecond stays as it is
	if got := r.Profiles["os"].Since.Time; !got.Equal(want) {
		t.Fatalf("since %s for a whole millisecond, want %s", got, want)
	}
}

// TestRecordTimesAcrossVersions: a record written to the second (earlier
// versions) reads as it was, and one written now reads in earlier versions,
// which kept the time as a metav1.Time, to the same millisecond.
func TestRecordTimesAcrossVersions(t *testing.T) {
	old := `{"profiles":{"os":{"current":"in-maintenance","previous":"maintenance-required","since":"2026-11-22T10:00:01Z"}}}`
	rec, err := ReadRecord(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{pitstopv1alpha1.AnnotationMaintenanceData: old}}})
	if err != nil {
		t.Fatalf("a record written to the second: %v", err)
	}
	if got, want := rec.Profiles["os"].Since.Time, time.Date(2026, 11, 22, 10, 0, 1, 0, time.UTC); !got.Equal(want) {
		t.Fatalf("since %s, want %s", got, want)
	}
	if got, want := rec.Encode(), `"since":"2026-11-22T10:00:01.000Z"`; !strings.Contains(got, want) {
		t.Fatalf("encoded %s, want it to hold %s", got, want)
	}

	entered := time.Date(2026, 11, 22, 10, 0, 0, 250_000_000, time.FixedZone("CET", 3600))
	rec.Move("os", operational, entered, false)
	var earlier struct {
		Profiles map[string]struct {
			Since metav1.Time `json:"since"`
		} `json:"profiles"`
	}
	if err := json.Unmarshal([]byte(rec.Encode()), &earlier); err != nil {
		t.Fatalf("an earlier version reading %s: %v", rec.Encode(), err)
	}
	if got := earlier.Profiles["os"].Since.Time; !got.Equal(entered) {
		t.Fatalf("an earlier version reads since %s, want %s", got, entered)
	}

	var zero struct {
		Since Stamp `json:"since"`
	}
	if err := json.Unmarshal([]byte(`{"since":null}`), &zero); err != nil || !zero.Since.IsZero() {
		t.Fatalf("null since: %v, %v", zero.Since, err)
	}
	if err := json.Unmarshal([]byte(`{"since":"yesterday"}`), &zero); err == nil {
		t.Fatal("since \"yesterday\" was read without an error")
	}
}

// TestNotifiedIsNeverBeforeSince: a notification sent the moment a state
// is entered is recorded at or after the state's entry time, in memory and
// read back, so a one-shot notification is not taken for unsent.
func TestNotifiedIsNeverBeforeSince(t *testing.T) {
	entered := time.Date(2026, 11, 22, 10, 0, 0, 600_400_000, time.UTC)
	r := Record{Profiles: map[string]ProfileRecord{}}
	r.Sync([]string{"os"}, entered)
	r.Move("os", required, entered, false)
	sent := r.Profiles["os"].Since.Add(500 * time.Microsecond) // the earliest a notification can be due
	r.Notified("os", "slack", sent)
	back, err := ReadRecord(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{pitstopv1alpha1.AnnotationMaintenanceData: r.Encode()}}})
	if err != nil {
		t.Fatal(err)
	}
	for where, rec := range map[string]Record{"in memory": r, "read back": back} {
		pr := rec.Profiles["os"]
		if pr.Notified["slack"].Before(pr.Since.Time) {
			t.Errorf("%s: notified at %s, before the state was entered at %s", where, pr.Notified["slack"].Time, pr.Since.Time)
		}
	}
}

// TestTheMaintenanceControllersRecordIsTakenOver: a node pitstop has no
// record of starts from the maintenance-controller's, each profile in its
// state since its last transition; pitstop's own record wins once there
// is one; a seed record that cannot be read is an error naming it.
func TestTheMaintenanceControllersRecordIsTakenOver(t *testing.T) {
	seed := `{"Profiles":{"flatcar":{"Transition":"2026-11-20T10:00:00.5Z","Current":"in-maintenance","Previous":"maintenance-required"},` +
		`"k8s":{"Transition":"2026-11-19T08:00:00Z","Current":"operational","Previous":"operational"}},"Notifications":{"chat":"2026-11-20T10:00:01Z"}}`
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{pitstopv1alpha1.AnnotationSeedData: seed}}}
	r, err := ReadRecord(node)
	if err != nil {
		t.Fatal(err)
	}
	// Its previous state differs from its current one: the seed has not
	// run the state's enter chain through yet, so pitstop runs it.
	want := ProfileRecord{Current: pitstopv1alpha1.StateInMaintenance, Previous: pitstopv1alpha1.StateMaintenanceRequired, Since: Stamp{Time: time.Date(2026, 11, 20, 10, 0, 0, 500e6, time.UTC)}, Entering: true}
	if got := r.Profiles["flatcar"]; got.Current != want.Current || got.Previous != want.Previous || !got.Since.Equal(want.Since.Time) || !got.Entering {
		t.Errorf("flatcar = %+v, want %+v", got, want)
	}
	if got := r.Profiles["k8s"]; got.Current != pitstopv1alpha1.StateOperational || got.Entering || len(r.Profiles) != 2 {
		t.Errorf("profiles = %+v", r.Profiles)
	}
	if r.MostSevere() != pitstopv1alpha1.StateInMaintenance {
		t.Errorf("most severe %s", r.MostSevere())
	}

	node.Annotations[pitstopv1alpha1.AnnotationMaintenanceData] = `{"profiles":{}}`
	if r, err := ReadRecord(node); err != nil || len(r.Profiles) != 0 {
		t.Errorf("with pitstop's own record: %+v, %v", r, err)
	}

	delete(node.Annotations, pitstopv1alpha1.AnnotationMaintenanceData)
	node.Annotations[pitstopv1alpha1.AnnotationSeedData] = `{"Profiles":{"x":{"Current":"rebooting"}}}`
	if _, err := ReadRecord(node); err == nil || !strings.Contains(err.Error(), pitstopv1alpha1.AnnotationSeedData) || !strings.Contains(err.Error(), `unknown state "rebooting"`) {
		t.Errorf("a seed record with an unknown state: %v", err)
	}
}

// TestUntrustedLongErrorsAreBoundedInTheRecord: an upstream error of any
// length (a cloud API's HTML page, say) is kept in the node's record cut to
// 1 KiB on a rune boundary and marked as cut, so the record cannot grow
// past the node's annotation limit and stall every profile's write.
func TestUntrustedLongErrorsAreBoundedInTheRecord(t *testing.T) {
	for name, msg := range map[string]string{
		"a 300 KiB error of ASCII":         strings.Repeat("x", 300<<10),
		"a long error of multi-byte runes": strings.Repeat("é€😀", 10<<10),
		"an error just over the bound":     strings.Repeat("y", maxLastError+1),
		"multi-byte runes across the cut":  strings.Repeat("a", maxLastError-len(truncatedMarker)-1) + strings.Repeat("€", 10),
	} {
		t.Run(name, func(t *testing.T) {
			r := Record{Profiles: map[string]ProfileRecord{"os": {Current: operational}}}
			r.Fail("os", pitstopv1alpha1.StateInMaintenance, errors.New(msg), time.Now())
			got := r.Profiles["os"].LastError
			if len(got) > maxLastError {
				t.Fatalf("LastError is %d bytes, want at most %d", len(got), maxLastError)
			}
			if !utf8.ValidString(got) || !strings.HasSuffix(got, truncatedMarker) {
				t.Fatalf("LastError is not valid UTF-8 ending in %q: ...%q", truncatedMarker, got[max(len(got)-40, 0):])
			}
			if !strings.HasPrefix(msg, strings.TrimSuffix(got, truncatedMarker)) {
				t.Fatal("LastError does not start with the error's own text")
			}
			if enc := r.Encode(); len(enc) > 4<<10 {
				t.Fatalf("the encoded record is %d bytes", len(enc))
			}
		})
	}
	r := Record{Profiles: map[string]ProfileRecord{"os": {Current: operational}}}
	r.Fail("os", pitstopv1alpha1.StateInMaintenance, errors.New("short"), time.Now())
	if got := r.Profiles["os"].LastError; got != "short" {
		t.Errorf("a short error is kept as %q", got)
	}
}
