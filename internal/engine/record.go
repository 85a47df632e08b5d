package engine

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
)

// Keys on the node.
const ()

// ProfileRecord is a node's state in one profile.
type ProfileRecord struct {
	Current  pitstopv1alpha1.MaintenanceState `json:"current"`
	Previous pitstopv1alpha1.MaintenanceState `json:"previous"`
	// Since is when the node entered Current.
	Since Stamp `json:"since"`
	// Entering says that Current's enter triggers have not all been done
	// since the node entered it: they run before its transitions are
	// evaluated.
	Entering bool `json:"entering,omitempty"`
	// EnterDone counts Current's enter triggers done so far, in order:
	// they are not run again.
	EnterDone int `json:"enterDone,omitempty"`
	// Failures counts the failed attempts in a row at leaving Current (a
	// trigger or a budget slot failed); LastError is the last one's message
	// and RetryAt when the next attempt may start. Kept on the node, so a
	// restart neither forgets why nor retries early.
	Failures  int               `json:"failures,omitempty"`
	LastError string            `json:"lastError,omitempty"`
	RetryAt   *metav1.MicroTime `json:"retryAt,omitempty"`
	// FailedTo is the state the failed attempts were moving the node to
	// (Current itself for its enter triggers): the wait until RetryAt
	// holds back only that move, not another transition whose check
	// passes meanwhile. Empty (a record of an older pitstop) holds back
	// every move.
	FailedTo pitstopv1alpha1.MaintenanceState `json:"failedTo,omitempty"`
	// Checks is the last result of each check of Current's transitions:
	// whether it passed. (Why is in the manager's evaluation, which changes
	// too often to be written to the node.)
	Checks map[string]bool `json:"checks,omitempty"`
	// Notified is when each notification of Current was last sent, so that
	// a restart does not send it again. A move forgets it.
	Notified map[string]Stamp `json:"notified,omitempty"`
}

// Record is everything pitstop keeps on a node about its maintenance.
type Record struct {
	Profiles map[string]ProfileRecord `json:"profiles"`
}

// ReadRecord reads the record from the node; a node without one has an
// empty record. A record that cannot be read is an error naming the
// annotation, and the node is left alone rather than reset.
func ReadRecord(node *corev1.Node) (Record, error) {
	r := Record{Profiles: map[string]ProfileRecord{}}
	data, ok := node.Annotations[pitstopv1alpha1.AnnotationMaintenanceData]
	if !ok || data == "" {
		if seed := node.Annotations[pitstopv1alpha1.AnnotationSeedData]; seed != "" {
			return readSeedRecord(node.Name, seed)
		}
		return r, nil
	}
	dec := json.NewDecoder(strings.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return r, fmt.Errorf("node %s: annotation %s is not a pitstop record: %w", node.Name, pitstopv1alpha1.AnnotationMaintenanceData, err)
	}
	if r.Profiles == nil {
		r.Profiles = map[string]ProfileRecord{}
	}
	// enterDone indexes the state's enter triggers: a negative one (the
	// node's own writers can put any) is not pitstop's.
	for _, name := range slices.Sorted(maps.Keys(r.Profiles)) {
		pr := r.Profiles[name]
		if pr.EnterDone < 0 {
			return Record{Profiles: map[string]ProfileRecord{}}, fmt.Errorf("node %s: annotation %s: profile %s: enterDone %d is negative",
				node.Name, pitstopv1alpha1.AnnotationMaintenanceData, name, pr.EnterDone)
		}
		if pr.RetryAt != nil && !writable(pr.RetryAt.Time) {
			return Record{Profiles: map[string]ProfileRecord{}}, fmt.Errorf("node %s: annotation %s: profile %s: retryAt %s is not a time the record can keep",
				node.Name, pitstopv1alpha1.AnnotationMaintenanceData, name, pr.RetryAt.Time)
		}
	}
	return r, nil
}

// Encode renders the record for the annotation.
func (r Record) Encode() string {
	data, _ := json.Marshal(r) // maps and times always marshal
	return string(data)
}

