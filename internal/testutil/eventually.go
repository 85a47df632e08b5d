package testutil

import (
	"testing"
	"time"
)

// Eventually calls check every interval until it returns nil, and fails the
// test with check's last error if that has not happened within timeout.
func Eventually(t testing.TB, timeout, interval time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still not true after %s: %v", timeout, err)
		}
		time.Sleep(interval)
	}
}
