package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/pitstop-dev/pitstop/internal/localcluster"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

func TestIsKubectlPlugin(t *testing.T) {
	for _, tc := range []struct {
		path string
		want bool
	}{
		{"kubectl-pitstop", true},
		{"/usr/local/bin/kubectl-pitstop", true},
		{"kubectl-pitstop.exe", true},
		{"kubectl-pitstop.EXE", true},
		{"pitstop", false},
		{"/usr/local/bin/pitstop", false},
		{"pitstop.exe", false},
		{"kubectl-pitstop-linux-amd64", false}, // kubectl would call it `kubectl pitstop-linux-amd64`
		{"kubectl-pitstop.sh", false},
	} {
		if got := isKubectlPlugin(tc.path); got != tc.want {
			t.Errorf("isKubectlPlugin(%q) = %v, want %v", tc.path, got, tc.want)
		}
	}
}

// pluginVersion is the version the plugin test links into its binary, so
// that what kubectl prints can only come from that binary.
const pluginVersion = "v0.0.0-kubectl-plugin-test"

// TestKubectlPlugin builds pitstop as kubectl-pitstop and runs it through
// the kubectl `make tools` builds, as an engineer does once the binary is on
// their PATH: `kubectl plugin list` finds it, `kubectl pitstop version`
// prints its version, help speaks of "kubectl pitstop", and `kubectl
// pitstop explain node` reads the cluster of $KUBECONFIG, at the --context
// given after the plugin's name.
func TestKubectlPlugin(t *testing.T) {
	exe := ""
	if runtime.GOOS == "windows" {
		exe = ".exe"
	}
	kubectlPath := filepath.Join(localcluster.DefaultBinDir(), "kubectl"+exe)
	if _, err := os.Stat(kubectlPath); err != nil {
		t.Fatalf("no kubectl to run the plugin through (%v): `make tools` builds it", err)
	}
	pluginDir := t.TempDir()
	plugin := filepath.Join(pluginDir, pluginName+exe)
	build := exec.Command("go", "build", "-o", plugin,
		"-ldflags", "-X github.com/pitstop-dev/pitstop/internal/version.Version="+pluginVersion, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -o %s: %v\n%s", plugin, err, out)
	}

	// The cluster is envtest's, as the "envtest" context of a kubeconfig
	// whose current context points where nothing listens.
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Clusters["nowhere"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	cfg.Contexts["nowhere"] = &clientcmdapi.Context{Cluster: "nowhere", AuthInfo: "envtest"}
	cfg.CurrentContext = "nowhere"
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}
	testutil.Create(t, env.Client, testutil.Node("plugin-0"))

	// kubectl finds plugins on the PATH. Only the plugin's directory is on
	// it: a kubectl-pitstop elsewhere (bin/ after `make build`) would
	// overshadow it, which `kubectl plugin list` reports as an error.
	environ := append(os.Environ(), "PATH="+pluginDir, "KUBECONFIG="+kubeconfig)
	kubectl := func(args ...string) (stdout, stderr string, err error) {
		t.Helper()
		cmd := exec.Command(kubectlPath, args...)
		cmd.Env = environ
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err = cmd.Run()
		return out.String(), errOut.String(), err
	}
	for _, tc := range []struct {
		args []string
		want string // part of stdout
	}{
		{[]string{"plugin", "list"}, plugin},
		{[]string{"pitstop", "version"}, "pitstop " + pluginVersion + " "},
		{[]string{"pitstop", "--help"}, "kubectl pitstop [command]"},
		{[]string{"pitstop", "explain", "--help"}, "kubectl pitstop explain (node|profile|machine) NAME"},
		{[]string{"pitstop", "explain", "node", "plugin-0", "--context", "envtest"}, "Node plugin-0: "},
	} {
		stdout, stderr, err := kubectl(tc.args...)
		if err != nil {
			t.Errorf("kubectl %s: %v\n%s", strings.Join(tc.args, " "), err, stderr)
			continue
		}
		if !strings.Contains(stdout, tc.want) {
			t.Errorf("kubectl %s prints no %q:\n%s", strings.Join(tc.args, " "), tc.want, stdout)
		}
	}

	// Without --context, the kubeconfig's current context is the one used.
	if _, stderr, err := kubectl("pitstop", "explain", "node", "plugin-0"); err == nil || !strings.Contains(stderr, "127.0.0.1:1") {
		t.Errorf("kubectl pitstop explain at the current context: err %v, stderr %q; want a failure to reach 127.0.0.1:1", err, stderr)
	}
	// A context the kubeconfig lacks is a usage error naming the flag.
	if _, stderr, err := kubectl("pitstop", "explain", "node", "plugin-0", "--context=elsewhere"); !isExitCode(err, 2) || !strings.Contains(stderr, `invalid value "elsewhere" for flag --context`) {
		t.Errorf("kubectl pitstop explain --context=elsewhere: err %v, stderr %q; want exit 2 naming --context", err, stderr)
	}
}

// isExitCode reports whether err is a process's exit with code.
func isExitCode(err error, code int) bool {
	exitErr, ok := err.(*exec.ExitError)
	return ok && exitErr.ExitCode() == code
}
