package localcluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The real node's share of the machine: a bridge, a cgroup subtree in every
// hierarchy, mounts under the cluster's directory and kube-proxy's iptables
// chains. The bridge's name and address and kube-proxy's chains are the same
// for every cluster, so one cluster a machine has a real node at a time.

// realNodeLockPath is the file whose lock a cluster holds while it has a
// real node. The kernel drops the lock when its holder dies, however it dies.
const realNodeLockPath = "/run/pitstop-localcluster-real-node.lock"

// lockRealNode takes the machine's real-node lock, waiting while another
// cluster holds it, until ctx ends. The returned file holds the lock until it
// is closed.
func lockRealNode(ctx context.Context) (*os.File, error) {
	f, err := os.OpenFile(realNodeLockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the real node's lock: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", realNodeLockPath, err)
		}
		select {
		case <-ctx.Done():
			holder, _ := os.ReadFile(realNodeLockPath)
			f.Close()
			return nil, fmt.Errorf("waiting for the real node of the local cluster of process %s to stop: %w", strings.TrimSpace(string(holder)), ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// createBridge makes the real node's bridge with the node's address before
// anything listens on it; the CNI bridge plugin then attaches pods to it.
func createBridge() error {
	for _, args := range [][]string{
		{"link", "add", realNodeBridge, "type", "bridge"},
		{"addr", "add", realNodeIP + "/" + strconv.Itoa(realNodePrefixLen), "dev", realNodeBridge},
		{"link", "set", realNodeBridge, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// deleteBridge removes the bridge if it exists; the pods' veth ends go with
// their network namespaces.
func deleteBridge() error {
	if _, err := net.InterfaceByName(realNodeBridge); err != nil {
		return nil
	}
	if out, err := exec.Command("ip", "link", "del", realNodeBridge).CombinedOutput(); err != nil {
		return fmt.Errorf("ip link del %s: %w: %s", realNodeBridge, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// mount is one line of /proc/self/mountinfo.
type mount struct {
	point   string
	fsType  string
	options string // the super block's options, where v1 cgroups name their controllers
}

// readMounts returns the mounts this process sees.
func readMounts() ([]mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var mounts []mount
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		// id parent major:minor root point options [optional...] - type source super-options
		fields := strings.Fields(s.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if len(fields) < 5 || sep < 0 || sep+3 >= len(fields) {
			continue
		}
		mounts = append(mounts, mount{point: unescapeMountPath(fields[4]), fsType: fields[sep+1], options: fields[sep+3]})
	}
	return mounts, s.Err()
}

// unescapeMountPath undoes the octal escapes (\040 for a space) the kernel
// writes in mountinfo paths.
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmountUnder detaches every mount at or below dir, deepest first: pod
// network namespaces, container root file systems, the kubelet's volumes.
// A lazy unmount cannot fail on a busy mount, and the kernel frees it once
// the last process using it is gone.
func unmountUnder(dir string) error {
	return unmountWhere(func(point string) bool { return point == dir || strings.HasPrefix(point, dir+"/") })
}

// unmountWhere detaches the mounts whose path match, deepest first.
func unmountWhere(match func(point string) bool) error {
	mounts, err := readMounts()
	if err != nil {
		return err
	}
	var points []string
	for _, m := range mounts {
		if match(m.point) {
			points = append(points, m.point)
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	var errs []error
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// cgroupRoots returns the mount points of every cgroup hierarchy, v1 and v2,
// and which of them is the v1 cpuset hierarchy ("" if none).
func cgroupRoots() (roots []string, cpuset string, err error) {
	mounts, err := readMounts()
	if err != nil {
		return nil, "", err
	}
	for _, m := range mounts {
		if m.fsType != "cgroup" && m.fsType != "cgroup2" {
			continue
		}
		roots = append(roots, m.point)
		if m.fsType == "cgroup" && hasOption(m.options, "cpuset") {
			cpuset = m.point
		}
	}
	if len(roots) == 0 {
		return nil, "", errors.New("no cgroup file system is mounted")
	}
	return roots, cpuset, nil
}

func hasOption(options, want string) bool {
	for _, o := range strings.Split(options, ",") {
		if o == want {
			return true
		}
	}
	return false
}

// makeCgroups creates the real node's cgroup, name, and its shims child in
// every hierarchy. The kubelet puts its pods under name and containerd's
// shims join name/shims, so one subtree holds every process the node runs
// outside its own process groups. A new v1 cpuset has no CPUs or memory
// nodes and refuses processes, so those are copied from the root.
func makeCgroups(name string) error {
	roots, cpuset, err := cgroupRoots()
	if err != nil {
		return err
	}
	for _, root := range roots {
		for _, dir := range []string{filepath.Join(root, name), filepath.Join(root, name, "shims")} {
			if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("creating cgroup %s: %w", dir, err)
			}
			if root != cpuset {
				continue
			}
			for _, file := range []string{"cpuset.cpus", "cpuset.mems"} {
				value, err := os.ReadFile(filepath.Join(root, file))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(dir, file), value, 0o644); err != nil {
					return fmt.Errorf("setting %s of %s: %w", file, dir, err)
				}
			}
		}
	}
	return nil
}

// removeCgroups kills every process in the cgroup subtree name, in every
// hierarchy, and removes the subtree, deepest first. Killed processes leave
// their cgroup as they exit, so it retries until timeout.
func removeCgroups(name string, timeout time.Duration) error {
	roots, _, err := cgroupRoots()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for {
		var dirs []string
		for _, root := range roots {
			dir := filepath.Join(root, name)
			_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					dirs = append(dirs, path)
				}
				return nil
			})
		}
		if len(dirs) == 0 {
			return nil
		}
		for _, dir := range dirs {
			killProcsIn(dir)
		}
		// WalkDir lists parents first; remove children first.
		var busy error
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := syscall.Rmdir(dirs[i]); err != nil && !errors.Is(err, syscall.ENOENT) {
				busy = fmt.Errorf("removing cgroup %s: %w", dirs[i], err)
			}
		}
		if busy == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return busy
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// killProcsIn sends SIGKILL to every process of one cgroup.
func killProcsIn(dir string) {
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return
	}
	for _, field := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(field); err == nil && pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// staleCgroups returns the names of cluster cgroups left in the machine's
// hierarchies. Only a cluster with a real node makes them, and it holds the
// real-node lock while they exist, so under that lock every one is stale.
func staleCgroups() ([]string, error) {
	roots, _, err := cgroupRoots()
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var names []string
	for _, root := range roots {
		dirs, _ := filepath.Glob(filepath.Join(root, dirPrefix+"*"))
		for _, d := range dirs {
			if name := filepath.Base(d); !seen[name] {
				seen[name] = true
				names = append(names, name)
			}
		}
	}
	return names, nil
}

// watchdogScript runs in a shell of its own while the real node runs. Its
// standard input is a pipe only the cluster's process can write to, so the
// read returns when that process is gone, whether it stopped the cluster,
// crashed or was killed. It then kills every process left in the node's
// cgroups: the pods' containers and containerd's shims, which live outside
// the cluster's process groups and would otherwise outlast it. Mounts, the
// bridge and iptables chains hold no process; the next Start sweeps them.
const watchdogScript = `read -r _
for attempt in 1 2 3 4 5 6 7 8 9 10; do
  found=
  for procs in $(find "$@" -name cgroup.procs 2>/dev/null); do
    for pid in $(cat "$procs"); do kill -9 "$pid" 2>/dev/null; found=1; done
  done
  [ -z "$found" ] && exit 0
  sleep 0.2
done`

// startWatchdog starts the shell that kills the node's processes once this
// process is gone. The pipe's writing end stays in this process only (Go
// opens it close-on-exec), so no other child keeps the watchdog waiting.
func startWatchdog(cgroupName string) (*exec.Cmd, *os.File, error) {
	roots, _, err := cgroupRoots()
	if err != nil {
		return nil, nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	dirs := make([]string, len(roots))
	for i, root := range roots {
		dirs[i] = filepath.Join(root, cgroupName)
	}
	cmd := exec.Command("/bin/sh", append([]string{"-c", watchdogScript, "pitstop-localcluster-watchdog"}, dirs...)...)
	cmd.Stdin = r
	// A process group of its own keeps the terminal's Ctrl-C, which ends the
	// cluster's process, from ending the watchdog too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, nil, fmt.Errorf("starting the real node's watchdog: %w", err)
	}
	return cmd, w, nil
}

// removeShimSockets removes the sockets of containerd's shims for the
// containerd whose state directory is state. containerd 1.6 puts them under
// /run/containerd/s whatever its own paths, and a shim that is killed rather
// than shut down leaves its socket there; each task's bundle records the
// address in a file named address.
func removeShimSockets(state string) {
	files, _ := filepath.Glob(filepath.Join(state, "io.containerd.runtime.v2.task", "*", "*", "address"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		path := strings.TrimPrefix(strings.TrimSpace(string(data)), "unix://")
		if strings.HasPrefix(path, "/run/containerd/s/") {
			_ = os.Remove(path)
		}
	}
}