// Sync makes the record hold the given profiles: new ones start
// operational at now; ones no longer selecting the node are dropped while
// the node is operational for them. The others are kept: the node must
// leave them first (its drain undone, its slots given back), and the
// caller drops them once it has.
func (r *Record) Sync(profiles []string, now time.Time) {
	want := map[string]bool{}
	for _, p := range profiles {
		want[p] = true
		if _, ok := r.Profiles[p]; !ok {
			r.Profiles[p] = ProfileRecord{
				Current:  pitstopv1alpha1.StateOperational,
				Previous: pitstopv1alpha1.StateOperational,
				Since:    stamp(now),
			}
		}
	}
	for p, pr := range r.Profiles {
		if !want[p] && pr.Current == pitstopv1alpha1.StateOperational {
			delete(r.Profiles, p)
		}
	}
}

// HeldBy returns the profile holding the node in maintenance, or "".
func (r Record) HeldBy() string {
	names := make([]string, 0, len(r.Profiles))
	for p, pr := range r.Profiles {
		if pr.Current == pitstopv1alpha1.StateInMaintenance {
			names = append(names, p)
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		return ""
	}
	return names[0]
}

// Leaving says the node has come out of maintenance into a state whose
// enter triggers are not done yet: it keeps its budget slots until they
// are.
func (pr ProfileRecord) Leaving() bool {
	return pr.Entering && pr.Previous == pitstopv1alpha1.StateInMaintenance && pr.Current != pitstopv1alpha1.StateInMaintenance
}

// Holding says the node holds budget slots by its record: it is in
// maintenance for a profile, or leaving it (Leaving).
func (r Record) Holding() bool {
	for _, pr := range r.Profiles {
		if pr.Current == pitstopv1alpha1.StateInMaintenance || pr.Leaving() {
			return true
		}
	}
	return false
}

// Move records a transition of profile to next at now; entering says
// that next has enter triggers to run.
func (r *Record) Move(profile string, next pitstopv1alpha1.MaintenanceState, now time.Time, entering bool) {
	pr := r.Profiles[profile]
	r.Profiles[profile] = ProfileRecord{Current: next, Previous: pr.Current, Since: stamp(now), Entering: entering}
}

// EnterDone records that the first done enter triggers of the profile's
// state are done; an attempt that failed is forgotten.
func (r *Record) EnterDone(profile string, done int) {
	pr, ok := r.Profiles[profile]
	if !ok {
		return
	}
	pr.EnterDone, pr.Failures, pr.LastError, pr.RetryAt, pr.FailedTo = done, 0, "", nil, ""
	r.Profiles[profile] = pr
}

// Entered records that the enter triggers of the profile's state are done.
func (r *Record) Entered(profile string) {
	pr, ok := r.Profiles[profile]
	if !ok {
		return
	}
	pr.Entering, pr.EnterDone, pr.Failures, pr.LastError, pr.RetryAt, pr.FailedTo = false, 0, 0, "", nil, ""
	r.Profiles[profile] = pr
}

// stamp is when a state was entered as the record keeps it: to the
// millisecond (the annotation's format), rounded up, so that time-based
// checks (wait, waitExclude) never count the part of a millisecond before
// the node entered the state, whether they read the record before or after
// it was written.
func stamp(now time.Time) Stamp {
	t := now.Truncate(time.Millisecond)
	if t.Before(now) {
		t = t.Add(time.Millisecond)
	}
	return Stamp{Time: t}
}

// Stamp is a time in the record, written in RFC 3339 to the millisecond
// in UTC ("2026-11-22T10:00:00.600Z"). Records written to the second, as
// earlier versions did, read as they are, and earlier versions read these
// (RFC 3339 allows the fraction), so managers of both versions can share a
// node during an upgrade.
type Stamp struct {
	time.Time
}

// stampLayout is RFC 3339 with milliseconds, always three digits.
const stampLayout = "2006-01-02T15:04:05.000Z07:00"

// MarshalJSON writes the time to the millisecond; the zero time is null.
func (s Stamp) MarshalJSON() ([]byte, error) {
	if s.IsZero() {
		return []byte("null"), nil
	}
	return json.Marshal(s.UTC().Format(stampLayout))
}

// UnmarshalJSON reads an RFC 3339 time, with or without a fraction of a
// second, or null.
func (s *Stamp) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		s.Time = time.Time{}
		return nil
	}
	var text string
	if err := json.Unmarshal(data, &text); err != nil {
		return err
	}
	t, err := time.Parse(time.RFC3339, text)
	if err != nil {
		return err
	}
	if !writable(t) {
		return fmt.Errorf("%s is not a time the record can keep", text)
	}
	s.Time = t
	return nil
}

