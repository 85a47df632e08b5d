//go:build linux

package bench

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pitstop-dev/pitstop/internal/localcluster"
	"github.com/pitstop-dev/pitstop/internal/release/image"
	"github.com/pitstop-dev/pitstop/internal/scheme"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

var installRounds = flag.Int("install-rounds", 5, "how many times BenchmarkHelmInstall installs and uninstalls the chart; the median is reported")

// BenchmarkHelmInstall measures, on a local cluster with a real node, the
// time from `helm install` to pitstop Ready: the Deployment's one replica
// scheduled onto the real node, its container started by the kubelet from
// the image, and its readiness probe passing (informers synced, webhook
// serving). Each round uninstalls and waits until nothing is left. It also
// reports the image's size: what a node pulls for its platform.
func BenchmarkHelmInstall(b *testing.B) {
	archive, summary := buildImage(b)
	for _, p := range summary.Platforms {
		b.Logf("image %s: %.1f MiB compressed (manifest, config, layer)", p.Platform, float64(p.CompressedSize)/(1<<20))
	}
	b.Logf("archive %s: %.1f MiB", filepath.Base(archive), float64(summary.ArchiveSize)/(1<<20))

	opts := localcluster.DefaultOptions()
	opts.ControlPlaneNodes, opts.Workers = 0, 2
	opts.RealNode = true
	cluster, err := localcluster.Start(b.Context(), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := cluster.Stop(); err != nil {
			b.Error(err)
		}
	})
	if err := cluster.LoadImage(b.Context(), archive); err != nil {
		b.Fatal(err)
	}
	c, err := client.New(cluster.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		b.Fatal(err)
	}
	testutil.Namespace(b, c, testutil.ChartNamespace)
	kubeconfig := "--kubeconfig=" + cluster.KubeconfigPath
	chart := filepath.Join(repoRoot(b), "charts", "pitstop")

	var ready, started []time.Duration
	for range b.N {
		for round := range *installRounds {
			began := time.Now()
			if out, err := testutil.Helm(b, "install", "pitstop", chart, kubeconfig, "--namespace", testutil.ChartNamespace,
				"--set", "image.tag=bench", "--set", "replicas=1", "--set-string", "nodeSelector.localcluster\\.pitstop\\.dev/real-node=true"); err != nil {
				b.Fatalf("%v\n%s", err, out)
			}
			pod := awaitReadyManager(b, c, 3*time.Minute)
			ready = append(ready, time.Since(began))
			started = append(started, containerStarted(pod).Sub(began))
			if out, err := testutil.Helm(b, "uninstall", "pitstop", kubeconfig, "--namespace", testutil.ChartNamespace, "--wait"); err != nil {
				b.Fatalf("%v\n%s", err, out)
			}
			awaitNoManagerPods(b, c, time.Minute)
			b.Logf("round %d: Ready after %s (container started after %s)", round+1, ready[len(ready)-1].Round(time.Millisecond), started[len(started)-1].Round(time.Second))
		}
	}
	b.ReportMetric(median(ready).Seconds(), "s/install-to-ready")
	b.ReportMetric(float64(summary.Platforms[0].CompressedSize)/(1<<20), "MiB/image-amd64")
	b.ReportMetric(0, "ns/op")
	b.Logf("install → Ready: %s", formatRuns(ready))
}

// buildImage builds pitstop for this machine's platform and packs it as
// `make image` does, tagged bench.
func buildImage(b *testing.B) (string, image.Summary) {
	b.Helper()
	dir := b.TempDir()
	bin := filepath.Join(dir, "pitstop")
	build := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w -buildid=", "-o", bin, "./cmd/pitstop")
	build.Dir = repoRoot(b)
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	archive := filepath.Join(dir, "pitstop-image.tar")
	summary, err := image.Write(image.Options{
		Repository: "ghcr.io/pitstop-dev/pitstop", Tag: "bench", Version: "bench", Revision: "bench",
		Created:  time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		Binaries: []image.Binary{{Platform: v1.Platform{OS: "linux", Architecture: runtime.GOARCH}, Path: bin}},
	}, archive)
	if err != nil {
		b.Fatal(err)
	}
	return archive, summary
}

func repoRoot(b *testing.B) string {
	b.Helper()
	root, ok := localcluster.RepoRoot()
	if !ok {
		b.Fatal("not in a pitstop checkout")
	}
	return root
}

// awaitReadyManager waits until the chart's manager pod is Ready.
func awaitReadyManager(b *testing.B, c client.Client, timeout time.Duration) *corev1.Pod {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for ; time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		d := &appsv1.Deployment{}
		if err := c.Get(b.Context(), client.ObjectKey{Namespace: testutil.ChartNamespace, Name: "pitstop"}, d); err != nil || d.Status.ReadyReplicas < 1 {
			continue
		}
		pods := &corev1.PodList{}
		if err := c.List(b.Context(), pods, client.InNamespace(testutil.ChartNamespace), client.MatchingLabels{"app.kubernetes.io/component": "manager"}); err != nil {
			b.Fatal(err)
		}
		for i := range pods.Items {
			if isReady(&pods.Items[i]) {
				return &pods.Items[i]
			}
		}
	}
	b.Fatalf("pitstop was not Ready within %s", timeout)
	return nil
}

func isReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// containerStarted is when the kubelet started the manager's container.
func containerStarted(p *corev1.Pod) time.Time {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running != nil {
			return cs.State.Running.StartedAt.Time
		}
	}
	return time.Time{}
}

// awaitNoManagerPods waits until the uninstalled manager's pods are gone.
func awaitNoManagerPods(b *testing.B, c client.Client, timeout time.Duration) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for ; time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		pods := &corev1.PodList{}
		if err := c.List(b.Context(), pods, client.InNamespace(testutil.ChartNamespace)); err != nil {
			b.Fatal(err)
		}
		if len(pods.Items) == 0 {
			return
		}
	}
	b.Fatalf("pitstop's pods were still there %s after helm uninstall", timeout)
}
