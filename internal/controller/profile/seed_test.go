package profile_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pitstopv1alpha1 "github.com/pitstop-dev/pitstop/api/v1alpha1"
	"github.com/pitstop-dev/pitstop/internal/controller/profile"
	"github.com/pitstop-dev/pitstop/internal/engine"
	"github.com/pitstop-dev/pitstop/internal/manager"
	"github.com/pitstop-dev/pitstop/internal/testutil"
	"github.com/pitstop-dev/pitstop/internal/testutil/clustertest"
)

// TestANodeTheMaintenanceControllerLeftKeepsItsStateAndItsLabel: with
// --smc-compat, a node the maintenance-controller left in-maintenance
// (its record, cloud.sap/maintenance-data) stays in-maintenance when
// pitstop takes over, since the time it entered it; every node carries
// cloud.sap/maintenance-state beside pitstop.dev/state, and both follow
// the node's moves. The node the maintenance-controller cordoned (no
// NodeMaintenance holds it) is uncordoned on its way out by the restore
// trigger an imported `eviction: uncordon` becomes.
func TestANodeTheMaintenanceControllerLeftKeepsItsStateAndItsLabel(t *testing.T) {
	entered := time.Now().UTC().Add(-10 * time.Minute).Truncate(time.Millisecond)
	p := rollingProfile("smc", "smc", 1)
	p.Spec.Triggers = append(p.Spec.Triggers, pitstopv1alpha1.TriggerInstance{Name: "uncordon", Restore: &pitstopv1alpha1.RestoreTrigger{Uncordon: true}})
	p.Spec.States.InMaintenance.Transitions[0].Triggers = []string{"uncordon"}
	testutil.Create(t, env.Client, p)
	testutil.Create(t, env.Client,
		testutil.Node("smc-0", testutil.WithLabels(map[string]string{"pool": "smc", pitstopv1alpha1.LabelSeedState: "in-maintenance"}), testutil.Unschedulable(), func(n *corev1.Node) {
			n.Annotations = map[string]string{"reboot-needed": "true", pitstopv1alpha1.AnnotationSeedData: fmt.Sprintf(
				`{"Profiles":{"smc":{"Transition":%q,"Current":"in-maintenance","Previous":"maintenance-required"}},"Notifications":{}}`, entered.Format(time.RFC3339Nano))}
		}),
		testutil.Node("smc-1", testutil.WithLabels(map[string]string{"pool": "smc"})))
	clustertest.StartManager(t, env.Config, env.Client, clustertest.Options{Tune: func(o *manager.Options) { o.SMCCompat = true }})

	states := func(node, want string) {
		t.Helper()
		testutil.Eventually(t, 20*time.Second, 100*time.Millisecond, func() error {
			n := testutil.GetNode(t, env.Client, node)
			if n.Labels[pitstopv1alpha1.LabelState] != want || n.Labels[pitstopv1alpha1.LabelSeedState] != want {
				return fmt.Errorf("%s: %s=%q, %s=%q, want %s", node, pitstopv1alpha1.LabelState, n.Labels[pitstopv1alpha1.LabelState],
					pitstopv1alpha1.LabelSeedState, n.Labels[pitstopv1alpha1.LabelSeedState], want)
			}
			return nil
		})
	}
	states("smc-0", "in-maintenance")
	states("smc-1", "operational")
	if !testutil.GetNode(t, env.Client, "smc-0").Spec.Unschedulable {
		t.Fatal("smc-0 was uncordoned while in maintenance")
	}
	rec, err := engine.ReadRecord(testutil.GetNode(t, env.Client, "smc-0"))
	if err != nil {
		t.Fatal(err)
	}
	if pr := rec.Profiles["smc"]; pr.Current != pitstopv1alpha1.StateInMaintenance || !pr.Since.Equal(entered) {
		t.Errorf("pitstop's record %+v, want in-maintenance since %s", pr, entered)
	}
	seedRecord(t, "smc-0", pitstopv1alpha1.StateInMaintenance, entered)

	n := testutil.GetNode(t, env.Client, "smc-0")
	base := n.DeepCopy()
	delete(n.Annotations, "reboot-needed")
	if err := env.Client.Patch(t.Context(), n, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	states("smc-0", "operational")
	if testutil.GetNode(t, env.Client, "smc-0").Spec.Unschedulable {
		t.Error("smc-0 is operational but still cordoned: the restore with uncordon left the maintenance-controller's cordon")
	}
	seedRecord(t, "smc-0", pitstopv1alpha1.StateOperational, time.Time{})
}

// seedRecord asserts that the node's cloud.sap/maintenance-data reads as
// the maintenance-controller reads it (its fields, no other) and says the
// node is in state in profile smc, entered at since (any time when zero),
// its entry done (the previous state is the current one).
func seedRecord(t *testing.T, node string, state pitstopv1alpha1.MaintenanceState, since time.Time) {
	t.Helper()
	var seed struct {
		Profiles map[string]struct {
			Transition time.Time
			Current    pitstopv1alpha1.MaintenanceState
			Previous   pitstopv1alpha1.MaintenanceState
		}
		Notifications map[string]time.Time
	}
	testutil.Eventually(t, 10*time.Second, 100*time.Millisecond, func() error {
		data := testutil.GetNode(t, env.Client, node).Annotations[pitstopv1alpha1.AnnotationSeedData]
		dec := json.NewDecoder(strings.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&seed); err != nil {
			return fmt.Errorf("%s %q: %v", pitstopv1alpha1.AnnotationSeedData, data, err)
		}
		pr, ok := seed.Profiles["smc"]
		if !ok || pr.Current != state || pr.Previous != state || (!since.IsZero() && !pr.Transition.Equal(since)) {
			return fmt.Errorf("%s %q, want profile smc %s since %v, its entry done", pitstopv1alpha1.AnnotationSeedData, data, state, since)
		}
		return nil
	})
}

// TestTheLogDetailsLabelLogsEachEvaluation: a node labelled
// cloud.sap/maintenance-log-details=true (the maintenance-controller's
// label) has each evaluation logged, every check with its result and
// reason; a node without the label logs nothing of it.
func TestTheLogDetailsLabelLogsEachEvaluation(t *testing.T) {
	const pool = "logdetails"
	testutil.Create(t, env.Client, rollingProfile(pool, pool, 1))
	detailed, quiet := pool+"-detailed", pool+"-quiet"
	for _, n := range []string{detailed, quiet} {
		labels := map[string]string{"pool": pool}
		if n == detailed {
			labels[pitstopv1alpha1.LabelSeedLogDetails] = "true"
		}
		testutil.Create(t, env.Client, testutil.Node(n, testutil.WithLabels(labels)))
	}
	var mu sync.Mutex
	var logged bytes.Buffer
	ctx := ctrl.LoggerInto(t.Context(), funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		logged.WriteString(args + "\n")
	}, funcr.Options{}))
	r := profile.NewBareReconciler(env.Client, env.Client)
	for _, n := range []string{detailed, quiet} {
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: n}}); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	out := logged.String()
	mu.Unlock()
	for _, want := range []string{`"node"="` + detailed + `"`, `"msg"="Evaluated"`, `"transition"="reboot_needed"`, `reboot_needed=false (annotation reboot-needed is not set)`} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, quiet) {
		t.Errorf("the node without the label was logged:\n%s", out)
	}
}
