//go:build e2e

package localcluster

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/pitstop-dev/pitstop/internal/release/image"
)

// probeImage is the name the test gives the image of ./testdata/probe.
const probeImage = "localhost/pitstop-localcluster/probe:test"

// probeReport is what ./testdata/probe serves at /.
type probeReport struct {
	Host          string `json:"host"`
	ServerVersion string `json:"serverVersion"`
	User          string `json:"user"`
}

// TestRealNodeRunsPods starts a cluster with one simulated worker and the
// real node, runs a pod from a locally built image on the real node, and
// checks what only a real node does: the kubelet runs the container and
// calls its probes, the pod reaches the API server at the kubernetes
// Service with its service account token, this machine reaches the pod at
// its pod IP, and the API server reaches it through its Service. After Stop
// nothing of the node is left: no process, cgroup, mount, bridge or
// iptables chain. hack/ensure-deps.sh installs what the node needs, so a
// missing piece fails the test instead of skipping it.
func TestRealNodeRunsPods(t *testing.T) {
	archive := make(chan string, 1)
	go func() { archive <- buildProbeImage(t) }() // compiles while the cluster starts

	opts := DefaultOptions()
	opts.ControlPlaneNodes = 0
	opts.Workers = 1
	opts.RealNode = true
	started := time.Now()
	c := startForTest(t, opts)
	t.Logf("cluster with a real node started in %s", time.Since(started).Round(time.Millisecond))
	ctx := t.Context()

	node, err := c.Clientset.CoreV1().Nodes().Get(ctx, RealNodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if runtime := node.Status.NodeInfo.ContainerRuntimeVersion; !strings.HasPrefix(runtime, "containerd://") {
		t.Errorf("node %s runs %q, want containerd", RealNodeName, runtime)
	}
	if _, ok := node.Annotations[AnnotationKwokNode]; ok {
		t.Errorf("node %s carries %s: kwok would play its kubelet", RealNodeName, AnnotationKwokNode)
	}

	path := <-archive
	if t.Failed() {
		t.FailNow()
	}
	if err := c.LoadImage(ctx, path); err != nil {
		t.Fatal(err)
	}
	podCreated := time.Now()
	createProbe(t, c, "probe")
	var pod *corev1.Pod
	awaitCondition(t, 60*time.Second, func() error {
		p, err := c.Clientset.CoreV1().Pods("probe").Get(ctx, "probe", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				pod = p
				return nil
			}
		}
		return fmt.Errorf("pod probe/probe is not Ready: phase %s, %s", p.Status.Phase, containerStates(p))
	})
	t.Logf("pod Ready %s after it was created", time.Since(podCreated).Round(time.Millisecond))
	if pod.Spec.NodeName != RealNodeName {
		t.Fatalf("pod runs on %s, want %s", pod.Spec.NodeName, RealNodeName)
	}

	want := probeReport{
		Host:          "https://" + net.JoinHostPort(kubernetesServiceIP, "443"),
		ServerVersion: Version,
		User:          "system:serviceaccount:probe:default",
	}
	// From this machine, at the pod's IP.
	resp, err := http.Get("http://" + net.JoinHostPort(pod.Status.PodIP, "8080") + "/")
	if err != nil {
		t.Fatalf("reaching the pod at %s: %v", pod.Status.PodIP, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	checkReport(t, "from this machine", body, want)
	// From the API server, through the Service, as it calls webhooks.
	body, err = c.Clientset.CoreV1().Services("probe").ProxyGet("http", "probe", "80", "/", nil).DoRaw(ctx)
	if err != nil {
		t.Fatalf("reaching the pod through its Service from the API server: %v", err)
	}
	checkReport(t, "through the Service", body, want)

	pids, dir, cgroup := c.PIDs(), c.Dir, c.realNode.cgroup
	stopping := time.Now()
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("stopped in %s", time.Since(stopping).Round(time.Millisecond))
	assertGone(t, pids, dir)
	assertNoProcessUses(t, dir)
	assertRealNodeGone(t, dir, cgroup)
}

// createProbe creates the probe's pod on the real node and a Service in
// front of it. The ServiceAccount admission plugin refuses pods until the
// namespace's default ServiceAccount exists, so creation is retried.
func createProbe(t *testing.T, c *Cluster, ns string) {
	t.Helper()
	ctx := t.Context()
	labels := map[string]string{"app": "probe"}
	if _, err := c.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"},
		Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	if _, err := c.Clientset.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	probe := func(path string) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(8080)}},
			PeriodSeconds: 1,
		}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe", Labels: labels},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{LabelRealNode: "true"},
			Containers: []corev1.Container{{
				Name:            "probe",
				Image:           probeImage,
				ImagePullPolicy: corev1.PullNever,
				Ports:           []corev1.ContainerPort{{ContainerPort: 8080}},
				ReadinessProbe:  probe("/readyz"),
				LivenessProbe:   probe("/healthz"),
			}},
		},
	}
	awaitCondition(t, 30*time.Second, func() error {
		_, err := c.Clientset.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		return err
	})
}

