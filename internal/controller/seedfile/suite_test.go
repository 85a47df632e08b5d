package seedfile_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/controller/profile"
	"github.com/pitstop-dev/pitstop/internal/controller/seedfile"
	"github.com/pitstop-dev/pitstop/internal/importer"
	"github.com/pitstop-dev/pitstop/internal/testutil"
)

// env is a real API server and etcd with pitstop's CRDs.
var env *testutil.Env

func TestMain(m *testing.M) { testutil.Main(m, &env) }

// ns is pitstop's namespace, where the chart's RBAC lets it keep the
// notifications' Secret.
const ns = testutil.ChartNamespace

// wait bounds each wait for the seed file, which reads the file every
// 100ms in these tests.
const wait = 20 * time.Second

// start follows the file at path, as the chart's ServiceAccount with
// exactly the RBAC the chart grants, and runs the profile controller (as
// the admin: it is not under test), which writes the profiles' Valid and
// Ready conditions and holds them with its finalizer. At the end of the
// test every profile the file made is deleted, before the controllers
// stop.
func start(t *testing.T, path string) {
	t.Helper()
	sa := testutil.ServiceAccountConfig(t, env.Config, env.Client)
	testutil.StartControllers(t, env.Config, ctrl.Options{}, func(mgr ctrl.Manager) error {
		_, err := profile.Setup(mgr, profile.Options{MaxConcurrentReconciles: 2, LeaseNamespace: ns})
		return err
	})
	follower := testutil.StartControllers(t, sa, ctrl.Options{}, func(mgr ctrl.Manager) error {
		_, err := seedfile.Setup(mgr, seedfile.Options{Path: path, Namespace: ns, Interval: 100 * time.Millisecond})
		return err
	})
	t.Cleanup(func() {
		follower.Stop()
		ctx := context.Background()
		var list pitstopv1alpha1.MaintenanceProfileList
		if err := env.Client.List(ctx, &list, client.MatchingLabels{pitstopv1alpha1.LabelManagedBy: pitstopv1alpha1.ManagedBySeedFile}); err != nil {
			t.Error(err)
		}
		for i := range list.Items {
			deleteAndWait(t, &list.Items[i])
		}
		_ = env.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: importer.DefaultSecretName}})
	})
}

// deleteAndWait deletes obj and waits until it is gone.
func deleteAndWait(t *testing.T, obj client.Object) {
	t.Helper()
	ctx := context.Background()
	if err := env.Client.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
		t.Error(err)
		return
	}
	testutil.Eventually(t, wait, 50*time.Millisecond, func() error {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("%s still exists: %v", obj.GetName(), err)
	})
}

// maintenanceYAML is a maintenance.yaml whose profiles each take the nodes
// that need a reboot into maintenance, budget of them at a time. The
// instance of the maxMaintenance check is at line 10.
func maintenanceYAML(budget int, profiles ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `intervals:
  requeue: 60s
instances:
  check:
  - type: hasAnnotation
    name: reboot_needed
    config:
      key: reboot-needed
      value: "true"
  - type: maxMaintenance
    name: count
    config:
      max: %d
  trigger:
  - type: alterAnnotation
    name: mark
    config:
      key: maintained
      value: "true"
profiles:
`, budget)
	if len(profiles) == 0 {
		return strings.TrimSuffix(b.String(), "\n") + " []\n"
	}
	for _, name := range profiles {
		fmt.Fprintf(&b, `- name: %s
  operational:
    transitions:
    - check: reboot_needed
      next: maintenance-required
  maintenance-required:
    transitions:
    - check: count
      trigger: mark
      next: in-maintenance
  in-maintenance:
    transitions:
    - check: "!reboot_needed"
      next: operational
`, name)
	}
	return b.String()
}

// writeFile writes content to path as editors and kubectl cp do, by a
// rename over it, so that the seed file never reads half a file.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// newFile writes content to maintenance.yaml in a directory of the test's
// own and returns its path.
func newFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "maintenance.yaml")
	writeFile(t, path, content)
	return path
}