// writable says whether the record, which keeps times in UTC, can write t
// in a form it reads back: RFC 3339 has four-digit years only, and a time
// read with an offset may fall outside them in UTC.
func writable(t time.Time) bool {
	y := t.UTC().Year()
	return y >= 0 && y <= 9999
}

// Fail records a failed attempt at moving the node to state to in the
// profile (its current state's enter triggers: to is the current state),
// to be retried at retryAt, and returns how many attempts have failed in a
// row.
func (r *Record) Fail(profile string, to pitstopv1alpha1.MaintenanceState, err error, retryAt time.Time) int {
	pr := r.Profiles[profile]
	if pr.Failures > 0 && pr.FailedTo != to {
		pr.Failures = 0 // another move failed before: a new count
	}
	pr.FailedTo = to
	pr.Failures++
	pr.LastError = boundError(err.Error())
	pr.RetryAt = &metav1.MicroTime{Time: retryAt}
	r.Profiles[profile] = pr
	return pr.Failures
}

// maxLastError bounds LastError: the record shares the node's annotations
// (256 KiB together, as the API server allows) with every profile's, so one
// long upstream error (an HTML error page, a cloud API's answer) must not
// make every later write of the node fail.
const maxLastError = 1024

// truncatedMarker ends a LastError that was cut.
const truncatedMarker = "… (truncated)"

// boundError cuts msg to maxLastError bytes on a rune boundary, marked.
func boundError(msg string) string {
	if len(msg) <= maxLastError {
		return msg
	}
	cut := maxLastError - len(truncatedMarker)
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + truncatedMarker
}

// SetChecks records the profile's last check results.
func (r *Record) SetChecks(profile string, passed map[string]bool) {
	pr, ok := r.Profiles[profile]
	if !ok {
		return
	}
	pr.Checks = passed
	r.Profiles[profile] = pr
}

// Notified records that the profile's notification was sent at now.
func (r *Record) Notified(profile, notification string, now time.Time) {
	pr, ok := r.Profiles[profile]
	if !ok {
		return
	}
	sent := make(map[string]Stamp, len(pr.Notified)+1)
	maps.Copy(sent, pr.Notified)
	// To the millisecond, as the record keeps it: never before Since.
	sent[notification] = Stamp{Time: now.Truncate(time.Millisecond)}
	pr.Notified = sent
	r.Profiles[profile] = pr
}

// LastMoved names the profile whose transition was the node's most recent
// ("" when none has moved).
func (r Record) LastMoved() string {
	var last string
	var at time.Time
	for name, pr := range r.Profiles {
		if pr.Current == pr.Previous {
			continue
		}
		if last == "" || pr.Since.Time.After(at) || pr.Since.Time.Equal(at) && name < last {
			last, at = name, pr.Since.Time
		}
	}
	return last
}

// ClearFailures forgets the profile's failed attempts.
func (r *Record) ClearFailures(profile string) {
	pr, ok := r.Profiles[profile]
	if !ok || pr.Failures == 0 && pr.RetryAt == nil {
		return
	}
	pr.Failures, pr.LastError, pr.RetryAt, pr.FailedTo = 0, "", nil, ""
	r.Profiles[profile] = pr
}

// severity orders states for pitstopv1alpha1.LabelState.
var severity = map[pitstopv1alpha1.MaintenanceState]int{
	pitstopv1alpha1.StateOperational:         0,
	pitstopv1alpha1.StateMaintenanceRequired: 1,
	pitstopv1alpha1.StateInMaintenance:       2,
}

// MostSevere is the node's most severe state over its profiles;
// operational when it has none.
func (r Record) MostSevere() pitstopv1alpha1.MaintenanceState {
	worst := pitstopv1alpha1.StateOperational
	for _, pr := range r.Profiles {
		if severity[pr.Current] > severity[worst] {
			worst = pr.Current
		}
	}
	return worst
}