// containerStates describes why a pod's containers are not ready yet.
func containerStates(p *corev1.Pod) string {
	var states []string
	for _, s := range p.Status.ContainerStatuses {
		switch {
		case s.State.Waiting != nil:
			states = append(states, fmt.Sprintf("%s waiting: %s %s", s.Name, s.State.Waiting.Reason, s.State.Waiting.Message))
		case s.State.Terminated != nil:
			states = append(states, fmt.Sprintf("%s terminated: %s %s", s.Name, s.State.Terminated.Reason, s.State.Terminated.Message))
		default:
			states = append(states, fmt.Sprintf("%s running, ready=%t", s.Name, s.Ready))
		}
	}
	return strings.Join(states, "; ")
}

func checkReport(t *testing.T, how string, body []byte, want probeReport) {
	t.Helper()
	var got probeReport
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("%s: the probe answered %q: %v", how, body, err)
	}
	if got != want {
		t.Errorf("%s: the probe reports %+v, want %+v", how, got, want)
	}
}

// buildProbeImage compiles ./testdata/probe and packs it as probeImage.
func buildProbeImage(t *testing.T) string {
	dir := t.TempDir()
	binary := filepath.Join(dir, "probe")
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w -buildid=", "-o", binary, "./testdata/probe")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("building ./testdata/probe: %v\n%s", err, out)
		return ""
	}
	repo, tag, _ := strings.Cut(probeImage, ":")
	archive := filepath.Join(dir, "probe.tar")
	_, err := image.Write(image.Options{
		Repository: repo, Tag: tag, Version: tag, Revision: "test",
		Created:  time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC),
		Binaries: []image.Binary{{Platform: v1.Platform{OS: "linux", Architecture: runtime.GOARCH}, Path: binary}},
	}, archive)
	if err != nil {
		t.Errorf("packing the probe image: %v", err)
	}
	return archive
}

// assertRealNodeGone fails if anything of the real node is left on the
// machine: its cgroups, mounts under the cluster's directory, the bridge, or
// the chains kube-proxy and the kubelet add.
func assertRealNodeGone(t *testing.T, dir, cgroup string) {
	t.Helper()
	if left, _ := filepath.Glob("/sys/fs/cgroup/*/" + cgroup); len(left) > 0 {
		t.Errorf("cgroups left after Stop: %v", left)
	}
	mounts, err := readMounts()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mounts {
		if strings.HasPrefix(m.point, dir) {
			t.Errorf("mount left after Stop: %s (%s)", m.point, m.fsType)
		}
	}
	if _, err := net.InterfaceByName(realNodeBridge); err == nil {
		t.Errorf("bridge %s left after Stop", realNodeBridge)
	}
	for _, tool := range []string{"iptables-save", "ip6tables-save"} {
		out, err := exec.Command(tool).Output()
		if err != nil {
			t.Errorf("%s: %v", tool, err)
			continue
		}
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, "KUBE-") {
				t.Errorf("%s still lists %q after Stop", tool, line)
			}
		}
	}
}
