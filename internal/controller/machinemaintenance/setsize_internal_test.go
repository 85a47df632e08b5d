package machinemaintenance

import (
	"maps"
	"testing"
)

func TestTakeBack(t *testing.T) {
	const a, b = "surge.pitstop.dev/a", "surge.pitstop.dev/b"
	for _, tc := range []struct {
		name     string
		replicas int32
		surges   map[string]string
		key      string
		want     int32
		changed  map[string]string
	}{
		{"takes back its one replica", 4, map[string]string{a: "3"}, a, 3, nil},
		{"takes back the first of two surges, the later one's size before drops", 5, map[string]string{a: "3", b: "4"}, a, 4, map[string]string{b: "3"}},
		{"then the second, back to the size before both", 4, map[string]string{b: "3"}, b, 3, nil},
		{"takes back the later of two surges first", 5, map[string]string{a: "3", b: "4"}, b, 4, nil},
		{"takes nothing when the set was scaled down to its size by hand", 3, map[string]string{a: "3"}, a, 3, nil},
		{"takes nothing when the set was scaled below its size", 1, map[string]string{a: "3"}, a, 1, nil},
		{"keeps what a user added since", 7, map[string]string{a: "3"}, a, 6, nil},
		{"keeps the other surge's replica when the set was scaled down by one", 4, map[string]string{a: "3", b: "4"}, a, 4, map[string]string{b: "3"}},
		{"a size before that is not a number: the others' sizes before are the floor", 2, map[string]string{a: "x", b: "1"}, a, 2, nil},
		{"a size before that is not a number, alone: one replica less", 4, map[string]string{a: "x"}, a, 3, nil},
		{"never below zero", 0, map[string]string{a: "x"}, a, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, changed := takeBack(tc.replicas, tc.surges, tc.key)
			if got != tc.want {
				t.Errorf("replicas %d, want %d", got, tc.want)
			}
			if len(changed) != 0 || len(tc.changed) != 0 {
				if !maps.Equal(changed, tc.changed) {
					t.Errorf("changed %v, want %v", changed, tc.changed)
				}
			}
		})
	}
}