// getProfile reads a profile; nil when there is none.
func getProfile(t *testing.T, name string) *pitstopv1alpha1.MaintenanceProfile {
	t.Helper()
	p := &pitstopv1alpha1.MaintenanceProfile{}
	err := env.Client.Get(t.Context(), client.ObjectKey{Name: name}, p)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// awaitProfile waits until the profile exists and check accepts it, and
// returns it as it was then.
func awaitProfile(t *testing.T, name string, check func(*pitstopv1alpha1.MaintenanceProfile) error) *pitstopv1alpha1.MaintenanceProfile {
	t.Helper()
	var p *pitstopv1alpha1.MaintenanceProfile
	testutil.Eventually(t, wait, 50*time.Millisecond, func() error {
		if p = getProfile(t, name); p == nil {
			return fmt.Errorf("no MaintenanceProfile %s", name)
		}
		return check(p)
	})
	return p
}

// budgetOf is the max of the profile's maxMaintenance check.
func budgetOf(p *pitstopv1alpha1.MaintenanceProfile) int32 {
	for _, c := range p.Spec.Checks {
		if c.MaxMaintenance != nil {
			return c.MaxMaintenance.Max
		}
	}
	return -1
}

// hasBudget accepts a profile from the file with a budget of max.
func hasBudget(max int32) func(*pitstopv1alpha1.MaintenanceProfile) error {
	return func(p *pitstopv1alpha1.MaintenanceProfile) error {
		if p.Labels[pitstopv1alpha1.LabelManagedBy] != pitstopv1alpha1.ManagedBySeedFile {
			return fmt.Errorf("profile %s labels %v, want %s=%s", p.Name, p.Labels, pitstopv1alpha1.LabelManagedBy, pitstopv1alpha1.ManagedBySeedFile)
		}
		if got := budgetOf(p); got != max {
			return fmt.Errorf("profile %s budget %d, want %d", p.Name, got, max)
		}
		return nil
	}
}

// hasCondition accepts a profile whose SeedConfigCurrent condition has
// status and reason and a message holding each of contains.
func hasCondition(status metav1.ConditionStatus, reason string, contains ...string) func(*pitstopv1alpha1.MaintenanceProfile) error {
	return func(p *pitstopv1alpha1.MaintenanceProfile) error {
		c := meta.FindStatusCondition(p.Status.Conditions, pitstopv1alpha1.ConditionSeedConfigCurrent)
		if c == nil || c.Status != status || c.Reason != reason {
			return fmt.Errorf("profile %s condition %s = %+v, want %s %s", p.Name, pitstopv1alpha1.ConditionSeedConfigCurrent, c, status, reason)
		}
		for _, s := range contains {
			if !strings.Contains(c.Message, s) {
				return fmt.Errorf("profile %s condition message %q does not say %q", p.Name, c.Message, s)
			}
		}
		return nil
	}
}

// awaitEvent waits for an Event of reason regarding kind/name whose note
// holds each of contains.
func awaitEvent(t *testing.T, kind, name, reason string, contains ...string) {
	t.Helper()
	testutil.Eventually(t, wait, 100*time.Millisecond, func() error {
		var list eventsv1.EventList
		if err := env.Client.List(t.Context(), &list, client.InNamespace(metav1.NamespaceDefault)); err != nil {
			return err
		}
		var seen []string
	events:
		for _, e := range list.Items {
			if e.Regarding.Kind != kind || e.Regarding.Name != name || e.Reason != reason {
				continue
			}
			seen = append(seen, e.Note)
			for _, s := range contains {
				if !strings.Contains(e.Note, s) {
					continue events
				}
			}
			return nil
		}
		return fmt.Errorf("no %s Event regarding %s %s saying %q; seen %q", reason, kind, name, contains, seen)
	})
}
