package seedfile_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/importer"
	"github.com/pitstop-dev/pitstop/internal/manager"
	"github.com/pitstop-dev/pitstop/internal/testutil"
	"github.com/pitstop-dev/pitstop/internal/testutil/clustertest"
)

// configMapVolume is a ConfigMap's key maintenance.yaml as the kubelet
// mounts it: dir/maintenance.yaml is a symlink to ..data/maintenance.yaml,
// and ..data a symlink to a directory of the ConfigMap's current content.
type configMapVolume struct {
	t   *testing.T
	dir string
	n   int
}

func newConfigMapVolume(t *testing.T, content string) *configMapVolume {
	t.Helper()
	v := &configMapVolume{t: t, dir: t.TempDir()}
	v.update(content)
	if err := os.Symlink(filepath.Join("..data", "maintenance.yaml"), v.path()); err != nil {
		t.Fatal(err)
	}
	return v
}

func (v *configMapVolume) path() string { return filepath.Join(v.dir, "maintenance.yaml") }

// update changes the content as the kubelet does (its AtomicWriter): a
// new directory, a new symlink to it, renamed over ..data at once, and
// the old directory removed. The file's path never changes; what it
// points at does.
func (v *configMapVolume) update(content string) {
	t := v.t
	t.Helper()
	v.n++
	ts := fmt.Sprintf("..2026_11_28_12_00_%02d.%d", v.n, v.n)
	if err := os.Mkdir(filepath.Join(v.dir, ts), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(v.dir, ts, "maintenance.yaml"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	old, _ := os.Readlink(filepath.Join(v.dir, "..data"))
	if err := os.Symlink(ts, filepath.Join(v.dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(v.dir, "..data_tmp"), filepath.Join(v.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(v.dir, old)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFollowsAConfigMapTheKubeletUpdates: an edit of a mounted ConfigMap,
// which the kubelet makes by swapping the ..data symlink, is applied, as
// is the next one.
func TestFollowsAConfigMapTheKubeletUpdates(t *testing.T) {
	vol := newConfigMapVolume(t, maintenanceYAML(1, "mounted-a"))
	start(t, vol.path())
	awaitProfile(t, "mounted-a", hasBudget(1))

	vol.update(maintenanceYAML(2, "mounted-a"))
	awaitProfile(t, "mounted-a", hasBudget(2))
	// The same length, written within the same second as the one before.
	vol.update(maintenanceYAML(7, "mounted-a"))
	awaitProfile(t, "mounted-a", hasBudget(7))
}

// TestARefusalWithoutProfilesRegardsPitstopsNamespace: while the file
// yields no profile, a refused edit is an Event regarding pitstop's
// Namespace, each refusal with its own message.
func TestARefusalWithoutProfilesRegardsPitstopsNamespace(t *testing.T) {
	path := newFile(t, maintenanceYAML(1))
	start(t, path)
	writeFile(t, path, strings.Replace(maintenanceYAML(1), "instances:", "instances: [", 1))
	awaitEvent(t, "Namespace", ns, pitstopv1alpha1.EventSeedConfigRefused, path+":4: not valid YAML")
	writeFile(t, path, strings.Replace(maintenanceYAML(1), "type: maxMaintenance", "type: noSuchCheck", 1))
	awaitEvent(t, "Namespace", ns, pitstopv1alpha1.EventSeedConfigRefused, path+`:10: check instance "count": unknown plugin type "noSuchCheck"`)
}

// notifyingYAML is a profile that sends a Slack message, with the hook in
// clear, as maintenance.yaml files hold it.
const notifyingYAML = `instances:
  notify:
  - type: slack
    name: started
    config:
      hook: https://hooks.slack.com/services/T0/B0/secret
      channel: "#maintenance"
      message: "{{ .Node.Name }} is in maintenance"
    schedule:
      type: oneshot
      config:
        delay: 1m
  check:
  - type: hasAnnotation
    name: reboot_needed
    config:
      key: reboot-needed
profiles:
- name: notified-a
  operational:
    transitions:
    - check: reboot_needed
      next: in-maintenance
  in-maintenance:
    notify: started
    transitions:
    - check: "!reboot_needed"
      next: operational
`

// TestKeepsTheNotificationsSecret: the hook the file holds in clear goes
// into the Secret `pitstop import` makes, in pitstop's namespace and
// labelled as the seed file's; an edit without notifications deletes it.
func TestKeepsTheNotificationsSecret(t *testing.T) {
	path := newFile(t, notifyingYAML)
	start(t, path)
	key := client.ObjectKey{Namespace: ns, Name: importer.DefaultSecretName}
	testutil.Eventually(t, wait, 50*time.Millisecond, func() error {
		s := &corev1.Secret{}
		if err := env.Client.Get(t.Context(), key, s); err != nil {
			return err
		}
		if string(s.Data["started.hook"]) != "https://hooks.slack.com/services/T0/B0/secret" {
			return fmt.Errorf("the Secret holds %v, want the hook as started.hook", s.Data)
		}
		if s.Labels[pitstopv1alpha1.LabelManagedBy] != pitstopv1alpha1.ManagedBySeedFile || s.Labels[pitstopv1alpha1.LabelUsableByProfiles] != "true" {
			return fmt.Errorf("the Secret is labelled %v", s.Labels)
		}
		return nil
	})
	awaitProfile(t, "notified-a", func(p *pitstopv1alpha1.MaintenanceProfile) error {
		if len(p.Spec.Notifications) != 1 || p.Spec.Notifications[0].Slack == nil || p.Spec.Notifications[0].Slack.WebhookURL.Name != importer.DefaultSecretName {
			return fmt.Errorf("notifications %+v, want the Slack one reading the Secret", p.Spec.Notifications)
		}
		return nil
	})

	writeFile(t, path, maintenanceYAML(1, "notified-a"))
	testutil.Eventually(t, wait, 50*time.Millisecond, func() error {
		err := env.Client.Get(t.Context(), key, &corev1.Secret{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("the Secret is still there once no notification needs it: %v", err)
	})
}

// TestTheManagerFollowsTheFile: pitstop's manager with --seed-config-file,
// as the chart's ServiceAccount and with its admission webhook, applies
// the file's profiles, which its engine then runs.
func TestTheManagerFollowsTheFile(t *testing.T) {
	path := newFile(t, maintenanceYAML(1, "manager-a"))
	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{Webhook: true, AsServiceAccount: true, Tune: func(o *manager.Options) {
		o.SeedConfigFile = path
	}})
	t.Cleanup(func() {
		deleteAndWait(t, &pitstopv1alpha1.MaintenanceProfile{ObjectMeta: metav1.ObjectMeta{Name: "manager-a"}})
	})
	awaitProfile(t, "manager-a", hasBudget(1))
	awaitProfile(t, "manager-a", func(p *pitstopv1alpha1.MaintenanceProfile) error {
		for _, typ := range []string{pitstopv1alpha1.ConditionReady, pitstopv1alpha1.ConditionSeedConfigCurrent} {
			if !meta.IsStatusConditionTrue(p.Status.Conditions, typ) {
				return fmt.Errorf("conditions %+v, want %s True", p.Status.Conditions, typ)
			}
		}
		return nil
	})
	writeFile(t, path, maintenanceYAML(5, "manager-a"))
	awaitProfile(t, "manager-a", hasBudget(5))
}
