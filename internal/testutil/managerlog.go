package testutil

import (
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
)

// tailLines is how many of a manager's last log lines a failed test shows.
const tailLines = 40

// ManagerLogger keeps the manager's log lines. When the test fails, it writes
// them all to a file and logs the file's name and the last tailLines
// lines, so that the test's own messages are not lost among thousands of
// the manager's in a long output. Its lines are never logged to t
// directly: some of controller-runtime's goroutines outlive the manager's
// Start and may still log, which t does not allow once the test is over.
func ManagerLogger(t testing.TB) logr.Logger {
	var mu sync.Mutex
	var lines []string
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		mu.Lock()
		kept := slices.Clone(lines)
		mu.Unlock()
		f, err := os.CreateTemp("", "pitstop-manager-*.log")
		if err == nil {
			_, err = f.WriteString(strings.Join(kept, "\n") + "\n")
			err = errors.Join(err, f.Close())
		}
		if err != nil {
			t.Logf("writing the manager's log: %v", err)
		} else {
			t.Logf("the manager's log (%d lines): %s", len(kept), f.Name())
		}
		t.Logf("its last %d lines:\n%s", min(tailLines, len(kept)), strings.Join(kept[max(0, len(kept)-tailLines):], "\n"))
	})
	return funcr.New(func(prefix, args string) {
		line := time.Now().UTC().Format("15:04:05.000 ") + strings.TrimSpace(prefix+" "+args)
		mu.Lock()
		lines = append(lines, line)
		mu.Unlock()
	}, funcr.Options{})
}
