package profile

import (
	"testing"
	"time"
)

func TestRetryAfterDoublesUpToFiveMinutes(t *testing.T) {
	for attempt, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 9: 256 * time.Second, 10: 5 * time.Minute, 100: 5 * time.Minute} {
		if got := retryAfter(attempt); got != want {
			t.Errorf("retryAfter(%d) = %s, want %s", attempt, got, want)
		}
	}
}
