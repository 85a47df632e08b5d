//go:build e2e && linux

package install

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/localcluster"
	"github.com/pitstop-dev/pitstop/internal/scheme"
)

// trySection is the part of docs/install.md that TestInstallDocsOnARealNode
// follows word for word.
const trySection = "## 2c. On this machine, to try it"

// TestInstallDocsOnARealNode runs the two command blocks of docs/install.md's
// "On this machine" section as a user pastes them: the first starts a local
// cluster with a real node (a kubelet and containerd) and loads the image
// `make image` built; the second installs the chart, waits for the pod the
// kubelet runs from that image, has it drain a node, and uninstalls. Between
// the lines it checks what a user cannot see at a glance: the pod ran on
// the real node as a non-root user, the API server reached its webhook
// through the chart's Service, and nothing of pitstop is left behind.
func TestInstallDocsOnARealNode(t *testing.T) {
	first, second := docBlocks(t)
	root := repoPath(t)
	run(t, root, os.Environ(), first[0])

	dev := startBackground(t, root, first[1])
	environ := dev.awaitEnv(t, 5*time.Minute)
	c := clientFor(t, environ)

	var helmStarted time.Time
	for _, line := range second {
		if strings.HasPrefix(line, "helm install") {
			helmStarted = time.Now()
		}
		run(t, root, environ, line)
		switch {
		case strings.Contains(line, "rollout status"):
			t.Logf("helm install → Deployment rolled out: %.1fs", time.Since(helmStarted).Seconds())
			assertPodOnTheRealNode(t, c)
			assertWebhookReached(t, c)
			assertAggregated(t, c)
		case strings.HasPrefix(line, "kubectl delete -f config/samples/nodemaintenance.yaml"):
			assertUncordoned(t, c, "worker-003")
		case strings.HasPrefix(line, "helm uninstall"):
			assertNothingLeft(t, c)
		}
	}
	dev.stop(t)
}

// docBlocks returns the lines of the first two ```sh blocks of the
// section, continuation lines joined.
func docBlocks(t *testing.T) (first, second []string) {
	t.Helper()
	data, err := os.ReadFile(repoPath(t, "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	i := strings.Index(doc, trySection)
	if i < 0 {
		t.Fatalf("docs/install.md has no section %q", trySection)
	}
	var blocks [][]string
	for _, part := range strings.Split(doc[i:], "```sh\n")[1:] {
		body, _, _ := strings.Cut(part, "```")
		var lines []string
		for _, l := range strings.Split(strings.ReplaceAll(body, "\\\n", " "), "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
				lines = append(lines, l)
			}
		}
		blocks = append(blocks, lines)
		if len(blocks) == 2 {
			break
		}
	}
	if len(blocks) != 2 || len(blocks[0]) != 2 || len(blocks[1]) < 5 {
		t.Fatalf("the section %q does not have its two blocks as this test knows them: %q", trySection, blocks)
	}
	return blocks[0], blocks[1]
}

// run runs one documented line with bash, as a user's shell would.
func run(t *testing.T, dir string, environ []string, line string) {
	t.Helper()
	t.Logf("$ %s", line)
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", line)
	cmd.Dir, cmd.Env = dir, environ
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", line, err, out)
	}
}

// background is a documented command left running, as in its own terminal.
type background struct {
	cmd    *exec.Cmd
	lines  chan string
	output strings.Builder
}

func startBackground(t *testing.T, dir, line string) *background {
	t.Helper()
	t.Logf("$ %s &", line)
	b := &background{lines: make(chan string, 100)}
	b.cmd = exec.Command("bash", "-c", "exec "+line)
	b.cmd.Dir = dir
	b.cmd.Stderr = os.Stderr
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := b.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			b.lines <- s.Text()
		}
		close(b.lines)
	}()
	t.Cleanup(func() {
		if b.cmd.ProcessState == nil {
			_ = b.cmd.Process.Signal(syscall.SIGINT)
			_ = b.cmd.Wait()
		}
	})
	return b
}

var exportLine = regexp.MustCompile(`^\s*export KUBECONFIG=(\S+) PATH=(\S+):\$PATH$`)

// awaitEnv reads the command's output until it prints the export line, and
// returns the environment pasting that line gives.
func (b *background) awaitEnv(t *testing.T, timeout time.Duration) []string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case line, ok := <-b.lines:
			if !ok {
				t.Fatalf("the command ended before it printed its export line:\n%s", b.output.String())
			}
			b.output.WriteString(line + "\n")
			if m := exportLine.FindStringSubmatch(line); m != nil {
				go func() {
					for range b.lines {
					}
				}()
				return append(os.Environ(), "KUBECONFIG="+m[1], "PATH="+m[2]+":"+os.Getenv("PATH"))
			}
		case <-deadline:
			t.Fatalf("no export line within %s:\n%s", timeout, b.output.String())
		}
	}
}

// stop presses Ctrl-C and waits for the command to clean up.
func (b *background) stop(t *testing.T) {
	t.Helper()
	if err := b.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- b.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("after Ctrl-C: %v", err)
		}
	case <-time.After(time.Minute):
		t.Error("the command did not stop within a minute of Ctrl-C")
	}
}

