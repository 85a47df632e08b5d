//go:build fault && linux

package fault

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/pitstop-dev/pitstop/internal/localcluster"
)

// previous names the commit whose pitstop TestFaultUpgradeMidDrain starts
// from: the last one before issue 38's work.
var previous = flag.String("previous", "0d7dd9c", "the commit of the pitstop build that TestFaultUpgradeMidDrain upgrades from")

// buildPrevious builds pitstop from the commit -previous names, from a
// worktree of this clone in a temporary directory, which it removes again.
// It skips the test only when that commit is not in the clone (a shallow
// clone: CI's clones have the whole history).
func buildPrevious(t *testing.T) string {
	t.Helper()
	root, ok := localcluster.RepoRoot()
	if !ok {
		t.Fatal("the fault tests run from pitstop's repository")
	}
	if err := exec.Command("git", "-C", root, "cat-file", "-e", *previous+"^{commit}").Run(); err != nil {
		t.Skipf("commit %s (-previous) is not in this clone, so there is no previous build to upgrade from: fetch the whole history (git fetch --unshallow)", *previous)
	}
	dir := filepath.Join(t.TempDir(), "previous")
	run := func(dir string, name string, args ...string) {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
	}
	run(root, "git", "worktree", "add", "--detach", dir, *previous)
	t.Cleanup(func() { _ = exec.Command("git", "-C", root, "worktree", "remove", "--force", dir).Run() })
	bin := filepath.Join(t.TempDir(), "pitstop-previous")
	run(dir, "go", "build", "-o", bin, "./cmd/pitstop")
	if _, err := os.Stat(bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestFaultUpgradeMidDrain starts both managers from the previous build
// (-previous, 0d7dd9c by default: the last build that landed) and, once a drain has evicted pods and
// has more to evict, replaces the leader with this build as a rolling
// update of its Deployment would (SIGTERM, then the new binary); then the
// other, once a drain is again mid-eviction. Each replacement hands the
// drains in flight over across versions: the run must end with every
// worker maintained once, the budget and every PodDisruptionBudget held,
// and nothing left behind.
func TestFaultUpgradeMidDrain(t *testing.T) {
	prev := buildPrevious(t)
	r := newRigWith(t, rigOptions{binaries: []string{prev, prev}})
	r.maintainAll()
	for i := range r.managers {
		// The leader first, then the other.
		next := r.awaitLeader()
		if next.binary == binary {
			next = r.managers[1-slices.Index(r.managers, next)]
		}
		moment := "every worker is through"
		if r.watch.through() < len(r.opts.nodes) {
			moment = r.awaitMidEviction()
		}
		t.Logf("upgrade %d: replacing %s (previous build; leading: %v) with this build while %s", i+1, next.name, next == r.leader(), moment)
		next.replace(binary)
		// The replaced manager serves the webhook again before the next
		// one goes, as a rolling update waits for a pod to be ready.
		awaitWebhook(t)
		time.Sleep(time.Second)
	}
	for _, p := range r.managers {
		if p.binary != binary {
			t.Fatalf("%s still runs %s", p.name, p.binary)
		}
	}
	r.finish(runTimeout())
}
