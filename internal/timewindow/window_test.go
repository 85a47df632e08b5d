package timewindow

import (
	"strings"
	"testing"
	"time"
)

// TestAWindowSaysWhetherItIsOpenAndUntilWhen: a window crossing midnight
// is the day it starts on's; touching windows are one opening; an
// excluded date shuts its window and is named; daylight saving moves a
// skipped start to after the skipped hour.
func TestAWindowSaysWhetherItIsOpenAndUntilWhen(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) time.Time {
		t.Helper()
		v, err := time.ParseInLocation("2006-01-02 15:04", s, berlin)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		name              string
		start, end        string
		weekdays, exclude []string
		now               string
		open              bool
		change, excluded  string
	}{
		{"Friday's night window, on Saturday morning", "22:00", "04:00", []string{"Fri"}, nil, "2026-11-28 03:00", true, "2026-11-28 04:00", ""},
		{"Friday's night window, on Saturday noon", "22:00", "04:00", []string{"Fri"}, nil, "2026-11-28 12:00", false, "2026-12-04 22:00", ""},
		{"every day, whole days: never closes", "08:00", "08:00", nil, nil, "2026-11-28 12:00", true, "", ""},
		{"weekdays, whole days: closes on Saturday", "00:00", "00:00", []string{"Mon", "Tue", "Wed", "Thu", "Fri"}, nil, "2026-11-25 12:00", true, "2026-11-28 00:00", ""},
		{"an excluded day of the year", "20:00", "23:00", nil, []string{"Dec 24"}, "2026-12-24 21:00", false, "2026-12-25 20:00", "Dec 24"},
		{"an excluded date, another year", "20:00", "23:00", nil, []string{"2025-12-24"}, "2026-12-24 21:00", true, "2026-12-24 23:00", ""},
		{"a start daylight saving skips", "02:30", "05:00", nil, nil, "2026-03-29 01:00", false, "2026-03-29 03:30", ""},
	} {
		w, err := New(tc.start, tc.end, tc.weekdays, tc.exclude, "Europe/Berlin")
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		s := w.At(at(tc.now))
		if s.Open != tc.open {
			t.Errorf("%s: open %v, want %v", tc.name, s.Open, tc.open)
		}
		switch {
		case tc.change == "" && !s.Change.IsZero():
			t.Errorf("%s: changes at %s, want never", tc.name, s.Change)
		case tc.change != "" && !s.Change.Equal(at(tc.change)):
			t.Errorf("%s: changes at %s, want %s", tc.name, s.Change.In(berlin), tc.change)
		}
		got := ""
		if s.Excluded != nil {
			got = s.Excluded.Noon().Format("Jan 2")
		}
		if got != tc.excluded {
			t.Errorf("%s: excluded %q, want %q", tc.name, got, tc.excluded)
		}
	}
}

// TestABadWindowNamesItsField: each field's error names it.
func TestABadWindowNamesItsField(t *testing.T) {
	for _, tc := range []struct {
		start, end, tz    string
		weekdays, exclude []string
		want              string
	}{
		{"25:00", "04:00", "", nil, nil, `start: "25:00"`},
		{"22:00", "4:00", "", nil, nil, `end: "4:00"`},
		{"22:00", "04:00", "", []string{"Mon", "Fry"}, nil, `weekdays[1]: unknown weekday "Fry"`},
		{"22:00", "04:00", "", nil, []string{"Dec 32"}, `exclude[0]: "Dec 32"`},
		{"22:00", "04:00", "Mars/Olympus", nil, nil, `timeZone: unknown time zone "Mars/Olympus"`},
	} {
		_, err := New(tc.start, tc.end, tc.weekdays, tc.exclude, tc.tz)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want an error with %q, got %v", tc.want, err)
		}
	}
}