func clientFor(t *testing.T, environ []string) client.Client {
	t.Helper()
	var kubeconfig string
	for _, e := range environ {
		if v, ok := strings.CutPrefix(e, "KUBECONFIG="); ok {
			kubeconfig = v
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// assertPodOnTheRealNode checks that the kubelet of the real node runs
// pitstop's pod, ready and as the image's non-root user.
func assertPodOnTheRealNode(t *testing.T, c client.Client) {
	t.Helper()
	pods := &corev1.PodList{}
	if err := c.List(t.Context(), pods, client.InNamespace(namespace), client.MatchingLabels{"app.kubernetes.io/component": "manager"}); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 {
		t.Fatalf("%d pitstop pods, want 1", len(pods.Items))
	}
	pod := pods.Items[0]
	if pod.Spec.NodeName != localcluster.RealNodeName || pod.Status.PodIP == "" {
		t.Errorf("pod %s runs on %q at %q, want the real node with a pod IP", pod.Name, pod.Spec.NodeName, pod.Status.PodIP)
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if !cs.Ready || cs.RestartCount != 0 || cs.ImageID == "" {
			t.Errorf("container %s: ready %v, %d restarts, image %q", cs.Name, cs.Ready, cs.RestartCount, cs.ImageID)
		}
	}
}

// assertWebhookReached creates a NodeMaintenance for a node that does not
// exist: only pitstop's webhook, reached through the chart's Service,
// refuses it.
func assertWebhookReached(t *testing.T, c client.Client) {
	t.Helper()
	nm := &pitstopv1alpha1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "no-such-node"}, Spec: pitstopv1alpha1.NodeMaintenanceSpec{NodeName: "no-such-node"}}
	err := c.Create(t.Context(), nm)
	if err == nil || !strings.Contains(err.Error(), "node no-such-node does not exist") {
		t.Errorf("creating a NodeMaintenance for a missing node: got %v, want the webhook's refusal", err)
	}
}

// assertAggregated waits until the cluster's aggregation controller has
// added the chart's pitstop-view rules to the built-in view and edit roles,
// and checks that pitstop-edit's were not (rbac.aggregateToEdit is off by
// default).
func assertAggregated(t *testing.T, c client.Client) {
	t.Helper()
	grants := func(role, verb string) bool {
		r := &rbacv1.ClusterRole{}
		if err := c.Get(t.Context(), client.ObjectKey{Name: role}, r); err != nil {
			t.Fatal(err)
		}
		for _, rule := range r.Rules {
			if slices.Contains(rule.APIGroups, pitstopv1alpha1.GroupVersion.Group) && slices.Contains(rule.Resources, "nodemaintenances") && slices.Contains(rule.Verbs, verb) {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(30 * time.Second); !(grants("view", "list") && grants("edit", "list")); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the built-in roles do not grant reading pitstop's objects: view lists them %v, edit lists them %v", grants("view", "list"), grants("edit", "list"))
		}
	}
	for _, role := range []string{"edit", "admin"} {
		if grants(role, "create") {
			t.Errorf("the built-in %s role creates pitstop's objects, though rbac.aggregateToEdit is off", role)
		}
	}
}

// assertUncordoned waits for the node to be schedulable again, as deleting
// its NodeMaintenance promises.
func assertUncordoned(t *testing.T, c client.Client, name string) {
	t.Helper()
	node := &corev1.Node{}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(500 * time.Millisecond) {
		if err := c.Get(t.Context(), client.ObjectKey{Name: name}, node); err != nil {
			t.Fatal(err)
		}
		if !node.Spec.Unschedulable {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s is still cordoned a minute after its NodeMaintenance was deleted", name)
		}
	}
}

// assertNothingLeft checks that `helm uninstall` left nothing of pitstop's
// in the cluster but its CRDs, which Helm keeps, and Events, which expire.
func assertNothingLeft(t *testing.T, c client.Client) {
	t.Helper()
	inNamespace := []client.ObjectList{&corev1.PodList{}, &corev1.ServiceList{}, &corev1.SecretList{}, &corev1.ConfigMapList{},
		&corev1.ServiceAccountList{}, &coordinationv1.LeaseList{}, &rbacv1.RoleList{}, &rbacv1.RoleBindingList{}, &appsv1.DeploymentList{}}
	labelled := []client.ObjectList{&rbacv1.ClusterRoleList{}, &rbacv1.ClusterRoleBindingList{}, &rbacv1.RoleList{}, &rbacv1.RoleBindingList{},
		&admissionregistrationv1.ValidatingWebhookConfigurationList{}}
	var left []string
	deadline := time.Now().Add(time.Minute)
	for {
		left = left[:0]
		for _, l := range inNamespace {
			left = append(left, listed(t, c, l, client.InNamespace(namespace))...)
		}
		for _, l := range labelled {
			left = append(left, listed(t, c, l, client.MatchingLabels{"app.kubernetes.io/name": "pitstop"})...)
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	if len(left) > 0 {
		t.Errorf("left behind after helm uninstall: %v", left)
	}
}

// listed names the objects of the list, but those every namespace has.
func listed(t *testing.T, c client.Client, list client.ObjectList, opts ...client.ListOption) []string {
	t.Helper()
	if err := c.List(t.Context(), list, opts...); err != nil {
		t.Fatal(err)
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, item := range items {
		obj := item.(client.Object)
		kind := strings.TrimSuffix(fmt.Sprintf("%T", list), "List")
		name := obj.GetName()
		if name == "default" && kind == "*v1.ServiceAccount" || name == "kube-root-ca.crt" {
			continue
		}
		out = append(out, kind+" "+obj.GetNamespace()+"/"+name)
	}
	return out
}
