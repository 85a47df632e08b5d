package testutil

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing"
	"time"
)

// heapObjects is the runtime metric of the bytes held by live and not yet
// swept heap objects; reading it does not stop the world.
const heapObjects = "/memory/classes/heap/objects:bytes"

// BoundHeap watches the Go heap of the test process until the end of the
// test and panics, ending the test binary, once it holds more than limit
// bytes. A test that some input cannot make pitstop allocate without end
// fails this way when the bound is broken, instead of running the machine
// out of memory: t.Fatal cannot stop a goroutine that is still allocating.
// The processes the test binary started (the Env's etcd and
// kube-apiserver) are killed first, since the panic skips their Stop.
func BoundHeap(t testing.TB, limit uint64) {
	t.Helper()
	done := make(chan struct{})
	stopped := make(chan struct{})
	name := t.Name()
	go func() {
		defer close(stopped)
		sample := []metrics.Sample{{Name: heapObjects}}
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			metrics.Read(sample)
			if held := sample[0].Value.Uint64(); held > limit {
				killChildren()
				panic(fmt.Sprintf("%s: the heap holds %d MiB, more than the %d MiB the test allows", name, held>>20, limit>>20))
			}
		}
	}()
	t.Cleanup(func() {
		close(done)
		<-stopped
	})
}

// killChildren kills the processes whose parent is this one, as Linux's
// /proc lists them (elsewhere it finds none). It does not wait: it runs
// while the heap grows.
func killChildren() {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	self := strconv.Itoa(os.Getpid())
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (command) state ppid ...: the command may hold spaces and
		// parentheses, the fields after its last ")" do not.
		after := stat[bytes.LastIndexByte(stat, ')')+1:]
		if fields := strings.Fields(string(after)); len(fields) > 1 && fields[1] == self {
			if p, err := os.FindProcess(pid); err == nil {
				_ = p.Kill()
			}
		}
	}
}