// Selects reports whether a profile applies to a node: through its
// nodeSelector, or through the maintenance-controller's profile label. A
// profile with neither a selector nor the label on the node does not apply.
func Selects(p *pitstopv1alpha1.MaintenanceProfile, node *corev1.Node) (bool, error) {
	selects, err := Selector(p)
	if err != nil {
		return false, err
	}
	return selects(node), nil
}

// Selector is Selects for one profile with its nodeSelector parsed once,
// for asking about many nodes.
func Selector(p *pitstopv1alpha1.MaintenanceProfile) (func(*corev1.Node) bool, error) {
	var sel labels.Selector
	if p.Spec.NodeSelector != nil {
		var err error
		if sel, err = metav1.LabelSelectorAsSelector(p.Spec.NodeSelector); err != nil {
			return nil, fmt.Errorf("MaintenanceProfile %s: spec.nodeSelector: %w", p.Name, err)
		}
	}
	name := p.Name
	return func(node *corev1.Node) bool {
		for n := range strings.SplitSeq(node.Labels[pitstopv1alpha1.LabelSeedProfile], "--") {
			if n == name {
				return true
			}
		}
		return sel != nil && sel.Matches(labels.Set(node.Labels))
	}, nil
}

// seedRecord is the maintenance-controller's record
// (cloud.sap/maintenance-data): per profile, its current and previous
// state and when it last moved.
type seedRecord struct {
	Profiles map[string]seedProfile
}

type seedProfile struct {
	Transition time.Time
	Current    pitstopv1alpha1.MaintenanceState
	Previous   pitstopv1alpha1.MaintenanceState
}

// EncodeSeed writes the record as the maintenance-controller's
// (cloud.sap/maintenance-data), for the tools that read that annotation
// (--smc-compat): per profile, the state, since when, and the previous
// state while the state's enter triggers still run (the
// maintenance-controller's sign of an entry not done; the current state
// once they are). Its notification times are left out: pitstop keeps them
// per profile, the maintenance-controller per instance.
func (r Record) EncodeSeed() string {
	seed := seedRecord{Profiles: make(map[string]seedProfile, len(r.Profiles))}
	for name, pr := range r.Profiles {
		previous := pr.Current
		if pr.Entering {
			previous = pr.Previous
		}
		seed.Profiles[name] = seedProfile{Transition: pr.Since.Time.UTC(), Current: pr.Current, Previous: previous}
	}
	data, _ := json.Marshal(seed) // maps and times always marshal
	return string(data)
}

// readSeedRecord takes over the maintenance-controller's record of a node
// pitstop has none of: each profile keeps its state and since when, so a
// node it left mid-maintenance does not start again as operational.
func readSeedRecord(node, data string) (Record, error) {
	r := Record{Profiles: map[string]ProfileRecord{}}
	var seed seedRecord
	if err := json.Unmarshal([]byte(data), &seed); err != nil {
		return r, fmt.Errorf("node %s: annotation %s is not a maintenance-controller record: %w", node, pitstopv1alpha1.AnnotationSeedData, err)
	}
	for name, p := range seed.Profiles {
		if !writable(stamp(p.Transition).Time) {
			return Record{Profiles: map[string]ProfileRecord{}}, fmt.Errorf("node %s: annotation %s: profile %s: Transition %s is not a time pitstop's record can keep", node, pitstopv1alpha1.AnnotationSeedData, name, p.Transition)
		}
		for _, st := range []pitstopv1alpha1.MaintenanceState{p.Current, p.Previous} {
			if _, known := severity[st]; !known {
				return Record{Profiles: map[string]ProfileRecord{}}, fmt.Errorf("node %s: annotation %s: profile %s: unknown state %q", node, pitstopv1alpha1.AnnotationSeedData, name, st)
			}
		}
		// The maintenance-controller runs a state's enter triggers while
		// its previous state differs from the current one.
		r.Profiles[name] = ProfileRecord{Current: p.Current, Previous: p.Previous, Since: stamp(p.Transition), Entering: p.Current != p.Previous}
	}
	return r, nil
}
