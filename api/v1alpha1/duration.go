package v1alpha1

import (
	"encoding/json"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Duration is a length of time written as a Go duration ("90s", "1h30m"),
// like metav1.Duration, except that text that does not parse does not fail
// the decoding: it is kept in Invalid (and written back as it was), so that
// one object stored with a bad duration (before the CRD's validation
// refused it) cannot stop a whole list from decoding, and with it pitstop's
// cache from syncing. Readers refuse such an object through DurationErrors.
// +kubebuilder:validation:Type=string
type Duration struct {
	time.Duration `json:"-"`
	// Invalid is the text that did not parse as a duration; nil when
	// Duration holds the value. It is a pointer because an empty string
	// does not parse either.
	Invalid *string `json:"-"`
}

// UnmarshalJSON reads a duration string, keeping one that does not parse in
// Invalid instead of failing. A value that is not a string is read as its
// JSON text (of which only 0 parses), with invalid UTF-8 replaced as it is
// in a string, so that what is written reads back as the same value. null
// leaves d as it is, the convention of json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		s = strings.ToValidUTF8(string(b), "\uFFFD")
	}
	parsed, err := time.ParseDuration(s)
	if err != nil {
		d.Duration, d.Invalid = 0, &s
		return nil
	}
	d.Duration, d.Invalid = parsed, nil
	return nil
}

// MarshalJSON writes the duration, or the text that did not parse as it
// was read.
func (d Duration) MarshalJSON() ([]byte, error) {
	if d.Invalid != nil {
		return json.Marshal(*d.Invalid)
	}
	return json.Marshal(d.Duration.String())
}

// check adds an error at path when d did not parse.
func (d *Duration) check(path *field.Path, errs field.ErrorList) field.ErrorList {
	if d != nil && d.Invalid != nil {
		errs = append(errs, field.Invalid(path, *d.Invalid, "not a duration such as 90s or 1h30m"))
	}
	return errs
}

// DurationErrors lists the durations of the drain spec at path that did
// not parse.
func (s *DrainSpec) DurationErrors(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = s.Timeout.check(path.Child("timeout"), errs)
	return s.PodEvictionRetryInterval.check(path.Child("podEvictionRetryInterval"), errs)
}

// DurationErrors lists the durations of the profile that did not parse.
func (s *MaintenanceProfileSpec) DurationErrors() field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	for i := range s.Checks {
		c, path := &s.Checks[i], spec.Child("checks").Index(i)
		if c.Stagger != nil {
			errs = c.Stagger.Duration.check(path.Child("stagger", "duration"), errs)
		}
		if c.Wait != nil {
			errs = c.Wait.Duration.check(path.Child("wait", "duration"), errs)
		}
		if c.WaitExclude != nil {
			errs = c.WaitExclude.Duration.check(path.Child("waitExclude", "duration"), errs)
		}
	}
	for i := range s.Triggers {
		if d := s.Triggers[i].Drain; d != nil {
			errs = append(errs, d.Drain.DurationErrors(spec.Child("triggers").Index(i).Child("drain", "drain"))...)
		}
		if rm := s.Triggers[i].ReplaceMachine; rm != nil {
			errs = rm.Timeout.check(spec.Child("triggers").Index(i).Child("replaceMachine", "timeout"), errs)
		}
		if ri := s.Triggers[i].RebootInstance; ri != nil {
			errs = ri.Timeout.check(spec.Child("triggers").Index(i).Child("rebootInstance", "timeout"), errs)
		}
	}
	for i := range s.Notifications {
		n, path := &s.Notifications[i], spec.Child("notifications").Index(i)
		if o := n.Schedule.Oneshot; o != nil {
			errs = o.Delay.check(path.Child("schedule", "oneshot", "delay"), errs)
		}
		if p := n.Schedule.Periodic; p != nil {
			errs = p.Interval.check(path.Child("schedule", "periodic", "interval"), errs)
		}
		if st := n.SlackThread; st != nil {
			errs = st.Period.check(path.Child("slackThread", "period"), errs)
		}
	}
	errs = s.Recheck.check(spec.Child("recheck"), errs)
	if r := s.Recheck; r != nil && r.Invalid == nil && r.Duration < time.Second {
		errs = append(errs, field.Invalid(spec.Child("recheck"), r.Duration.String(), "must be at least 1s"))
	}
	return errs
}
